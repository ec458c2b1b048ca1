"""Bad stacks fail `pulumi preview` with the policy pack, naming the policy that refused them.

Config validation stops most of these before anything is registered, so each program here uses the
components as a library, as a team building its own stack on them might, and the pack is the line that
holds. Every preview runs against the real API server (server-side dry run) with the real provider.

A Chart v4 reaches the analyzer with empty props (it is a remote component), so every Chart-based case
here is refused on what the chart rendered: the DaemonSets' env and affinity, the rendered ConfigMap, the
webhook configuration, the `eks-hybrid-gpu.io/chart` stamp (policy/README.md, "What the pack can see").
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
from eks_hybrid_gpu import engine
from tests.integration.helpers import work_dir_with_stack
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
VIOLATION = re.compile(r"- \[mandatory\] \[severity: \w+\]\s+(\S+)\s+\((.*)\)$")


def _provider(engine_env: engine.EngineEnv) -> k8s.Provider:
    return k8s.Provider("cluster", kubeconfig=str(engine_env.kubeconfig))


def _ownership(owner: str, cohort: str, selector: dict[str, str], sharing: str = "none") -> Ownership:
    return Ownership(owner, cohort, selector, sharing, "eks-hybrid-gpu:cohorts[0]")


def _namespace(name: str, provider: k8s.Provider) -> None:
    k8s.core.v1.Namespace(f"ns-{name}", metadata={"name": name}, opts=pulumi.ResourceOptions(provider=provider))


def _preview_refused(engine_env: engine.EngineEnv, tmp_path: Path, name: str, program: Callable[[], None]) -> str:
    work = work_dir_with_stack(tmp_path, name, {})
    stack = engine.stack(engine_env, name, work_dir=work, program=program)
    lines: list[str] = []
    with pytest.raises(auto.CommandError):
        stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
    output = "\n".join(lines)
    assert "can't run policy" not in output
    return output


def _refused_by(output: str) -> dict[str, list[str]]:
    """Mandatory violations in a preview's output: policy -> the resources it named."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        match = VIOLATION.search(line.strip())
        if match:
            found.setdefault(match[1], []).append(match[2])
    return found


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
        project_dir=engine.ROOT,
        opts=pulumi.ResourceOptions(providers=[provider]),
    )


@pytest.fixture
def helm_repository() -> Iterator[str]:
    """The tests' chart archives (a folder with an index.yaml) served as a Helm repository on loopback."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(SHARED), **kwargs)

        def log_message(self, *_args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- resources the program writes itself


def test_job_reaching_auto_mode_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        selector = {"eks.amazonaws.com/compute-type": "auto", "workload.example.com/gpu-allocation": "device-plugin"}
        _job("auto-mode-smoke", selector, suspend=True, approved=False, provider=_provider(engine_env))

    output = _preview_refused(engine_env, tmp_path, "bad-auto-mode", program)
    assert "no-auto-mode-targeting" in _refused_by(output)
    assert "auto-mode-smoke" in output


def test_unsuspended_smoke_job_without_approval_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        _job("unapproved-smoke", HYBRID_PLUGIN, suspend=False, approved=False, provider=_provider(engine_env))

    output = _preview_refused(engine_env, tmp_path, "bad-unsuspended", program)
    assert _refused_by(output) == {"smoke-job-hardened": ["kubernetes:batch/v1:Job: unapproved-smoke"]}


def test_cluster_policy_with_gpu_cluster_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """The Operator is a helm.v3.Release: a custom resource, whose values the analyzer does see."""

    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-operator", provider)
        cohort = CohortConfig(name="operator", owner="gpu-operator", host_driver_verified=True)
        for mode in ("cluster-policy", "gpu-cluster"):
            GpuOperator(
                f"operator-{mode}",
                operator=OperatorConfig(mode=mode),
                cohort=cohort,
                chart=OPERATOR_CHART,
                namespace="gpu-operator",
                skip_await=True,
                project_dir=engine.ROOT,
                opts=pulumi.ResourceOptions(providers=[provider]),
            )

    output = _preview_refused(engine_env, tmp_path, "bad-operator-modes", program)
    assert "operator-cr-exclusive" in _refused_by(output)


# --------------------------------------------------------------------------- Chart v4: refused on what it renders


def test_overlapping_device_plugin_cohorts_are_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-system", provider)
        for cohort in ("team-a", "team-b"):
            config = CohortConfig(name=cohort, owner="device-plugin", host_driver_verified=True)
            _device_plugin(cohort, config, _ownership("device-plugin", cohort, HYBRID_PLUGIN), provider)

    output = _preview_refused(engine_env, tmp_path, "bad-overlap", program)
    refused = _refused_by(output)
    assert "single-allocation-owner" in refused
    assert "chart-version-pinned" not in refused, "the pinned archive charts must not be refused (the finding)"
    assert "team-a" in output
    assert "team-b" in output


def test_floating_chart_version_is_refused_on_its_rendered_objects(
    engine_env: engine.EngineEnv, tmp_path: Path, helm_repository: str
) -> None:
    """Helm resolves ^0.20.0 from a repository index; only the chart stamp on the rendered objects says so."""

    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-system", provider)
        # model_construct: ChartPin validation refuses a range; a library user can bypass it.
        floating = ChartPin.model_construct(version="^0.20.0", source=ChartSource(repo=helm_repository))
        cohort = CohortConfig(name="floating", owner="device-plugin", host_driver_verified=True)
        _device_plugin("floating", cohort, _ownership("device-plugin", "floating", HYBRID_PLUGIN), provider, floating)

    output = _preview_refused(engine_env, tmp_path, "bad-floating", program)
    refused = _refused_by(output)
    assert "chart-version-pinned" in refused
    assert (
        "kubernetes:apps/v1:DaemonSet: floating-chart:gpu-system/hybrid-gpu-floating-nvidia-device-plugin"
        in (refused["chart-version-pinned"])
    )
    assert "version '^0.20.0' is a range or tag" in output


def test_time_slicing_that_admits_several_replicas_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """failRequestsGreaterThanOne: false reaches the analyzer only in the rendered `-configs` ConfigMap."""

    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-system", provider)
        sharing = {"mode": "time-slicing", "replicas": 4, "failRequestsGreaterThanOne": False}
        cohort = CohortConfig.model_validate({"name": "shared", "owner": "device-plugin", "sharing": sharing})
        ownership = _ownership("device-plugin", "shared", HYBRID_PLUGIN, "time-slicing")
        _device_plugin("shared", cohort, ownership, provider)

    output = _preview_refused(engine_env, tmp_path, "bad-time-slicing", program)
    assert "shared-gpu-resource-name" in _refused_by(output)
    assert "hybrid-gpu-shared-nvidia-device-plugin-configs" in output
    assert "failRequestsGreaterThanOne is false" in output


def test_mig_strategy_against_the_cohort_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """The plugin's migStrategy reaches the analyzer only as the rendered MIG_STRATEGY env."""

    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-system", provider)
        sharing = {"mode": "mig", "migStrategy": "single", "gpuModel": "A100-40GB"}
        cohort = CohortConfig.model_validate({"name": "mig", "owner": "device-plugin", "sharing": sharing})
        _device_plugin("mig", cohort, _ownership("device-plugin", "mig", HYBRID_PLUGIN, "mig-mixed"), provider)

    output = _preview_refused(engine_env, tmp_path, "bad-mig", program)
    assert "mig-strategy-consistent" in _refused_by(output)
    assert "env MIG_STRATEGY is 'single' but the cohort is declared mig-mixed" in output


