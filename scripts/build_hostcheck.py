#!/usr/bin/env python3
"""Builds `eks-hybrid-gpu-hostcheck.pyz` from this checkout: `eks-hybrid-gpu hostcheck --artifact PATH`, uninstalled.

The build lives in the package (eks_hybrid_gpu/hostartifact.py), so an installed wheel writes the same bytes.
Usage: `python3 scripts/build_hostcheck.py [--out dist/eks-hybrid-gpu-hostcheck.pyz]`; prints the path, size and
sha256 to compare on the host.
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "dist" / "eks-hybrid-gpu-hostcheck.pyz"


def main(argv: list[str] | None = None) -> int:
    """Builds the archive where --out says and prints what to compare on the host."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT.relative_to(REPO)}")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from eks_hybrid_gpu import cli

    return cli.main(["hostcheck", "--artifact", str(args.out.resolve())])


if __name__ == "__main__":
    raise SystemExit(main())
