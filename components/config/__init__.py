"""The typed stack config: one strict, frozen model of everything a stack may declare, one module per section.

Each top-level field of `StackConfig` is one Pulumi config key in the `eks-hybrid-gpu` namespace (for example
`eks-hybrid-gpu:cohorts`). Field-level rules live on the models; rules that span several fields live in
`components.validation`, so that every problem is reported at once with its own config path.
"""

from __future__ import annotations

from components.config.charts import ChartPin, ChartsConfig, ChartSource
from components.config.cluster import ClusterConfig
from components.config.cohorts import CohortConfig, Mig, NoSharing, Sharing, TimeSlicing
from components.config.operator import OperatorConfig
from components.config.options import DraConfig, NamespacesConfig, RuntimeClassConfig, SmokeJobsConfig
from components.config.stack import CONFIG_KEYS, StackConfig
from components.config.strict import MAX_RUN_AS_USER, RESERVED_NAMESPACES

__all__ = [
    "CONFIG_KEYS",
    "MAX_RUN_AS_USER",
    "RESERVED_NAMESPACES",
    "ChartPin",
    "ChartSource",
    "ChartsConfig",
    "ClusterConfig",
    "CohortConfig",
    "DraConfig",
    "Mig",
    "NamespacesConfig",
    "NoSharing",
    "OperatorConfig",
    "RuntimeClassConfig",
    "Sharing",
    "SmokeJobsConfig",
    "StackConfig",
    "TimeSlicing",
]
