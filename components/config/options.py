"""`namespaces`, `dra`, `runtimeClass` and `smokeJobs`: the stack's remaining sections."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from cluster.findings import show
from components import versions
from components.config.strict import MAX_RUN_AS_USER, RESERVED_NAMESPACES, StrictModel, owner_field
from policy.gpu_allocation.vocab import grammar
from policy.gpu_allocation.vocab.cel import CelAttributeError, CelFragmentError, check_fragment
from policy.gpu_allocation.vocab.labels import (
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
    Owner,
)
from policy.gpu_allocation.vocab.owners import owner_kind


class NamespacesConfig(StrictModel):
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
        name: str = getattr(self, owner_field(NamespacesConfig, owner))
        return name


class DraConfig(StrictModel):
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


class RuntimeClassConfig(StrictModel):
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


class SmokeJobsConfig(StrictModel):
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
