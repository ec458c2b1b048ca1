"""The host-check zipapp: built from the checkout, it runs under a bare `python3 -S -I` and judges as the module."""

from __future__ import annotations

import json
import modulefinder
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.recorded_host import host_args

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "scripts" / "build_hostcheck.py"
sys.path.insert(0, str(BUILD.parent))
import build_hostcheck  # noqa: E402  (a script, not a package)


@pytest.mark.unit
@pytest.mark.parametrize(("smi_fixture", "exit_code"), [("driver-570.csv", 0), ("old-driver.csv", 1)])
def test_zipapp_runs_bare_and_agrees_with_the_module(tmp_path: Path, smi_fixture: str, exit_code: int) -> None:
    pyz = tmp_path / "eks-hybrid-gpu-hostcheck.pyz"
    built = subprocess.run([sys.executable, str(BUILD), "--out", str(pyz)], capture_output=True, text=True, check=True)
    assert "sha256:" in built.stdout
    assert pyz.stat().st_size < 200_000
    args = host_args(tmp_path, smi_fixture)
    # -S -I: no site-packages, no checkout on the path, no environment: what a GPU host's python3 has
    bare = subprocess.run(["python3", "-S", "-I", str(pyz), *args], capture_output=True, text=True, cwd=tmp_path)
    module = subprocess.run(
        [sys.executable, "-m", "eks_hybrid_gpu.hostcheck", *args], capture_output=True, text=True, cwd=REPO
    )
    assert bare.returncode == module.returncode == exit_code, bare.stderr
    assert json.loads(bare.stdout) == json.loads(module.stdout)


@pytest.mark.unit
def test_a_third_party_import_refuses_the_build(tmp_path: Path) -> None:
    entry = tmp_path / "entry.py"
    entry.write_text("import json\nimport yaml\nfrom collections import OrderedDict\n")
    finder = modulefinder.ModuleFinder(path=[str(tmp_path)])
    finder.run_script(str(entry))
    assert build_hostcheck._foreign_imports(finder, {"__main__"}) == ["yaml"]
