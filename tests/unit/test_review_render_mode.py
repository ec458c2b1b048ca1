"""The program's render mode, an explicit argument (`components.program.run(..., render_dir=...)`), under mocks."""

from __future__ import annotations

from pathlib import Path

import pytest

import components
from eks_hybrid_gpu.localpaths import local_kubeconfig
from tests.support.configs import OPERATOR_COHORT, PLUGIN_COHORT, RunProgram, _base_config, cohort

pytestmark = pytest.mark.unit

PROVIDER = "pulumi:providers:kubernetes"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
RELEASE = "kubernetes:helm.sh/v3:Release"
EKS = {"source": "eks", "name": "hybrid-gpu", "region": "us-west-2", "preflight": False}


@pytest.fixture(autouse=True)
def _no_ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK reads KUBECONFIG for a provider without one; the review's worker removes it the same way.
    monkeypatch.delenv("KUBECONFIG", raising=False)


def test_the_environment_variable_no_longer_switches_render_mode(
    run: RunProgram, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The old switch: a base program may still read it, but this program's graph follows its arguments only.
    monkeypatch.setenv("EKS_HYBRID_GPU_RENDER_DIR", str(tmp_path))

    recorder = run(_base_config(cohorts=[cohort(OPERATOR_COHORT)]))

    assert "renderYamlToDirectory" not in recorder.named("cluster").inputs
    assert recorder.named("gpu-operator-release").type_ == RELEASE


def test_no_component_reads_the_render_environment_variable() -> None:
    root = Path(components.__file__).parent
    readers = [p.name for p in sorted(root.rglob("*.py")) if "EKS_HYBRID_GPU_RENDER_DIR" in p.read_text()]
    assert readers == []


@pytest.mark.parametrize("render_dir", [None, ""])
def test_normal_provider_gets_the_kubeconfig(run: RunProgram, render_dir: str | None) -> None:
    provider = run(_base_config(), render_dir=render_dir).named("cluster")

    assert provider.type_ == PROVIDER
    assert provider.inputs["kubeconfig"] == str(local_kubeconfig())
    assert "renderYamlToDirectory" not in provider.inputs


def test_render_provider_gets_only_the_render_folder(run: RunProgram, tmp_path: Path) -> None:
    recorder = run(_base_config(), render_dir=str(tmp_path))

    providers = recorder.of_type(PROVIDER)
    assert [p.name for p in providers] == ["cluster"]
    assert providers[0].inputs["renderYamlToDirectory"] == str(tmp_path)
    # The provider refuses kubeconfig/context/cluster next to renderYamlToDirectory.
    assert not {"kubeconfig", "context", "cluster"} & set(providers[0].inputs)


def test_render_mode_skips_the_eks_describe(run: RunProgram, tmp_path: Path) -> None:
    recorder = run(_base_config(cluster=EKS), render_dir=str(tmp_path))

    assert "aws:eks/getCluster:getCluster" not in recorder.calls
    assert recorder.named("cluster").inputs["renderYamlToDirectory"] == str(tmp_path)
    assert recorder.of_type("kubernetes:batch/v1:Job")


def test_eks_describe_runs_outside_render_mode(run: RunProgram) -> None:
    recorder = run(_base_config(cluster=EKS))

    assert "aws:eks/getCluster:getCluster" in recorder.calls
    assert "exec" in recorder.named("cluster").inputs["kubeconfig"]


@pytest.mark.parametrize("mode", ["cluster-policy", "gpu-cluster"])
def test_operator_renders_through_chart_v4_with_the_release_inputs(run: RunProgram, tmp_path: Path, mode: str) -> None:
    config = _base_config(cohorts=[cohort(OPERATOR_COHORT)], operator={"mode": mode})
    release = run(config).named("gpu-operator-release")
    assert release.type_ == RELEASE

    recorder = run(config, render_dir=str(tmp_path))

    assert recorder.of_type(RELEASE) == []
    chart = recorder.named("gpu-operator-chart")
    assert chart.type_ == CHART_V4
    for key in ("chart", "version", "repositoryOpts", "name", "namespace", "values"):
        assert chart.inputs[key] == release.inputs[key], key
    assert chart.inputs["name"] == "gpu-operator"


def test_device_plugin_and_dra_charts_do_not_change_in_render_mode(run: RunProgram, tmp_path: Path) -> None:
    config = _base_config(cohorts=[cohort(PLUGIN_COHORT)])
    before = {r.name: r.inputs for r in run(config).of_type(CHART_V4)}

    after = {r.name: r.inputs for r in run(config, render_dir=str(tmp_path)).of_type(CHART_V4)}

    assert before == after
    assert list(after) == ["gpu-plugin-chart"]
