"""`StackConfig`: everything one stack declares, one field per Pulumi config key."""

from __future__ import annotations

from pydantic import Field, field_validator

from cluster.findings import show
from components.config.charts import ChartsConfig
from components.config.cluster import ClusterConfig
from components.config.cohorts import CohortConfig
from components.config.operator import OperatorConfig
from components.config.options import DraConfig, NamespacesConfig, RuntimeClassConfig, SmokeJobsConfig
from components.config.strict import StrictModel
from policy.gpu_allocation.vocab import grammar
from policy.gpu_allocation.vocab.labels import (
    COMPUTE_TYPE_LABEL,
    DEFAULT_COHORT_LABEL_KEY,
    DEVICE_PLUGIN,
    GPU_OPERATOR,
    Owner,
)


class StackConfig(StrictModel):
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
