"""GPU host preflight: checks a host against one allocation owner's floors and prints its inventory.

Standard library only, and Python 3.6 or newer, because it runs on the GPU host before anything else is installed
there: the artifact (`eks-hybrid-gpu hostcheck --artifact PATH`, eks_hybrid_gpu/hostcheck/artifact.py) runs under
the default python3 of every EKS Hybrid Nodes OS, RHEL 8's 3.6 the oldest.
"""

from typing import Optional, Sequence

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m eks_hybrid_gpu.hostcheck`: the vocabulary made importable first (an installed wheel has none)."""
    from eks_hybrid_gpu import projectdir

    projectdir.importable_from_elsewhere()
    from eks_hybrid_gpu.hostcheck.cli import main as check

    return check(None if argv is None else list(argv))
