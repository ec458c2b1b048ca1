"""The host-check zipapp: written by the package, reproducible, and judging as the module under a bare python3."""

from __future__ import annotations

import json
import modulefinder
import subprocess
import sys
from pathlib import Path

import pytest

from eks_hybrid_gpu import cli, hostartifact
from tests.support.recorded_host import host_args

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "scripts" / "build_hostcheck.py"
PYENV = Path.home() / ".pyenv" / "versions"


def without_python(document: dict) -> dict:
    document["checkedBy"].pop("python")
    document["checkedBy"].pop("source")
    return document


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
    assert without_python(json.loads(bare.stdout)) == without_python(json.loads(module.stdout))


@pytest.mark.unit
def test_the_same_sources_give_the_same_bytes_and_the_cli_writes_them(tmp_path: Path, capsys) -> None:
    first = hostartifact.archive()
    assert hostartifact.archive() == first
    assert cli.main(["hostcheck", "--artifact", str(tmp_path)]) == 0
    written = tmp_path / hostartifact.ARTIFACT_NAME
    assert written.read_bytes() == first
    assert f"{written}  {len(first)} bytes  sha256:" in capsys.readouterr().out


@pytest.mark.unit
def test_version_is_one_line_and_stamped(tmp_path: Path) -> None:
    pyz = tmp_path / "hc.pyz"
    hostartifact.write(pyz)
    shown = subprocess.run(["python3", "-S", "-I", str(pyz), "--version"], capture_output=True, text=True, check=True)
    digest = hostartifact.source_digest(hostartifact.modules())[:16]
    assert shown.stdout.splitlines() == [
        f"eks-hybrid-gpu hostcheck {hostartifact.version()} (Python {sys.version.split()[0]}, artifact source {digest})"
    ]


@pytest.mark.unit
def test_python_2_gets_one_line_naming_what_to_install(tmp_path: Path) -> None:
    pyz = tmp_path / "hc.pyz"
    hostartifact.write(pyz)
    python2 = PYENV / "2.7.18" / "bin" / "python"
    assert python2.exists(), f"install Python 2.7.18 with pyenv to run this test ({python2})"
    old = subprocess.run([str(python2), str(pyz), "--owner", "dra"], capture_output=True, text=True)
    assert old.returncode == 2
    assert old.stdout == ""
    assert old.stderr.count("\n") == 1
    assert old.stderr.startswith("eks-hybrid-gpu hostcheck: this is Python 2.7 (")
    assert "needs Python 3.6 or newer: install the OS's python3 package" in old.stderr


@pytest.mark.unit
def test_a_third_party_import_refuses_the_build(tmp_path: Path) -> None:
    entry = tmp_path / "entry.py"
    entry.write_text("import json\nimport yaml\nfrom collections import OrderedDict\n")
    finder = modulefinder.ModuleFinder(path=[str(tmp_path)])
    finder.run_script(str(entry))
    assert hostartifact.foreign_imports(finder, {"__main__"}) == ["yaml"]


@pytest.mark.unit
def test_without_owner_or_artifact_is_a_usage_error(capsys) -> None:
    assert cli.main(["hostcheck"]) == 2
    assert capsys.readouterr().err == "eks-hybrid-gpu hostcheck: error: --owner is required (or --artifact PATH)\n"