def test_dra_feature_gate_is_refused_on_the_rendered_env(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-dra-system", provider)
        DraDriver(
            "gated",
            cohort_name="gated",
            ownership=_ownership("dra", "gated", HYBRID_DRA),
            chart=DRA_CHART,
            namespace="gpu-dra-system",
            feature_gates={"MPSSupport": True},
            skip_await=True,
            project_dir=engine.ROOT,
            opts=pulumi.ResourceOptions(providers=[provider]),
        )

    output = _preview_refused(engine_env, tmp_path, "bad-dra-gates", program)
    refused = _refused_by(output)
    assert "dra-feature-gates-allowlisted" in refused
    assert "env FEATURE_GATES MPSSupport is 'true'" in output


def test_dra_root_next_to_an_operator_driver_is_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """nvidiaDriverRoot / is visible only as the kubelet plugin's NVIDIA_DRIVER_ROOT env."""

    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-dra-system", provider)
        _namespace("gpu-operator", provider)
        DraDriver(
            "dra",
            cohort_name="dra",
            ownership=_ownership("dra", "dra", HYBRID_DRA),
            chart=DRA_CHART,
            namespace="gpu-dra-system",
            feature_gates={},
            skip_await=True,
            project_dir=engine.ROOT,
            opts=pulumi.ResourceOptions(providers=[provider]),
        )
        GpuOperator(
            "operator",
            operator=OperatorConfig.model_validate({"mode": "cluster-policy", "driverEnabled": True}),
            cohort=CohortConfig(name="operator", owner="gpu-operator", host_driver_verified=True),
            chart=OPERATOR_CHART,
            namespace="gpu-operator",
            skip_await=True,
            project_dir=engine.ROOT,
            opts=pulumi.ResourceOptions(providers=[provider]),
        )

    output = _preview_refused(engine_env, tmp_path, "bad-dra-root", program)
    assert "driver-ownership-consistent" in _refused_by(output)
    assert "env NVIDIA_DRIVER_ROOT is '/' while" in output


def test_removed_gpu_affinity_and_webhook_without_ca_are_refused(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    """A DRA Chart v4 built by hand: affinity and webhook settings are visible only in what it renders."""

    def program() -> None:
        provider = _provider(engine_env)
        _namespace("gpu-dra-system", provider)
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
    refused = _refused_by(output)
    assert "gpu-discovery-affinity-kept" in refused
    assert "dra-webhook-needs-tls" in refused
    assert "has no clientConfig.caBundle" in output
