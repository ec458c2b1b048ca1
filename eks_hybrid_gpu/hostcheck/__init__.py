"""GPU host preflight: checks a host against one allocation owner's floors and prints its inventory.

Standard library only, because it runs on the GPU host before anything else is installed there.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eks_hybrid_gpu.hostcheck`: the vocabulary made importable first (an installed wheel has none)."""
    from eks_hybrid_gpu import projectdir

    projectdir.importable_from_elsewhere()
    from eks_hybrid_gpu.hostcheck.cli import main as check

    return check(None if argv is None else list(argv))
