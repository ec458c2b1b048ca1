"""The typed stack config: one strict, frozen model of everything a stack may declare.

Each top-level field is one Pulumi config key in the `eks-hybrid-gpu` namespace (for example
`eks-hybrid-gpu:cohorts`). Field-level rules live on the models; rules that span several fields live in
`components.validation`, so that every problem is reported at once with its own config path.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from components import versions
from policy.gpu_allocation.vocab import grammar
from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL, DEFAULT_COHORT_LABEL_KEY, HYBRID, Owner


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


# ---------------------------------------------------------------- cluster


class ClusterConfig(_Strict):
    """Where the stack's Kubernetes API lives and what the program knows about it."""

    source: Literal["local", "kubeconfig", "eks"] = Field(
        default="local",
        description="local: the loopback API server of `eks-hybrid-gpu local up`; kubeconfig: a file; "
        "eks: an EKS cluster read through pulumi-aws.",
    )
    name: str | None = Field(default=None, description="EKS cluster name (source eks).")
    region: str | None = Field(default=None, description="AWS region of the EKS cluster (source eks).")
    kubeconfig: str | None = Field(default=None, description="Path of the kubeconfig file (source kubeconfig).")
    context: str | None = Field(default=None, description="kubeconfig context (source kubeconfig).")
    kubernetes_version: str | None = Field(
        default=None,
        alias="kubernetesVersion",
        description="Cluster version, e.g. 1.34.4. Read from EKS for source eks; declared otherwise.",
    )
    auto_mode: bool = Field(
        default=False,
        alias="autoMode",
        description="Whether EKS Auto Mode is on. Read from EKS for source eks.",
    )
    skip_await: bool = Field(
        default=False,
        alias="skipAwait",
        description="Do not wait for chart workloads to become ready. Only for clusters without GPU "
        "nodes (the local API server), where DaemonSets have nothing to schedule.",
    )
    preflight: bool = Field(
        default=True,
        description="Read the cohorts' nodes before installing and refuse when none match, when a "
        "device-plugin node is MPS-capable, or when a selected node is an Auto Mode node.",
    )

    @field_validator("kubernetes_version")
    @classmethod
    def _version_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^v?\d+\.\d+(\.\d+)?([-+].*)?$", value):
            msg = f"'{value}' is not a Kubernetes version; write it as 1.34.4"
            raise ValueError(msg)
        return value


# ---------------------------------------------------------------- cohorts


class NoSharing(_Strict):
    """Each GPU is handed to one container."""

    mode: Literal["none"] = "none"


class TimeSlicing(_Strict):
    """The device plugin advertises `replicas` access slots per GPU, renamed to nvidia.com/gpu.shared."""

    mode: Literal["time-slicing"]
    replicas: int = Field(ge=2, le=64, description="Logical access slots per GPU; not memory partitions.")
    rename_by_default: bool = Field(default=True, alias="renameByDefault")
    fail_requests_greater_than_one: bool = Field(default=True, alias="failRequestsGreaterThanOne")


class Mig(_Strict):
    """MIG instances prepared by the owner; the plugin's strategy must match the prepared geometry."""

    mode: Literal["mig"]
    mig_strategy: Literal["none", "single", "mixed"] = Field(alias="migStrategy")
    gpu_model: str | None = Field(default=None, alias="gpuModel", description="e.g. A100-40GB, H100-80GB.")
    mig_profile: str | None = Field(
        default=None,
        alias="migProfile",
        description="Profile the smoke Job requests under the mixed strategy, e.g. 1g.5gb.",
    )


Sharing = Annotated[NoSharing | TimeSlicing | Mig, Field(discriminator="mode")]


