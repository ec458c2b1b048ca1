"""Stack configs, cohort and node builders, the recording mocks and the invalid-config table the unit tests share."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest

from eks_hybrid_gpu import mocks as mocks_module
from eks_hybrid_gpu.mocks import ParentRecordingMonitor, RecordingMocks, Registration
from policy.gpu_allocation.vocab.labels import (
    COMPUTE_TYPE_LABEL,
    DEFAULT_COHORT_LABEL_KEY,
    MPS_CAPABLE_LABEL,
    OPERANDS_OPT_OUT_LABEL,
)
from tests.support import charts

DIGEST_IMAGE = "registry.example.com/approved/gpu-smoke@sha256:" + "ab" * 32
"""A well-formed digest-pinned image that is not the placeholder."""

PLUGIN_COHORT: dict[str, Any] = {"name": "plugin", "owner": "device-plugin", "hostDriverVerified": True}
DRA_COHORT: dict[str, Any] = {"name": "dra", "owner": "dra", "hostDriverVerified": True}
OPERATOR_COHORT: dict[str, Any] = {"name": "operator", "owner": "gpu-operator", "hostDriverVerified": True}


def selector_for(value: str) -> dict[str, str]:
    """The default cohort selector for a cohort label value."""
    return {COMPUTE_TYPE_LABEL: "hybrid", DEFAULT_COHORT_LABEL_KEY: value}


def cohort(base: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A cohort dict: a copy of `base` with `overrides` applied."""
    return {**copy.deepcopy(dict(base)), **overrides}


def _base_config(**overrides: Any) -> dict[str, Any]:
    """A valid local-source stack config (one verified device-plugin cohort, Kubernetes 1.34.4, no preflight).

    Top-level keys in `overrides` replace the default value of that key.
    """
    config: dict[str, Any] = {
        "cluster": {"source": "local", "kubernetesVersion": "1.34.4", "preflight": False},
        "cohorts": [cohort(PLUGIN_COHORT)],
    }
    config.update(copy.deepcopy(overrides))
    return config


def eks_cluster(**overrides: Any) -> dict[str, Any]:
    """The mocked EKS describe-cluster answer, with overrides (e.g. version, computeConfigs)."""
    return {**copy.deepcopy(mocks_module.EKS_CLUSTER), **overrides}


def node(name: str, **labels: str) -> dict[str, Any]:
    """A node as the Kubernetes API lists it (only metadata matters to the preflight)."""
    return {"metadata": {"name": name, "labels": dict(labels)}}


KUBELET_VERSION = "v1.34.4-eks-3025e55"
CONTAINER_RUNTIME = "containerd://2.0.5"


def node_info(kubelet: str = KUBELET_VERSION, runtime: str = CONTAINER_RUNTIME) -> dict[str, Any]:
    """`status.nodeInfo` as a nodeadm-bootstrapped Hybrid Node reports it (the fields the preflight reads)."""
    return {
        "architecture": "amd64",
        "containerRuntimeVersion": runtime,
        "kernelVersion": "6.8.0-1021-nvidia",
        "kubeletVersion": kubelet,
        "operatingSystem": "linux",
        "osImage": "Ubuntu 24.04.3 LTS",
    }


def hybrid_node(
    name: str,
    cohort_value: str,
    *,
    operands_opt_out: bool = True,
    labels: Mapping[str, str] | None = None,
    kubelet: str = KUBELET_VERSION,
    runtime: str = CONTAINER_RUNTIME,
) -> dict[str, Any]:
    """A Hybrid node in one cohort, on a current kubelet and containerd; opted out of Operator operands unless told."""
    extra = {OPERANDS_OPT_OUT_LABEL: "false"} if operands_opt_out else {}
    return {
        **node(name, **selector_for(cohort_value), **extra, **(labels or {})),
        "status": {"nodeInfo": node_info(kubelet, runtime)},
    }


MPS_NODE_LABELS = {MPS_CAPABLE_LABEL: "true"}


