"""`cohorts`: the node cohorts, each with one allocation owner and its sharing mode."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from cluster.findings import show
from components.config.strict import StrictModel
from policy.gpu_allocation.vocab import grammar
from policy.gpu_allocation.vocab.labels import (
    COMPUTE_TYPE_LABEL,
    HYBRID,
    Owner,
)
from policy.gpu_allocation.vocab.mig import is_tabulated_profile, tabulated_profiles


class NoSharing(StrictModel):
    """Each GPU is handed to one container."""

    mode: Literal["none"] = "none"


class TimeSlicing(StrictModel):
    """The device plugin advertises `replicas` access slots per GPU, renamed to nvidia.com/gpu.shared."""

    mode: Literal["time-slicing"]
    replicas: int = Field(ge=2, le=64, description="Logical access slots per GPU; not memory partitions.")
    rename_by_default: bool = Field(default=True, alias="renameByDefault")
    fail_requests_greater_than_one: bool = Field(default=True, alias="failRequestsGreaterThanOne")


class Mig(StrictModel):
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


class CohortConfig(StrictModel):
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
