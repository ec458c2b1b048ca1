"""Bad stacks fail `pulumi preview` with the policy pack, naming the policy that refused them.

Config validation stops most of these before anything is registered, so each program here uses the
components as a library, as a team building its own stack on them might, and the pack is the line that
holds. Every preview runs against the real API server (server-side dry run) with the real provider.

A Chart v4 reaches the analyzer with empty props (it is a remote component), so every Chart-based case
here is refused on what the chart rendered: the DaemonSets' env and affinity, the rendered ConfigMap, the
webhook configuration, the `eks-hybrid-gpu.io/chart` stamp (policy/README.md, "What the pack can see").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi import automation as auto

from components.config import ChartPin, ChartSource, CohortConfig, OperatorConfig, SmokeJobsConfig
from components.device_plugin import DevicePlugin
from components.dra_driver import DraDriver
from components.gpu_operator import GpuOperator
from components.smoke_jobs import SmokeRequest, smoke_job_spec
from components.stamping import Ownership, stamp
from eks_hybrid_gpu import engine, projectdir
from tests.integration.helpers import cluster_provider, namespace, refused_by, work_dir_with_stack
from tests.support import charts

pytestmark = [pytest.mark.integration, pytest.mark.charts]

SHARED = charts.folder()
PLUGIN_ARCHIVE = SHARED / "nvidia-device-plugin-0.20.0.tgz"
DRA_ARCHIVE = SHARED / "dra-driver-nvidia-gpu-0.4.1.tgz"
PLUGIN_CHART = ChartPin(version="0.20.0", source=ChartSource(archive=str(PLUGIN_ARCHIVE)))
DRA_CHART = ChartPin(version="0.4.1", source=ChartSource(archive=str(DRA_ARCHIVE)))
OPERATOR_CHART = ChartPin(version="v26.7.0", source=ChartSource(archive=str(SHARED / "gpu-operator-v26.7.0.tgz")))
HYBRID_PLUGIN = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "device-plugin"}
HYBRID_DRA = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "dra"}
IMAGE = "registry.example.com/gpu-smoke@sha256:" + "a" * 64


def _ownership(owner: str, cohort: str, selector: dict[str, str], sharing: str = "none") -> Ownership:
    return Ownership(owner, cohort, selector, sharing, "eks-hybrid-gpu:cohorts[0]")


def _preview_refused(engine_env: engine.EngineEnv, tmp_path: Path, name: str, program: Callable[[], None]) -> str:
    work = work_dir_with_stack(tmp_path, name, {})
    stack = engine.stack(engine_env, name, work_dir=work, program=program)
    lines: list[str] = []
    with pytest.raises(auto.CommandError):
        stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
    output = "\n".join(lines)
    assert "can't run policy" not in output
    return output


def _job(name: str, selector: dict[str, str], *, suspend: bool, approved: bool, provider: k8s.Provider) -> None:
    spec = smoke_job_spec(
        SmokeRequest("nvidia.com/gpu", "nvidia"), selector, SmokeJobsConfig(image=IMAGE), not suspend, None
    )
    k8s.batch.v1.Job(
        name,
        metadata={
            "name": name,
            "namespace": "default",
            "labels": {"eks-hybrid-gpu.io/smoke-job": "true", "eks-hybrid-gpu.io/owner": "device-plugin"},
            "annotations": {
                "eks-hybrid-gpu.io/approved-to-run": "true" if approved else "false",
                "pulumi.com/skipAwait": "true",
            },
        },
        spec=spec,
        opts=pulumi.ResourceOptions(provider=provider),
    )


def _device_plugin(
    name: str, cohort: CohortConfig, ownership: Ownership, provider: k8s.Provider, chart: ChartPin = PLUGIN_CHART
) -> None:
    DevicePlugin(
        name,
        cohort=cohort,
        ownership=ownership,
        chart=chart,
        namespace="gpu-system",
        runtime_class="nvidia",
        skip_await=True,
        project_dir=projectdir.SHIPPED,
        opts=pulumi.ResourceOptions(providers=[provider]),
    )


def _dra_driver(name: str, feature_gates: dict[str, bool], provider: k8s.Provider) -> None:
    DraDriver(
        name,
        cohort_name=name,
        ownership=_ownership("dra", name, HYBRID_DRA),
        chart=DRA_CHART,
        namespace="gpu-dra-system",
        feature_gates=feature_gates,
        skip_await=True,
        project_dir=projectdir.SHIPPED,
        opts=pulumi.ResourceOptions(providers=[provider]),
    )


def _gpu_operator(name: str, operator: OperatorConfig, provider: k8s.Provider) -> None:
    GpuOperator(
        name,
        operator=operator,
        cohort=CohortConfig(name="operator", owner="gpu-operator", host_driver_verified=True),
        chart=OPERATOR_CHART,
        namespace="gpu-operator",
        skip_await=True,
        project_dir=projectdir.SHIPPED,
        opts=pulumi.ResourceOptions(providers=[provider]),
    )


@pytest.fixture
def helm_repository() -> Iterator[str]:
    """The tests' chart archives (a folder with an index.yaml) served as a Helm repository on loopback."""
    with charts.helm_repository() as url:
        yield url