class CohortConfig(_Strict):
    """A set of hybrid GPU nodes with exactly one allocation owner."""

    name: str = Field(description="DNS label; names the owner's release and the smoke Job.")
    owner: Owner
    node_selector: dict[str, str] | None = Field(
        default=None,
        alias="nodeSelector",
        description="Equality selector. Default: compute-type hybrid plus the cohort label = owner.",
    )
    sharing: Sharing = Field(default_factory=NoSharing)
    host_driver_verified: bool = Field(
        default=False,
        alias="hostDriverVerified",
        description="The NVIDIA driver on these hosts was verified (eks-hybrid-gpu hostcheck).",
    )

    @field_validator("name")
    @classmethod
    def _name_is_dns_label(cls, value: str) -> str:
        if not grammar.DNS_LABEL.fullmatch(value) or len(value) > 40:
            msg = f"'{value}' is not a DNS label of at most 40 characters; use lower-case letters, digits and '-'"
            raise ValueError(msg)
        return value

    @field_validator("node_selector")
    @classmethod
    def _selector_labels(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key, label_value in (value or {}).items():
            if (
                not grammar.LABEL_KEY.fullmatch(key)
                or not grammar.LABEL_VALUE.fullmatch(label_value)
                or len(label_value) > 63
            ):
                msg = f"'{key}: {label_value}' is not a valid Kubernetes label; fix the key or value"
                raise ValueError(msg)
        return value

    def selector(self, cohort_label_key: str) -> dict[str, str]:
        """The effective node selector, sorted by key."""
        chosen = self.node_selector or {COMPUTE_TYPE_LABEL: HYBRID, cohort_label_key: self.owner}
        return dict(sorted(chosen.items()))

    @property
    def sharing_label(self) -> str:
        """Sharing as one word: none, time-slicing, mig-none, mig-single or mig-mixed."""
        if isinstance(self.sharing, Mig):
            return f"mig-{self.sharing.mig_strategy}"
        return self.sharing.mode


# ---------------------------------------------------------------- operator


class OperatorConfig(_Strict):
    """GPU Operator settings; used only when a cohort's owner is gpu-operator."""

    mode: Literal["cluster-policy", "gpu-cluster"] = "cluster-policy"
    driver_enabled: bool = Field(
        default=False,
        alias="driverEnabled",
        description="Let the Operator manage the driver. false only where the host driver is verified.",
    )
    toolkit_enabled: bool = Field(
        default=False,
        alias="toolkitEnabled",
        description="Let the Operator manage the container toolkit. false only after the runtime is prepared.",
    )
    device_plugin_enabled: bool = Field(
        default=True,
        alias="devicePluginEnabled",
        description="ClusterPolicy mode: the Operator's own device plugin owns the cohort.",
    )
    mig_manager_enabled: bool = Field(default=False, alias="migManagerEnabled")
    nfd_enabled: bool = Field(
        default=False,
        alias="nfdEnabled",
        description="Deploy NFD with the Operator. Off: discovery labels come from the approved process.",
    )


# ---------------------------------------------------------------- charts


class ChartSource(_Strict):
    """Where a chart comes from: exactly one of repo, oci or archive."""

    repo: str | None = Field(default=None, description="Helm repository URL.")
    oci: str | None = Field(default=None, description="OCI chart reference, oci://host/path/chart.")
    archive: str | None = Field(default=None, description="Local .tgz path, relative to the project.")
    plain_http: bool = Field(default=False, alias="plainHttp", description="OCI mirror on plain HTTP.")


class ChartPin(_Strict):
    """An exact chart version and its source."""

    version: str
    source: ChartSource | None = None

    @field_validator("version")
    @classmethod
    def _exact(cls, value: str) -> str:
        if not grammar.EXACT_VERSION.fullmatch(value):
            msg = f"'{value}' is not an exact chart version; pin one release such as 0.20.0"
            raise ValueError(msg)
        return value


class ChartsConfig(_Strict):
    """Pinned versions of the three owner charts."""

    device_plugin: ChartPin = Field(
        default_factory=lambda: ChartPin(version=versions.DEVICE_PLUGIN_VERSION), alias="devicePlugin"
    )
    dra_driver: ChartPin = Field(
        default_factory=lambda: ChartPin(version=versions.DRA_DRIVER_VERSION), alias="draDriver"
    )
    gpu_operator: ChartPin = Field(
        default_factory=lambda: ChartPin(version=versions.GPU_OPERATOR_VERSION), alias="gpuOperator"
    )


# ---------------------------------------------------------------- namespaces, DRA, runtime class, smoke


class NamespacesConfig(_Strict):
    """Namespaces owned by the GPU infrastructure operator."""

    device_plugin: str = Field(default="gpu-system", alias="devicePlugin")
    dra_driver: str = Field(default="gpu-dra-system", alias="draDriver")
    gpu_operator: str = Field(default="gpu-operator", alias="gpuOperator")
    workloads: str = Field(default="ai-workloads")

    @field_validator("device_plugin", "dra_driver", "gpu_operator", "workloads")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not grammar.DNS_LABEL.fullmatch(value) or value == "default":
            msg = f"'{value}' cannot hold GPU components; use a DNS label other than 'default'"
            raise ValueError(msg)
        return value


class DraConfig(_Strict):
    """DRA DeviceClasses, claim template and driver options."""

    large_gpu_memory: str = Field(
        default="40Gi",
        alias="largeGpuMemory",
        description="hybrid-large-gpu selects devices advertising more memory than this.",
    )
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        alias="featureGates",
        description="DRA driver feature gates. Alpha gates are refused by the policy pack unless allow-listed.",
    )
    extra_selector: str | None = Field(
        default=None,
        alias="extraSelector",
        description="An extra CEL expression ANDed into hybrid-large-gpu; validated by the API server.",
    )

    @field_validator("large_gpu_memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not grammar.SIMPLE_QUANTITY.fullmatch(value):
            msg = f"'{value}' is not a Kubernetes quantity; write it like 40Gi"
            raise ValueError(msg)
        return value


class RuntimeClassConfig(_Strict):
    """The RuntimeClass the device-plugin path and its smoke Job run with."""

    name: str = "nvidia"
    hosts_have_nvidia_handler: bool = Field(
        default=False,
        alias="hostsHaveNvidiaHandler",
        description="true: the hosts' containerd has an `nvidia` handler, so create the class. "
        "false: the class must already exist; the class name alone does not configure the handler.",
    )


class SmokeJobsConfig(_Strict):
    """Suspended, hardened GPU smoke Jobs, one per cohort."""

    image: str = Field(default=versions.SMOKE_IMAGE_PLACEHOLDER, description="Image pinned by @sha256 digest.")
    approved_cohort: str | None = Field(
        default=None,
        alias="approvedCohort",
        description="The one cohort whose smoke Job may run (unsuspended). None: all stay suspended.",
    )
    active_deadline_seconds: int = Field(default=120, ge=10, le=600, alias="activeDeadlineSeconds")
    ttl_seconds_after_finished: int = Field(default=600, ge=60, le=86400, alias="ttlSecondsAfterFinished")
    run_as_user: int = Field(default=65532, ge=1, alias="runAsUser")
    probe: bool = Field(
        default=False,
        description="Run the bounded CUDA probe (mounted from a ConfigMap) instead of `nvidia-smi -L`.",
    )

    @field_validator("image")
    @classmethod
    def _digest(cls, value: str) -> str:
        if not grammar.DIGEST_IMAGE.fullmatch(value):
            msg = (
                f"'{value}' is not pinned by digest; a tag can move under an approved test. "
                "Use registry/repo@sha256:<64 hex digits>"
            )
            raise ValueError(msg)
        return value


# ---------------------------------------------------------------- the whole stack


class StackConfig(_Strict):
    """Everything one stack (one cluster) declares."""

    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    cohort_label_key: str = Field(default=DEFAULT_COHORT_LABEL_KEY, alias="cohortLabelKey")
    cohorts: tuple[CohortConfig, ...] = Field(strict=False)
    operator: OperatorConfig = Field(default_factory=OperatorConfig)
    charts: ChartsConfig = Field(default_factory=ChartsConfig)
    namespaces: NamespacesConfig = Field(default_factory=NamespacesConfig)
    dra: DraConfig = Field(default_factory=DraConfig)
    runtime_class: RuntimeClassConfig = Field(default_factory=RuntimeClassConfig, alias="runtimeClass")
    smoke_jobs: SmokeJobsConfig = Field(default_factory=SmokeJobsConfig, alias="smokeJobs")

    @field_validator("cohorts")
    @classmethod
    def _at_least_one(cls, value: tuple[CohortConfig, ...]) -> tuple[CohortConfig, ...]:
        # A validator, not min_length: min_length would also fire when every cohort failed its own checks.
        if not value:
            msg = "is empty; declare at least one cohort with a name and an owner"
            raise ValueError(msg)
        return value

    def cohorts_of(self, owner: Owner) -> list[tuple[int, CohortConfig]]:
        """The cohorts one owner serves, with their index in the config list."""
        return [(i, c) for i, c in enumerate(self.cohorts) if c.owner == owner]


CONFIG_KEYS: tuple[str, ...] = tuple(field.alias or name for name, field in StackConfig.model_fields.items())
"""The Pulumi config keys (without the project namespace) the program reads."""
