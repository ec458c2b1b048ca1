"""The typed stack config: one strict, frozen model of everything a stack may declare.

Each top-level field is one Pulumi config key in the `eks-hybrid-gpu` namespace (for example
`eks-hybrid-gpu:cohorts`). Field-level rules live on the models; rules that span several fields live in
`components.validation`, so that every problem is reported at once with its own config path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from cluster.findings import show
from components import versions
from policy.gpu_allocation.vocab import grammar, kube_releases
from policy.gpu_allocation.vocab.cel import CelAttributeError, CelFragmentError, check_fragment
from policy.gpu_allocation.vocab.labels import (
    COMPUTE_TYPE_LABEL,
    DEFAULT_COHORT_LABEL_KEY,
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
    HYBRID,
    Owner,
)
from policy.gpu_allocation.vocab.mig import is_tabulated_profile, tabulated_profiles
from policy.gpu_allocation.vocab.owners import owner_kind

RESERVED_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces Kubernetes itself uses: GPU components never go there."""
MAX_RUN_AS_USER: Final = 2**31 - 1
"""Kubernetes refuses a runAsUser above the int32 range."""


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
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        alias="featureGates",
        description="DRA feature gates the cluster sets against its version's defaults, e.g. DRAExtendedResource: "
        "true on 1.34/1.35 (docs/versions.md). The local default starts its control plane with them; the preflight "
        "and `migrate` judge each cohort with them.",
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
        if value is not None and not grammar.KUBERNETES_VERSION.fullmatch(value):
            msg = f"{show(value)} is not a Kubernetes version; write it as 1.34.4"
            raise ValueError(msg)
        return value

    @field_validator("feature_gates")
    @classmethod
    def _gate_names(cls, value: dict[str, bool]) -> dict[str, bool]:
        for gate in value:
            if not grammar.FEATURE_GATE.fullmatch(gate):
                msg = f"{show(gate)} is not a feature gate name; write it as --feature-gates does: DRAExtendedResource"
                raise ValueError(msg)
        return value

    @property
    def release_minor(self) -> kube_releases.Minor:
        """The declared version's (major, minor); the newest supported when none is declared (read from EKS)."""
        if self.kubernetes_version is None:
            return kube_releases.EKS_MINORS[-1]
        major, minor = self.kubernetes_version.removeprefix("v").split(".")[:2]
        return int(major), int(minor)

    @field_validator("name")
    @classmethod
    def _eks_name(cls, value: str | None) -> str | None:
        if value is not None and not grammar.EKS_CLUSTER_NAME.fullmatch(value):
            msg = (
                f"{show(value)} is not an EKS cluster name; use up to 100 letters, digits, '-' and '_', "
                "starting with a letter or digit"
            )
            raise ValueError(msg)
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not grammar.AWS_REGION.fullmatch(value):
            msg = f"{show(value)} is not an AWS region; write it like us-west-2"
            raise ValueError(msg)
        return value

    @field_validator("kubeconfig")
    @classmethod
    def _kubeconfig_path(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_path(value):
            msg = (
                "is not a usable file path (empty, a NUL or line break, or too long); "
                "set the path of the kubeconfig file, e.g. ~/.kube/config"
            )
            raise ValueError(msg)
        return value

    @field_validator("context")
    @classmethod
    def _context(cls, value: str | None) -> str | None:
        if value is not None and not grammar.KUBE_CONTEXT.fullmatch(value):
            msg = (
                f"{show(value)} is not a kubeconfig context name; use the name `kubectl config get-contexts` "
                "lists (letters, digits and @:._/+=- only)"
            )
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

    @field_validator("mig_profile")
    @classmethod
    def _tabulated(cls, value: str | None) -> str | None:
        if value is not None and not is_tabulated_profile(value):
            msg = (
                f"{show(value)} is not a MIG profile of any tabulated GPU model; the device plugin only advertises "
                f"real profiles: use one of {', '.join(tabulated_profiles())}"
            )
            raise ValueError(msg)
        return value


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
        if not grammar.is_dns_label(value, max_length=40):
            msg = f"{show(value)} is not a DNS label of at most 40 characters; use lower-case letters, digits and '-'"
            raise ValueError(msg)
        return value

    @field_validator("node_selector")
    @classmethod
    def _selector_labels(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key, label_value in (value or {}).items():
            if not grammar.is_label_key(key):
                msg = (
                    f"{show(key)} is not a Kubernetes label key; use an optional DNS-subdomain prefix and '/', then "
                    "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
                )
                raise ValueError(msg)
            if not grammar.is_label_value(label_value):
                msg = (
                    f"{show(key)}: {show(label_value)} is not a Kubernetes label value; use at most 63 letters, "
                    "digits, '-', '_' or '.', starting and ending with a letter or digit"
                )
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
    _secret: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any) -> None:
        """Remember whether the `charts` config key was set as a secret (the validation context says so)."""
        self._secret = isinstance(context, Mapping) and "charts" in context.get("secret_keys", ())

    @property
    def secret(self) -> bool:
        """The repository URL must reach the provider as a secret."""
        return self._secret

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_helm_repo_url(value):
            msg = "is not a Helm repository URL: write https://host/path (credentials as https://user:token@host/path)"
            raise ValueError(msg)
        return value

    @field_validator("oci")
    @classmethod
    def _oci(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_oci_chart(value):
            msg = f"{show(value)} is not an OCI reference: write oci://host/path/chart"
            raise ValueError(msg)
        return value

    @field_validator("archive")
    @classmethod
    def _archive(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_path(value):
            msg = (
                "is not a usable file path (empty, a NUL or line break, over 4096 characters or a name over 255 "
                "bytes): point it at the chart's .tgz"
            )
            raise ValueError(msg)
        return value


class ChartPin(_Strict):
    """An exact chart version and its source."""

    version: str
    source: ChartSource | None = None

    @field_validator("version")
    @classmethod
    def _exact(cls, value: str) -> str:
        if not grammar.is_exact_version(value):
            msg = f"{show(value)} is not an exact chart version; pin one release such as 0.20.0"
            raise ValueError(msg)
        return value


def _pinned(owner: Owner) -> ChartPin:
    """The registry's pinned release of an owner's chart, with its default (upstream) source."""
    return ChartPin(version=owner_kind(owner).chart.version)


def _field_of(model: type[BaseModel], owner: Owner) -> str:
    """The model field whose config key is the owner's `config_key` (`devicePlugin` -> device_plugin)."""
    key = owner_kind(owner).config_key
    found = next((name for name, field in model.model_fields.items() if (field.alias or name) == key), None)
    if found is None:
        msg = f"{model.__name__} has no field {key} for owner {owner}: add one (docs/adding-an-owner-kind.md)"
        raise LookupError(msg)
    return found


class ChartsConfig(_Strict):
    """Pinned versions of the owner charts, one field per owner kind under its `config_key`."""

    device_plugin: ChartPin = Field(default_factory=lambda: _pinned(DEVICE_PLUGIN), alias="devicePlugin")
    dra_driver: ChartPin = Field(default_factory=lambda: _pinned(DRA), alias="draDriver")
    gpu_operator: ChartPin = Field(default_factory=lambda: _pinned(GPU_OPERATOR), alias="gpuOperator")

    def of(self, owner: Owner) -> ChartPin:
        """The pin of one owner's chart."""
        pin: ChartPin = getattr(self, _field_of(ChartsConfig, owner))
        return pin


# ---------------------------------------------------------------- namespaces, DRA, runtime class, smoke


class NamespacesConfig(_Strict):
    """Namespaces owned by the GPU infrastructure operator."""

    device_plugin: str = Field(
        default=owner_kind(DEVICE_PLUGIN).default_namespace,
        alias="devicePlugin",
        description="The device plugin's namespace; also the home of the ownership ledger.",
    )
    dra_driver: str = Field(default=owner_kind(DRA).default_namespace, alias="draDriver")
    gpu_operator: str = Field(default=owner_kind(GPU_OPERATOR).default_namespace, alias="gpuOperator")
    workloads: str = Field(default="ai-workloads")

    @field_validator("device_plugin", "dra_driver", "gpu_operator", "workloads")
    @classmethod
    def _dns(cls, value: str) -> str:
        if value in RESERVED_NAMESPACES:
            msg = (
                f"{show(value)} belongs to Kubernetes itself and cannot hold GPU components; use a namespace of your "
                f"own (not {', '.join(RESERVED_NAMESPACES)})"
            )
            raise ValueError(msg)
        if not grammar.is_dns_label(value):
            msg = (
                f"{show(value)} is not a namespace name; use a DNS label of at most 63 lower-case letters, digits "
                "and '-'"
            )
            raise ValueError(msg)
        return value

    def of(self, owner: Owner) -> str:
        """The namespace of one owner kind."""
        name: str = getattr(self, _field_of(NamespacesConfig, owner))
        return name


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
    extended_resource_name: Literal["nvidia.com/gpu"] | None = Field(
        default=None,
        alias="extendedResourceName",
        description="nvidia.com/gpu: keep the chart's gpu.nvidia.com DeviceClass mapping of that name (KEP-5004), so "
        "pods asking nvidia.com/gpu are served through DRA claims on the DRA cohort, where the cluster's version and "
        "the cohort's kubelets have DRAExtendedResource on (docs/versions.md). Unset: the mapping is removed and DRA "
        "devices are reached through claims only.",
    )
    extra_selector: str | None = Field(
        default=None,
        alias="extraSelector",
        description="An extra CEL condition ANDed into hybrid-large-gpu; it must parse on its own, so it can only "
        "narrow the class.",
    )

    @field_validator("large_gpu_memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        amount = grammar.parse_quantity(value) if grammar.is_quantity(value) else None
        if amount is None:
            msg = f"{show(value)} is not a Kubernetes quantity; write it like 40Gi"
            raise ValueError(msg)
        if amount <= 0:
            msg = f"{show(value)} is not a positive amount of memory; write it like 40Gi"
            raise ValueError(msg)
        return value

    @field_validator("feature_gates")
    @classmethod
    def _gate_names(cls, value: dict[str, bool]) -> dict[str, bool]:
        for key in value:
            if not grammar.FEATURE_GATE.fullmatch(key):
                msg = (
                    f"{show(key)} is not a feature-gate name; gate names are upper-camel-case identifiers such as "
                    "DynamicMIG: fix the spelling"
                )
                raise ValueError(msg)
        return value

    @field_validator("extra_selector")
    @classmethod
    def _one_condition(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            check_fragment(value)
        except CelAttributeError as error:
            # Parses, but a real node's devices would never match it: name what the driver does publish.
            msg = f"{error}; select on what the driver publishes, as a real node's ResourceSlice shows it"
            raise ValueError(msg) from None
        except CelFragmentError as error:
            msg = (
                f"is not one CEL condition on its own: {error}; write comparisons of device.driver, "
                "device.attributes[...] or device.capacity[...] joined by && or || with balanced parentheses"
            )
            raise ValueError(msg) from None
        return value


class RuntimeClassConfig(_Strict):
    """The RuntimeClass the device-plugin path and its smoke Job run with."""

    name: str = "nvidia"
    hosts_have_nvidia_handler: bool = Field(
        default=False,
        alias="hostsHaveNvidiaHandler",
        description="Who makes the RuntimeClass. true: every GPU host's containerd has an `nvidia` handler, so the "
        "program creates the class with handler nvidia. false: reuse an existing class of this name (the preflight "
        "checks that it exists); the class name alone does not configure the handler.",
    )

    @field_validator("name")
    @classmethod
    def _subdomain(cls, value: str) -> str:
        if not grammar.is_dns_subdomain(value):
            msg = (
                f"{show(value)} is not a RuntimeClass name; use a DNS subdomain of at most 253 lower-case letters, "
                "digits, '-' and '.', e.g. nvidia"
            )
            raise ValueError(msg)
        return value


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
    run_as_user: int = Field(default=65532, ge=1, le=MAX_RUN_AS_USER, alias="runAsUser")
    probe: bool = Field(
        default=False,
        description="Run the bounded CUDA probe (mounted from a ConfigMap) instead of `nvidia-smi -L`.",
    )

    @field_validator("image")
    @classmethod
    def _digest(cls, value: str) -> str:
        if not grammar.is_digest_image(value):
            msg = (
                f"{show(value)} is not pinned by digest; a tag can move under an approved test. "
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
    cohort_label_guard: bool = Field(
        default=True,
        alias="cohortLabelGuard",
        description="Install a ValidatingAdmissionPolicy that refuses changing a schedulable Node's cohort label "
        "(components.node_guard); false leaves relabelling unguarded, for clusters that guard it otherwise.",
    )

    @field_validator("cohort_label_key")
    @classmethod
    def _label_key(cls, value: str) -> str:
        if not grammar.is_label_key(value):
            msg = (
                f"{show(value)} is not a Kubernetes label key; use an optional DNS-subdomain prefix and '/', then at "
                "most 63 letters, digits, '-', '_' or '.', e.g. workload.example.com/gpu-allocation"
            )
            raise ValueError(msg)
        if value == COMPUTE_TYPE_LABEL:
            msg = (
                f"is {COMPUTE_TYPE_LABEL}, which already says hybrid; cohorts need a label of their own: "
                f"use e.g. {DEFAULT_COHORT_LABEL_KEY}"
            )
            raise ValueError(msg)
        return value

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

    @property
    def operator_mode(self) -> str | None:
        """The GPU Operator's mode when a cohort is the Operator's, else None (as the ledger records it)."""
        return self.operator.mode if self.cohorts_of(GPU_OPERATOR) else None

    @property
    def needs_runtime_class(self) -> bool:
        """The device-plugin path (and a ClusterPolicy Operator without its toolkit) runs pods with the RuntimeClass."""
        if self.cohorts_of(DEVICE_PLUGIN):
            return True
        # With its toolkit on, the Operator provides the class and the handler itself.
        return self.operator_mode == "cluster-policy" and not self.operator.toolkit_enabled


CONFIG_KEYS: tuple[str, ...] = tuple(field.alias or name for name, field in StackConfig.model_fields.items())
"""The Pulumi config keys (without the project namespace) the program reads."""
