#!/usr/bin/env python3
"""Builds `eks-hybrid-gpu-hostcheck.pyz`: the host check as one file that a bare `python3` runs on a GPU host.

A GPU host has no checkout and no virtual environment, and the host check is standard library only for that
reason. This zipapp holds exactly the modules `python -m eks_hybrid_gpu.hostcheck` imports from this repository
(found by `modulefinder`, so a new import is carried without editing a list) and refuses to build when one of
them imports anything outside the standard library: the artifact must run under `python3 -S -I`.

Usage: `python3 scripts/build_hostcheck.py [--out dist/eks-hybrid-gpu-hostcheck.pyz]`; prints the path, size
and sha256 to compare on the host.
"""

from __future__ import annotations

import argparse
import hashlib
import modulefinder
import sys
import tempfile
import zipapp
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENTRY = REPO / "eks_hybrid_gpu" / "hostcheck" / "__main__.py"
DEFAULT_OUT = REPO / "dist" / "eks-hybrid-gpu-hostcheck.pyz"
INTERPRETER = "/usr/bin/env python3"
MAIN = "import sys\nfrom eks_hybrid_gpu.hostcheck import main\n\nsys.exit(main())\n"


class NotStandardLibrary(Exception):
    """A module the host check imports is neither the repository's own nor part of the standard library."""


def _is_standard(name: str) -> bool:
    return name.partition(".")[0] in sys.stdlib_module_names


def _foreign_imports(finder: modulefinder.ModuleFinder, our_names: set[str]) -> list[str]:
    """Imports our modules make that resolved nowhere but a site-packages (a `from PKG import NAME` is no module)."""
    return sorted(
        name
        for name, callers in finder.badmodules.items()
        if our_names.intersection(callers) and not _is_standard(name) and name.rpartition(".")[0] not in our_names
    )


def repository_modules() -> list[Path]:
    """The repository's files the host check imports, package `__init__`s included; refuses third-party imports."""
    standard_path = [entry for entry in sys.path[1:] if "-packages" not in entry]
    finder = modulefinder.ModuleFinder(path=[str(REPO), *standard_path])
    finder.run_script(str(ENTRY))
    ours: set[Path] = set()
    our_names = {"__main__"}
    for name, module in finder.modules.items():
        filename = getattr(module, "__file__", None)
        if filename and Path(filename).resolve().is_relative_to(REPO):
            ours.add(Path(filename).resolve())
            our_names.add(name)
    foreign = _foreign_imports(finder, our_names)
    if foreign:
        msg = (
            f"the host check imports {foreign}, which a bare python3 on a GPU host lacks: "
            "keep eks_hybrid_gpu/hostcheck and the vocabulary it uses standard library only"
        )
        raise NotStandardLibrary(msg)
    for path in list(ours):
        for parent in path.parents:
            if parent == REPO:
                break
            if (parent / "__init__.py").is_file():
                ours.add(parent / "__init__.py")
    return sorted(ours)


def build(out: Path) -> tuple[Path, int, str]:
    """Writes the zipapp at `out`; returns its path, size in bytes and sha256."""
    with tempfile.TemporaryDirectory() as staging_dir:
        staging = Path(staging_dir)
        for source in repository_modules():
            target = staging / source.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
        (staging / "__main__.py").write_text(MAIN)
        out.parent.mkdir(parents=True, exist_ok=True)
        zipapp.create_archive(staging, out, interpreter=INTERPRETER, compressed=True)
    data = out.read_bytes()
    return out, len(data), hashlib.sha256(data).hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Builds the archive where --out says and prints what to compare on the host."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT.relative_to(REPO)}")
    args = parser.parse_args(argv)
    try:
        path, size, digest = build(args.out.resolve())
    except NotStandardLibrary as error:
        print(f"build_hostcheck: {error}", file=sys.stderr)
        return 1
    print(f"{path}  {size} bytes  sha256:{digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