@dataclass
class Recorder(RecordingMocks):
    """RecordingMocks plus reads (`.get`), transforms and invoke arguments.

    `call` answers with an empty failure list: the mock monitor iterates the second element of the tuple,
    so the `None` that `RecordingMocks.call` returns makes every invoke (the EKS describe) raise TypeError.
    """

    reads: dict[str, str] = field(default_factory=dict)
    transforms: dict[str, list[Any]] = field(default_factory=dict)
    call_args: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Note reads and transforms, then record as RecordingMocks does."""
        if args.resource_id:
            self.reads[args.name] = args.resource_id
        self.transforms[args.name] = list(args.transforms)
        return super().new_resource(args)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        """Answer as RecordingMocks does, with no failures."""
        self.call_args.append((args.token, dict(args.args)))
        answer, _ = super().call(args)
        return answer, []

    def custom(self) -> list[Registration]:
        """Registrations of Kubernetes resources (everything but components and the provider)."""
        return [r for r in self.registrations if r.type_.startswith("kubernetes:")]

    def jobs(self) -> list[Registration]:
        """The smoke Job registrations."""
        return self.of_type("kubernetes:batch/v1:Job")


class ReadRecordingMonitor(ParentRecordingMonitor):
    """ParentRecordingMonitor that also notes the parent of resources read with `.get`."""

    def ReadResource(self, request: Any) -> Any:
        """Remember the parent's name, then read as the mock monitor does."""
        if request.parent:
            self._recorder.parents[request.name] = request.parent.rsplit("::", 1)[-1]
        return super().ReadResource(request)  # type: ignore[no-untyped-call]


RunProgram = Callable[..., Recorder]


Construct = Callable[[Callable[[], Any]], Recorder]


# ---------------------------------------------------------------- invalid configs (model and program tests)

DRA_CHART_041 = "{dra_041}"
"""Stands for the DRA 0.4.1 archive (tests/support/charts.py) in a case's config and problems, filled in lazily."""

HOST_DRIVER_FALSE = (
    "is false; the standalone {owner} path needs a prepared host driver, and being on premises does not imply "
    "that a driver exists: run `eks-hybrid-gpu hostcheck` on every host of the cohort, then set it to true"
)
AUTO_MODE_SELECTOR = (
    "eks.amazonaws.com/compute-type is {found}; a selector without eks.amazonaws.com/compute-type: hybrid could "
    "match EKS Auto Mode nodes, whose GPUs AWS already manages: set eks.amazonaws.com/compute-type: hybrid"
)
DRA_TOO_OLD = (
    "is {version}; DRA GPU allocation with resource.k8s.io/v1 needs Kubernetes 1.34.2+: upgrade the cluster or "
    "use owner device-plugin"
)
AUTO_MODE_OPERATOR = (
    "eks-hybrid-gpu:cohorts[0].owner: is gpu-operator on an EKS Auto Mode cluster; Operator operands are placed "
    "by GPU discovery, not by the cohort selector, and would reach Auto Mode GPUs: use the standalone "
    "device-plugin or dra owner, or an isolated cluster"
)


OPERATOR_PLUGIN_BESIDE_STANDALONE = (
    "eks-hybrid-gpu:operator.devicePluginEnabled: is true while the standalone device plugin serves cohorts[1] "
    "(plugin); ClusterPolicy operands are not restricted by the cohort selector, so both plugins would advertise "
    "nvidia.com/gpu on the same GPUs: set operator.devicePluginEnabled to false, or move those cohorts to owner "
    "gpu-operator"
)


def overlap(index: int, other: int, other_name: str, value: str) -> str:
    """The overlap problem for two cohorts whose selectors are both the default selector of `value`."""
    sel = f"{{'eks.amazonaws.com/compute-type': 'hybrid', 'workload.example.com/gpu-allocation': '{value}'" + "}"
    return (
        f"eks-hybrid-gpu:cohorts[{index}].nodeSelector: {sel} can select the same nodes as cohorts[{other}] "
        f"({other_name}: {sel}); one GPU must have one allocation owner: give the cohorts different values of "
        "workload.example.com/gpu-allocation"
    )


def _fill(value: Any, placeholder: str, text: str) -> Any:
    if isinstance(value, str):
        return value.replace(placeholder, text)
    if isinstance(value, dict):
        return {k: _fill(v, placeholder, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, placeholder, text) for v in value]
    return value


@dataclass(frozen=True)
class InvalidCase:
    """A stack config that must be refused with exactly these problems."""

    id: str
    raw: dict[str, Any]
    problems: list[str]

    @property
    def needs_charts(self) -> bool:
        """Whether the config names the DRA archive (the case then carries the `charts` marker)."""
        return DRA_CHART_041 in repr(self.raw)

    @property
    def config(self) -> dict[str, Any]:
        """The config, with the DRA archive's path filled in when it names it."""
        return _fill(self.raw, DRA_CHART_041, str(charts.dra_driver())) if self.needs_charts else self.raw


def invalid_params() -> list[Any]:
    """INVALID_CASES as pytest params: id, and the `charts` marker on a case that reads an archive."""
    return [pytest.param(c, id=c.id, marks=[pytest.mark.charts] if c.needs_charts else []) for c in INVALID_CASES]


