"""`hostcheck -o json|yaml`: every report's option and envelope, and YAML that needs no PyYAML on the GPU host.

The artifact runs on a host's bare python3 (RHEL 8's 3.6, no PyYAML), so its YAML comes from
eks_hybrid_gpu.outputs' own writer: a property test reads that writer's output back with PyYAML, and the artifact's
`-o yaml` under Python 3.6 with no site-packages must read back as its own `-o json`.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from eks_hybrid_gpu import cli, hostartifact, options, outputs
from tests.support.recorded_host import FIXTURES, fake_tool

pytestmark = pytest.mark.unit

PYENV = Path.home() / ".pyenv" / "versions"
OLDEST = PYENV / "3.6.15" / "bin" / "python3"
ROOT = FIXTURES / "roots"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.sampled_from(["yes", "No", "on", "OFF", "null", "~", "1.0", "0x1f", "1:20", "- a", "a: b", "#x", "", " "]),
)
plain_data = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(plain_data)
def test_the_yaml_writer_reads_back_as_the_same_data(data: Any) -> None:
    assert yaml.safe_load(outputs.yaml_text(data)) == data


def test_nan_and_infinities_read_back() -> None:
    read = yaml.safe_load(outputs.yaml_text([math.inf, -math.inf, math.nan]))
    assert read[:2] == [math.inf, -math.inf]
    assert math.isnan(read[2])


def test_data_that_is_not_plain_is_refused() -> None:
    with pytest.raises(TypeError, match="is not plain data"):
        outputs.yaml_text({"a": object()})
    with pytest.raises(TypeError, match="the key 1 is not a string"):
        outputs.yaml_text({1: "a"})


def test_the_options_home_is_the_one_the_host_check_uses() -> None:
    assert options.add_output_option is outputs.add_output_option
    assert options.typed("X", {"a": 1}) == {"apiVersion": outputs.API_VERSION, "kind": "X", "a": 1}


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


def _check(python: Path, pyz: Path, tools: Path, root: str, *output: str) -> subprocess.CompletedProcess[str]:
    argv = [str(python), "-S", "-E", str(pyz), "--owner", "dra", *output, "--root", str(ROOT / root)]
    argv += [f"--{name}={tools / name}" for name in ("nvidia-smi", "nvidia-ctk", "containerd")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("root", sorted(path.name for path in ROOT.iterdir()))
def test_the_artifacts_yaml_on_python_3_6_without_pyyaml_reads_back_as_its_json(
    artifact: tuple[Path, Path], root: str
) -> None:
    assert OLDEST.exists(), "install Python 3.6.15 with `pyenv install 3.6.15` to run this test"
    no_yaml = subprocess.run([str(OLDEST), "-S", "-E", "-c", "import yaml"], capture_output=True, check=False)
    assert no_yaml.returncode != 0  # the host's bare python3: the YAML is the check's own writer's
    as_json = _check(OLDEST, *artifact, root, "-o", "json")
    as_yaml = _check(OLDEST, *artifact, root, "-o", "yaml")
    legacy = _check(OLDEST, *artifact, root, "--json")
    assert as_yaml.stderr == as_json.stderr == ""
    assert as_yaml.returncode == as_json.returncode == legacy.returncode
    document = json.loads(as_json.stdout)
    assert (document["apiVersion"], document["kind"]) == ("eks-hybrid-gpu/v1alpha1", "GpuHostInventory")
    assert yaml.safe_load(as_yaml.stdout) == document
    assert legacy.stdout == as_json.stdout
    assert as_yaml.stdout.startswith("apiVersion: eks-hybrid-gpu/v1alpha1\nkind: GpuHostInventory\n")


def test_the_command_line_offers_table_json_and_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["hostcheck", "--owner", "dra", "-o", "wide"]) == 2
    assert "invalid choice: 'wide' (choose from" in capsys.readouterr().err
    assert cli.main(["hostcheck", "--help"]) == 0
    assert "-o {table,json,yaml}, --output {table,json,yaml}" in capsys.readouterr().out
