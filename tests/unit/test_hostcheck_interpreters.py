"""The artifact on every python3 an EKS Hybrid Nodes OS ships: the same verdicts as under 3.11 on every recorded host.

RHEL 8 has 3.6, Ubuntu 20.04 3.8, Amazon Linux 2023 and RHEL 9 3.9, Ubuntu 22.04 3.10, 24.04 3.12; 3.7, 3.11 and
3.13 are run too. The interpreters are pyenv's (`pyenv install 3.6.15 ...` where a machine lacks one).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eks_hybrid_gpu import hostartifact
from tests.support.recorded_host import FIXTURES, fake_tool

PYENV = Path.home() / ".pyenv" / "versions"
VERSIONS = ("3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")
REFERENCE = "3.11.7"
ROOTS = sorted(path.name for path in (FIXTURES / "roots").iterdir())
CASES = [(root, owner) for root in ROOTS for owner in ("dra", "device-plugin")]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("artifact")
    pyz = folder / hostartifact.ARTIFACT_NAME
    hostartifact.write(pyz)
    tools = folder / "tools"
    tools.mkdir()
    fake_tool(tools, "nvidia-smi", FIXTURES / "nvidia-smi" / "driver-570.csv")
    fake_tool(tools, "nvidia-ctk", None, "NVIDIA Container Toolkit CLI version 1.18.0")
    fake_tool(tools, "containerd", None, "containerd containerd.io 1.7.27 05044ec")
    return pyz, tools


@pytest.fixture(scope="module")
def reference(artifact: tuple[Path, Path]) -> dict[tuple[str, str], tuple[int, dict]]:
    found = verdicts(PYENV / REFERENCE / "bin" / "python3", *artifact)
    assert {code for code, _ in found.values()} == {0, 1}  # the recorded hosts pass and fail
    return found


def verdicts(python: Path, pyz: Path, tools: Path) -> dict[tuple[str, str], tuple[int, dict]]:
    """(root, owner) -> (exit code, inventory without the interpreter's version) for every recorded host."""
    found = {}
    for root, owner in CASES:
        argv = [str(python), "-S", "-E", str(pyz), "--owner", owner, "--json", "--root", str(FIXTURES / "roots" / root)]
        argv += [f"--{name}={tools / name}" for name in ("nvidia-smi", "nvidia-ctk", "containerd")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.stderr == "", f"{python} on {root}: {done.stderr}"
        document = json.loads(done.stdout)
        assert document["checkedBy"].pop("python") == python.parent.parent.name
        found[(root, owner)] = (done.returncode, document)
    return found


@pytest.mark.unit
@pytest.mark.parametrize("version", [v for v in VERSIONS if v != REFERENCE])
def test_the_artifact_judges_every_recorded_host_as_under_3_11(
    version: str, artifact: tuple[Path, Path], reference: dict[tuple[str, str], tuple[int, dict]]
) -> None:
    python = PYENV / version / "bin" / "python3"
    assert python.exists(), f"install Python {version} with `pyenv install {version}` to run this test"
    assert verdicts(python, *artifact) == reference