INVALID_CASES: list[InvalidCase] = [
    InvalidCase(
        "overlapping-cohorts",
        _base_config(cohorts=[cohort(PLUGIN_COHORT), cohort(PLUGIN_COHORT, name="plugin-b")]),
        [overlap(1, 0, "plugin", "device-plugin")],
    ),
    InvalidCase(
        "two-operator-cohorts",
        _base_config(
            cohorts=[
                cohort(OPERATOR_COHORT),
                cohort(OPERATOR_COHORT, name="operator-b", nodeSelector=selector_for("gpu-operator-b")),
            ]
        ),
        [
            "eks-hybrid-gpu:cohorts[1].owner: is a second gpu-operator cohort (cohorts[0] is the first); the "
            "Operator is cluster-wide and cannot be pinned to a cohort: keep one"
        ],
    ),
    InvalidCase(
        "operator-and-standalone-on-the-same-nodes",
        _base_config(
            cohorts=[cohort(OPERATOR_COHORT), cohort(PLUGIN_COHORT, nodeSelector=selector_for("gpu-operator"))]
        ),
        [overlap(1, 0, "operator", "gpu-operator"), OPERATOR_PLUGIN_BESIDE_STANDALONE],
    ),
    InvalidCase(
        "gpu-cluster-plus-standalone-dra",
        _base_config(cohorts=[cohort(OPERATOR_COHORT), cohort(DRA_COHORT)], operator={"mode": "gpu-cluster"}),
        [
            "eks-hybrid-gpu:cohorts[1].owner: is dra next to an Operator in gpu-cluster mode; GPUCluster deploys "
            "its own DRA driver and must not get an additional standalone DRA release: remove this cohort or set "
            "operator.mode to cluster-policy"
        ],
    ),
    InvalidCase(
        "selector-without-compute-type",
        _base_config(
            cohorts=[cohort(PLUGIN_COHORT, nodeSelector={DEFAULT_COHORT_LABEL_KEY: "device-plugin"})],
        ),
        ["eks-hybrid-gpu:cohorts[0].nodeSelector: " + AUTO_MODE_SELECTOR.format(found="<absent>")],
    ),
    InvalidCase(
        "selector-with-compute-type-auto",
        _base_config(
            cohorts=[
                cohort(
                    PLUGIN_COHORT,
                    nodeSelector={COMPUTE_TYPE_LABEL: "auto", DEFAULT_COHORT_LABEL_KEY: "device-plugin"},
                )
            ],
        ),
        ["eks-hybrid-gpu:cohorts[0].nodeSelector: " + AUTO_MODE_SELECTOR.format(found="auto")],
    ),
    InvalidCase(
        "image-tag-instead-of-digest",
        _base_config(smokeJobs={"image": "registry.example.com/approved/gpu-smoke:1.0"}),
        [
            "eks-hybrid-gpu:smokeJobs.image: 'registry.example.com/approved/gpu-smoke:1.0' is not pinned by "
            "digest; a tag can move under an approved test. Use registry/repo@sha256:<64 hex digits>"
        ],
    ),
    InvalidCase(
        "dra-on-kubernetes-1.34.1",
        _base_config(
            cluster={"source": "local", "kubernetesVersion": "1.34.1", "preflight": False}, cohorts=[DRA_COHORT]
        ),
        ["eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.34.1")],
    ),
    InvalidCase(
        "dra-on-kubernetes-1.33.5",
        _base_config(
            cluster={"source": "local", "kubernetesVersion": "1.33.5", "preflight": False}, cohorts=[DRA_COHORT]
        ),
        ["eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.33.5")],
    ),
    InvalidCase(
        "gpu-cluster-on-kubernetes-1.33.5",
        _base_config(
            cluster={"source": "local", "kubernetesVersion": "1.33.5", "preflight": False},
            cohorts=[OPERATOR_COHORT],
            operator={"mode": "gpu-cluster"},
        ),
        ["eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.33.5")],
    ),
    InvalidCase(
        "dra-without-a-declared-version",
        _base_config(cluster={"source": "local", "preflight": False}, cohorts=[DRA_COHORT]),
        [
            "eks-hybrid-gpu:cluster.kubernetesVersion: is not set, and DRA needs Kubernetes 1.34.2+: declare the "
            "cluster's version, e.g. 1.34.4"
        ],
    ),
    InvalidCase(
        "mig-request-with-strategy-none",
        _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing={"mode": "mig", "migStrategy": "none"})]),
        [
            "eks-hybrid-gpu:cohorts[0].sharing.migStrategy: is none, so the plugin advertises no MIG devices and "
            "a nvidia.com/mig-* request never schedules: prepare the MIG geometry, then set single or mixed"
        ],
    ),
    InvalidCase(
        "mig-mixed-without-profile",
        _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing={"mode": "mig", "migStrategy": "mixed"})]),
        [
            "eks-hybrid-gpu:cohorts[0].sharing.migProfile: is required with migStrategy mixed: name the profile "
            "the smoke Job requests, e.g. 1g.5gb"
        ],
    ),
    InvalidCase(
        "duplicate-cohort-names",
        _base_config(cohorts=[cohort(PLUGIN_COHORT), cohort(DRA_COHORT, name="plugin")]),
        [
            "eks-hybrid-gpu:cohorts[1].name: 'plugin' is also the name of cohorts[0]; cohort names must be "
            "unique: rename one"
        ],
    ),
    InvalidCase(
        "unknown-key",
        _base_config(cluster={"source": "local", "kubernetesVersion": "1.34.4", "regoin": "us-west-2"}),
        ["eks-hybrid-gpu:cluster.regoin: is not a setting of this program; remove it or check its spelling"],
    ),
    InvalidCase(
        "wrong-type-is-not-coerced",
        _base_config(smokeJobs={"activeDeadlineSeconds": "120"}),
        [
            "eks-hybrid-gpu:smokeJobs.activeDeadlineSeconds: is '120', not a whole number: write a whole number "
            "without quotes"
        ],
    ),
    InvalidCase(
        "approved-cohort-names-no-cohort",
        _base_config(smokeJobs={"approvedCohort": "dra", "image": DIGEST_IMAGE}),
        [
            "eks-hybrid-gpu:smokeJobs.approvedCohort: 'dra' is not a cohort of this stack: use one of plugin, or "
            "remove it to keep every smoke Job suspended"
        ],
    ),
    InvalidCase(
        "approving-with-the-placeholder-image",
        _base_config(smokeJobs={"approvedCohort": "plugin"}),
        [
            "eks-hybrid-gpu:smokeJobs.image: is the deliberately unusable placeholder, so no smoke Job can be "
            "approved to run: set a tested image pinned by digest"
        ],
    ),
    InvalidCase(
        "time-slicing-on-a-dra-cohort",
        _base_config(cohorts=[cohort(DRA_COHORT, sharing={"mode": "time-slicing", "replicas": 4})]),
        [
            "eks-hybrid-gpu:cohorts[0].sharing.mode: time-slicing is configured on the device plugin, but the "
            "owner is dra: use owner device-plugin or sharing mode none"
        ],
    ),
    InvalidCase(
        "unknown-mig-profile-for-the-model",
        _base_config(
            cohorts=[
                cohort(
                    PLUGIN_COHORT,
                    sharing={"mode": "mig", "migStrategy": "mixed", "gpuModel": "H100-80GB", "migProfile": "1g.5gb"},
                )
            ]
        ),
        [
            "eks-hybrid-gpu:cohorts[0].sharing.migProfile: '1g.5gb' is not a MIG profile of H100-80GB: use one "
            "of 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
        ],
    ),
    InvalidCase(
        "unknown-gpu-model",
        _base_config(
            cohorts=[
                cohort(
                    PLUGIN_COHORT,
                    sharing={"mode": "mig", "migStrategy": "mixed", "gpuModel": "T4", "migProfile": "1g.5gb"},
                )
            ]
        ),
        [
            "eks-hybrid-gpu:cohorts[0].sharing.gpuModel: 'T4' has no known MIG profile table: use one of "
            "A100-40GB, A100-80GB, H100-80GB, H200-141GB"
        ],
    ),
    InvalidCase(
        "two-dra-cohorts",
        _base_config(
            cohorts=[cohort(DRA_COHORT), cohort(DRA_COHORT, name="dra-b", nodeSelector=selector_for("dra-b"))]
        ),
        [
            "eks-hybrid-gpu:cohorts[1].owner: is a second dra cohort (cohorts[0] is the first); the DRA chart's "
            "names and DeviceClasses are cluster-wide, so it installs once: merge the cohorts"
        ],
    ),
    InvalidCase(
        "eks-source-without-region",
        _base_config(cluster={"source": "eks", "name": "hybrid-gpu"}),
        ["eks-hybrid-gpu:cluster: source eks needs both name and region: set cluster.name and cluster.region"],
    ),
    InvalidCase(
        "chart-version-range",
        _base_config(charts={"devicePlugin": {"version": "^0.20"}}),
        [
            "eks-hybrid-gpu:charts.devicePlugin.version: '^0.20' is not an exact chart version; pin one release "
            "such as 0.20.0"
        ],
    ),
    InvalidCase(
        "archive-version-differs-from-pin",
        _base_config(
            cohorts=[DRA_COHORT],
            charts={"draDriver": {"version": "0.5.0", "source": {"archive": DRA_CHART_041}}},
        ),
        [
            "eks-hybrid-gpu:charts.draDriver.source.archive: {dra_041} "
            "holds version 0.4.1, but the pinned version is 0.5.0: pin the archive's version or use the archive of "
            "the pinned version"
        ],
    ),
    InvalidCase(
        "host-driver-not-verified-on-a-standalone-cohort",
        _base_config(cohorts=[cohort(PLUGIN_COHORT, hostDriverVerified=False)]),
        ["eks-hybrid-gpu:cohorts[0].hostDriverVerified: " + HOST_DRIVER_FALSE.format(owner="device-plugin")],
    ),
    InvalidCase(
        "host-driver-not-verified-under-an-operator-without-driver",
        _base_config(cohorts=[cohort(OPERATOR_COHORT, hostDriverVerified=False)]),
        [
            "eks-hybrid-gpu:cohorts[0].hostDriverVerified: is false while operator.driverEnabled is false; "
            "driver.enabled=false is only right where the host driver is verified: run `eks-hybrid-gpu "
            "hostcheck`, then set it to true, or set operator.driverEnabled"
        ],
    ),
    InvalidCase(
        "skip-await-on-a-real-cluster",
        _base_config(cluster={"source": "kubeconfig", "kubeconfig": "/etc/kube/config", "skipAwait": True}),
        [
            "eks-hybrid-gpu:cluster.skipAwait: is true on a real cluster; Pulumi would report GPU owners as ready "
            "before their pods run: remove it (it exists for the node-less local API server)"
        ],
    ),
    InvalidCase(
        "oci-source-without-scheme",
        _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"oci": "registry.k8s.io/nvdp"}}}),
        [
            "eks-hybrid-gpu:charts.devicePlugin.source.oci: 'registry.k8s.io/nvdp' is not an OCI reference: write "
            "oci://host/path/chart"
        ],
    ),
    InvalidCase(
        "two-chart-sources",
        _base_config(
            charts={
                "devicePlugin": {
                    "version": "0.20.0",
                    "source": {"repo": "https://nvidia.github.io/k8s-device-plugin", "oci": "oci://mirror/nvdp"},
                }
            }
        ),
        [
            "eks-hybrid-gpu:charts.devicePlugin.source: sets ['repo', 'oci'] of repo, oci and archive; choose "
            "exactly one"
        ],
    ),
]


