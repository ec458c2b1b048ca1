"""The host check as one file for a GPU host's bare python3, and `eks-hybrid-gpu hostcheck`, which writes it.

A GPU host has no checkout and no virtual environment: `eks-hybrid-gpu hostcheck --artifact PATH` (from the
installed wheel, or `scripts/build_hostcheck.py` in a checkout) writes `eks-hybrid-gpu-hostcheck.pyz`, a zipapp
holding exactly the modules `eks_hybrid_gpu.hostcheck.cli` imports (found by `modulefinder`, so a new import is
carried without editing a list). The build refuses a module that imports anything outside the standard library.

The archive runs on the default python3 of every EKS Hybrid Nodes OS (3.6 on RHEL 8 to 3.12 on Ubuntu 24.04):
its `__main__` is written in syntax every Python parses, so Python 2.7 or 3.5 prints one line naming what to
install and exits 2; on 3.6 it adds the host check's own `dataclasses` (eks_hybrid_gpu/hostcheck/py36).
The bytes are reproducible: the same sources give the same archive (sorted entries, fixed timestamps and modes,
no build-time data); the version and a digest of the sources are stamped in, for `--version` and the inventory.
"""

import argparse
import hashlib
import io
import modulefinder
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Final

from eks_hybrid_gpu.hostcheck import cli as hostcheck_cli

PACKAGE_PARENT: Final = Path(__file__).resolve().parent.parent
"""Where `eks_hybrid_gpu` is imported from: the checkout, or site-packages."""
ARTIFACT_NAME: Final = "eks-hybrid-gpu-hostcheck.pyz"
ENTRY: Final = "eks_hybrid_gpu.hostcheck.cli"
OURS: Final = ("eks_hybrid_gpu", "policy")
LEFT_OUT: Final = ("eks_hybrid_gpu.projectdir",)
"""Imported by `python -m eks_hybrid_gpu.hostcheck` to find the vocabulary; the archive carries it instead."""
PY36_DIR: Final = Path(__file__).resolve().parent / "hostcheck" / "py36"
STAMP: Final = "eks_hybrid_gpu/hostcheck/_stamp.py"
SHEBANG: Final = b"#!/usr/bin/env python3\n"
FLOOR: Final = (3, 6)
TIMESTAMP: Final = (1980, 1, 1, 0, 0, 0)
MAIN: Final = """# eks-hybrid-gpu hostcheck. What follows parses on every Python, so an old one says what to install.
import sys

if sys.version_info < (3, 6):
    sys.stderr.write(
        "eks-hybrid-gpu hostcheck: this is Python %d.%d (%s); the host check needs Python 3.6 or newer: install "
        "the OS's python3 package (dnf install python3, apt-get install python3) and run it with that python3\\n"
        % (sys.version_info[0], sys.version_info[1], sys.executable)
    )
    sys.exit(2)
if sys.version_info < (3, 7):
    import os.path

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "eks_hybrid_gpu", "hostcheck", "py36"))

from eks_hybrid_gpu.hostcheck.cli import main  # noqa: E402

sys.exit(main())
"""


class NotStandardLibrary(Exception):
    """A module the host check imports is neither ours nor part of the standard library."""


def _is_standard(name: str) -> bool:
    return name.partition(".")[0] in sys.stdlib_module_names


def _project_root() -> Path:
    """Where `policy` is imported from: the checkout, or the wheel's `eks_hybrid_gpu/_project`."""
    from eks_hybrid_gpu import projectdir

    return projectdir.SHIPPED


def foreign_imports(finder: modulefinder.ModuleFinder, our_names: set[str]) -> list[str]:
    """Imports our modules make that resolved nowhere but a site-packages (a `from PKG import NAME` is no module)."""
    return sorted(
        name
        for name, callers in finder.badmodules.items()
        if our_names.intersection(callers) and not _is_standard(name) and name.rpartition(".")[0] not in our_names
    )


def modules() -> dict[str, bytes]:
    """Archive name -> source bytes of every module the host check imports; refuses third-party imports."""
    standard_path = [entry for entry in sys.path[1:] if entry and "-packages" not in entry and Path(entry).exists()]
    finder = modulefinder.ModuleFinder(
        path=[str(PACKAGE_PARENT), str(_project_root()), *standard_path], excludes=list(LEFT_OUT)
    )
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "entry.py"
        script.write_text(f"import {ENTRY}\n", encoding="utf-8")
        finder.run_script(str(script))
    found: dict[str, bytes] = {}
    our_names: set[str] = set()
    for name, module in finder.modules.items():
        filename = getattr(module, "__file__", None)
        if name.partition(".")[0] not in OURS or not filename:
            continue
        our_names.add(name)
        package = getattr(module, "__path__", None) is not None
        found[name.replace(".", "/") + ("/__init__.py" if package else ".py")] = Path(filename).read_bytes()
    foreign = foreign_imports(finder, our_names)
    if foreign:
        msg = (
            f"the host check imports {foreign}, which a bare python3 on a GPU host lacks: keep "
            "eks_hybrid_gpu/hostcheck and the vocabulary it uses standard library only"
        )
        raise NotStandardLibrary(msg)
    for shim in sorted(PY36_DIR.glob("*.py")):
        found[f"eks_hybrid_gpu/hostcheck/py36/{shim.name}"] = shim.read_bytes()
    return found


def version() -> str:
    """The installed distribution's version; in a checkout that is not installed, pyproject.toml's."""
    try:
        return metadata.version("eks-hybrid-gpu")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = PACKAGE_PARENT / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])


def source_digest(sources: dict[str, bytes]) -> str:
    """sha256 over the archive's module names and bytes, in order: which sources an artifact was built from."""
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name] + b"\0")
    return digest.hexdigest()


def archive() -> bytes:
    """The artifact's bytes: the same sources always give the same bytes."""
    sources = modules()
    entries = dict(sources)
    entries[STAMP] = f'VERSION = "{version()}"\nSOURCE = "{source_digest(sources)[:16]}"\n'.encode()
    entries["__main__.py"] = MAIN.encode()
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=TIMESTAMP)
            info.external_attr = 0o644 << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, entries[name], compresslevel=9)
    return buffer.getvalue()


def write(out: Path) -> tuple[Path, int, str]:
    """Writes the artifact at `out` (executable); returns its path, size and sha256."""
    data = archive()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    out.chmod(0o755)
    return out, len(data), hashlib.sha256(data).hexdigest()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu hostcheck`: the check's own options, and `--artifact PATH` to write it for a host."""
    hostcheck_cli.add_arguments(parser, owner_required=False)
    parser.add_argument(
        "--artifact",
        type=Path,
        metavar="PATH",
        help=f"write the host check as one file ({ARTIFACT_NAME}) for a GPU host's python3 (3.6 or newer) and exit",
    )


def run(args: argparse.Namespace) -> int:
    """Write the artifact when `--artifact` is given, else check this host."""
    if args.artifact is None:
        if args.owner is None:
            print("eks-hybrid-gpu hostcheck: error: --owner is required (or --artifact PATH)", file=sys.stderr)
            return 2
        return hostcheck_cli.run(args)
    target = args.artifact / ARTIFACT_NAME if args.artifact.is_dir() else args.artifact
    try:
        path, size, digest = write(target)
    except NotStandardLibrary as error:
        print(f"eks-hybrid-gpu hostcheck: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"eks-hybrid-gpu hostcheck: cannot write {target}: {error.strerror}", file=sys.stderr)
        return 2
    print(f"{path}  {size} bytes  sha256:{digest}  version {version()}")
    return 0
