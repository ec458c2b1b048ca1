"""The project's wheel, built from the working tree and installed into a fresh venv outside the checkout, offline.

CI has no internet, so nothing here reaches an index:
- the wheel is built from a copy of the tracked and untracked-but-not-ignored files (`git ls-files`), with the
  setuptools of the tested venv (`pip wheel --no-build-isolation --no-index`), so the checkout gets no build/;
- the fresh venv (`python -m venv --without-pip`) gets the wheel alone, by the tested venv's pip
  (`pip --python VENV install --no-deps --no-index`);
- its dependencies are the tested venv's installed packages, the exact hashed set of requirements.lock, made
  visible by one `.pth` line naming that site-packages. `--system-site-packages` would not be the same: it shows
  the base interpreter's packages, not the locked set. A `.pth` line adds the folder only; the `.pth` files in it
  (the checkout's editable install among them) are not run, so the checkout stays invisible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    """A wheel and the fresh venv it is installed in."""

    wheel: Path
    venv: Path
    elsewhere: Path
    """A working directory outside the checkout, with no Pulumi.yaml above it."""

    @property
    def command(self) -> Path:
        """The venv's `eks-hybrid-gpu` console script."""
        return self.venv / "bin" / "eks-hybrid-gpu"

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.venv / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        """Where the wheel's files went."""
        return next((self.venv / "lib").glob("python3*/site-packages"))

    def names(self) -> list[str]:
        """The wheel's file names."""
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.namelist()

    def run(self, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`eks-hybrid-gpu ARGV...` in the venv, without the test process's PYTHONPATH or virtualenv."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        return subprocess.run(
            [str(self.command), *argv], cwd=cwd or self.elsewhere, env=env, capture_output=True, text=True, check=False
        )


def source_files(under: str = "") -> list[str]:
    """The working tree's tracked and untracked-but-not-ignored files (what a clean checkout of it holds)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "--", under or "."],
        check=True,
        capture_output=True,
        text=True,
    )
    return sorted(f for f in listed.stdout.splitlines() if (REPO / f).is_file())


def copy_files(files: list[str], destination: Path) -> Path:
    """Copy `files` (relative to the checkout) under `destination`, modes kept."""
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return destination


def build_and_install(tmp: Path) -> Installed:
    """Build the wheel from a copy of the working tree, install it into a fresh venv, link the locked set."""
    source = copy_files(source_files(), tmp / "source")
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("eks_hybrid_gpu-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    subprocess.run(
        [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    installed = Installed(wheel, venv, tmp / "elsewhere")
    (installed.site_packages / "locked-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed.elsewhere.mkdir()
    return installed