def expected_problems(case: InvalidCase, root: str) -> list[str]:
    """The case's problems with the project directory filled in."""
    problems = [p.replace("{root}", root) for p in case.problems]
    return [p.replace(DRA_CHART_041, str(charts.dra_driver())) for p in problems] if case.needs_charts else problems


SEVERAL_PROBLEMS_CONFIG = _base_config(
    cohorts=[
        cohort(PLUGIN_COHORT, hostDriverVerified=False),
        cohort(DRA_COHORT, sharing={"mode": "time-slicing", "replicas": 2}),
        cohort(DRA_COHORT, name="dra-b", nodeSelector=selector_for("dra")),
    ],
    smokeJobs={"approvedCohort": "nope"},
)
SEVERAL_PROBLEMS = [
    "eks-hybrid-gpu:cohorts[0].hostDriverVerified: " + HOST_DRIVER_FALSE.format(owner="device-plugin"),
    "eks-hybrid-gpu:cohorts[1].sharing.mode: time-slicing is configured on the device plugin, but the owner is "
    "dra: use owner device-plugin or sharing mode none",
    overlap(2, 1, "dra", "dra"),
    "eks-hybrid-gpu:cohorts[2].owner: is a second dra cohort (cohorts[1] is the first); the DRA chart's names and "
    "DeviceClasses are cluster-wide, so it installs once: merge the cohorts",
    "eks-hybrid-gpu:smokeJobs.approvedCohort: 'nope' is not a cohort of this stack: use one of plugin, dra, "
    "dra-b, or remove it to keep every smoke Job suspended",
    "eks-hybrid-gpu:smokeJobs.image: is the deliberately unusable placeholder, so no smoke Job can be approved to "
    "run: set a tested image pinned by digest",
]