# --------------------------------------------------------------------------- resources the program writes itself


def test_job_reaching_auto_mode_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        selector = {"eks.amazonaws.com/compute-type": "auto", "workload.example.com/gpu-allocation": "device-plugin"}
        _job("auto-mode-smoke", selector, suspend=True, approved=False, provider=cluster_provider(engine_env))

    output = _preview_refused(engine_env, tmp_path, "bad-auto-mode", program)
    assert "no-auto-mode-targeting" in refused_by(output)
    assert "auto-mode-smoke" in output


def test_unsuspended_smoke_job_without_approval_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        _job("unapproved-smoke", HYBRID_PLUGIN, suspend=False, approved=False, provider=cluster_provider(engine_env))

    output = _preview_refused(engine_env, tmp_path, "bad-unsuspended", program)
    assert refused_by(output) == {"smoke-job-hardened": ["kubernetes:batch/v1:Job: unapproved-smoke"]}


def test_cluster_policy_with_gpu_cluster_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """The Operator is a helm.v3.Release: a custom resource, whose values the analyzer does see."""

    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-operator", provider)
        for mode in ("cluster-policy", "gpu-cluster"):
            _gpu_operator(f"operator-{mode}", OperatorConfig(mode=mode), provider)

    output = _preview_refused(engine_env, tmp_path, "bad-operator-modes", program)
    assert "operator-cr-exclusive" in refused_by(output)


# --------------------------------------------------------------------------- Chart v4: refused on what it renders


def test_overlapping_device_plugin_cohorts_are_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-system", provider)
        for cohort in ("team-a", "team-b"):
            config = CohortConfig(name=cohort, owner="device-plugin", host_driver_verified=True)
            _device_plugin(cohort, config, _ownership("device-plugin", cohort, HYBRID_PLUGIN), provider)

    output = _preview_refused(engine_env, tmp_path, "bad-overlap", program)
    refused = refused_by(output)
    assert "single-allocation-owner" in refused
    assert "chart-version-pinned" not in refused, "the pinned archive charts must not be refused (the finding)"
    assert "team-a" in output
    assert "team-b" in output


def test_floating_chart_version_is_refused_on_its_rendered_objects(
    engine_env: engine.EngineEnv, tmp_path: Path, helm_repository: str
) -> None:
    """Helm resolves ^0.20.0 from a repository index; only the chart stamp on the rendered objects says so."""

    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-system", provider)
        # model_construct: ChartPin validation refuses a range; a library user can bypass it.
        floating = ChartPin.model_construct(version="^0.20.0", source=ChartSource(repo=helm_repository))
        cohort = CohortConfig(name="floating", owner="device-plugin", host_driver_verified=True)
        _device_plugin("floating", cohort, _ownership("device-plugin", "floating", HYBRID_PLUGIN), provider, floating)

    output = _preview_refused(engine_env, tmp_path, "bad-floating", program)
    refused = refused_by(output)
    assert "chart-version-pinned" in refused
    assert (
        "kubernetes:apps/v1:DaemonSet: floating-chart:gpu-system/hybrid-gpu-floating-nvidia-device-plugin"
        in (refused["chart-version-pinned"])
    )
    assert "version '^0.20.0' is a range or tag" in output


def test_time_slicing_that_admits_several_replicas_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """failRequestsGreaterThanOne: false reaches the analyzer only in the rendered `-configs` ConfigMap."""

    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-system", provider)
        sharing = {"mode": "time-slicing", "replicas": 4, "failRequestsGreaterThanOne": False}
        cohort = CohortConfig.model_validate({"name": "shared", "owner": "device-plugin", "sharing": sharing})
        ownership = _ownership("device-plugin", "shared", HYBRID_PLUGIN, "time-slicing")
        _device_plugin("shared", cohort, ownership, provider)

    output = _preview_refused(engine_env, tmp_path, "bad-time-slicing", program)
    assert "shared-gpu-resource-name" in refused_by(output)
    assert "hybrid-gpu-shared-nvidia-device-plugin-configs" in output
    assert "failRequestsGreaterThanOne is false" in output


def test_mig_strategy_against_the_cohort_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """The plugin's migStrategy reaches the analyzer only as the rendered MIG_STRATEGY env."""

    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-system", provider)
        sharing = {"mode": "mig", "migStrategy": "single", "gpuModel": "A100-40GB"}
        cohort = CohortConfig.model_validate({"name": "mig", "owner": "device-plugin", "sharing": sharing})
        _device_plugin("mig", cohort, _ownership("device-plugin", "mig", HYBRID_PLUGIN, "mig-mixed"), provider)

    output = _preview_refused(engine_env, tmp_path, "bad-mig", program)
    assert "mig-strategy-consistent" in refused_by(output)
    assert "env MIG_STRATEGY is 'single' but the cohort is declared mig-mixed" in output


def test_dra_feature_gate_is_refused_on_the_rendered_env(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-dra-system", provider)
        _dra_driver("gated", {"MPSSupport": True}, provider)

    output = _preview_refused(engine_env, tmp_path, "bad-dra-gates", program)
    refused = refused_by(output)
    assert "dra-feature-gates-allowlisted" in refused
    assert "env FEATURE_GATES MPSSupport is 'true'" in output


def test_dra_root_next_to_an_operator_driver_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """nvidiaDriverRoot / is visible only as the kubelet plugin's NVIDIA_DRIVER_ROOT env."""

    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-dra-system", provider)
        namespace("gpu-operator", provider)
        _dra_driver("dra", {}, provider)
        _gpu_operator(
            "operator", OperatorConfig.model_validate({"mode": "cluster-policy", "driverEnabled": True}), provider
        )

    output = _preview_refused(engine_env, tmp_path, "bad-dra-root", program)
    assert "driver-ownership-consistent" in refused_by(output)
    assert "env NVIDIA_DRIVER_ROOT is '/' while" in output


def test_removed_gpu_affinity_and_webhook_without_ca_are_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """A DRA Chart v4 built by hand: affinity and webhook settings are visible only in what it renders."""

    def program() -> None:
        provider = cluster_provider(engine_env)
        namespace("gpu-dra-system", provider)
        foreign = {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
        required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [foreign]}}
        affinity = {"nodeAffinity": required}
        k8s.helm.v4.Chart(
            "hand-dra",
            chart=str(DRA_ARCHIVE),
            version="0.4.1",
            name="hybrid-gpu-hand",
            namespace="gpu-dra-system",
            values={
                "gpuResourcesEnabledOverride": True,
                "kubeletPlugin": {"nodeSelector": HYBRID_DRA, "affinity": affinity},
                "webhook": {
                    "enabled": True,
                    "nodeSelector": HYBRID_DRA,
                    "tls": {"mode": "secret", "secret": {"name": "dra-webhook-tls"}},
                },
            },
            skip_await=True,
            opts=pulumi.ResourceOptions(
                provider=provider,
                transforms=[stamp(Ownership("dra", "dra", HYBRID_DRA, "none", "eks-hybrid-gpu:cohorts[0]"))],
            ),
        )

    output = _preview_refused(engine_env, tmp_path, "bad-hand-dra", program)
    refused = refused_by(output)
    assert "gpu-discovery-affinity-kept" in refused
    assert "dra-webhook-needs-tls" in refused
    assert "has no clientConfig.caBundle" in output
