"""The Operator's values, rendered by the real chart: its operands no longer tolerate the Auto Mode GPU taint.

`helm template` of gpu-operator v26.7.0 with the values this program renders: the ClusterPolicy's
`spec.daemonsets.tolerations` (the Operator copies a non-empty list into every operand DaemonSet) holds the
Operator cohort's taint only, so a node tainted `nvidia.com/gpu:NoSchedule` repels every operand. With the chart's
defaults the same node is tolerated. GPUCluster mode renders the same `.Values.daemonsets` into its CR
(templates/gpucluster.yaml), but the chart refuses an offline render of it without a served DeviceClass API
(`--api-versions`), which `tests.policy.helm.template` does not pass; its values are asserted in the unit tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.judge.operator_boundary import untolerated
from components.config import CohortConfig, OperatorConfig
from components.gpu_operator import gpu_operator_values
from tests.support import charts

from .helm import template

pytestmark = [pytest.mark.policy, pytest.mark.charts]

AUTO_MODE_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
COHORT_TAINT = {"key": "workload.example.com/gpu-allocation", "value": "gpu-operator", "effect": "NoSchedule"}


def _operand_tolerations(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = template("gpu-operator", charts.gpu_operator(), "gpu-operator", values)
    (resource,) = [o for o in rendered if o.get("kind") == "ClusterPolicy"]
    tolerations: list[dict[str, Any]] = resource["spec"]["daemonsets"]["tolerations"]
    return tolerations


def test_rendered_operands_tolerate_the_cohort_taint_and_not_nvidia_gpu() -> None:
    cohort = CohortConfig.model_validate({"name": "operator", "owner": "gpu-operator", "hostDriverVerified": True})
    values = gpu_operator_values(OperatorConfig(mode="cluster-policy"), cohort)
    defaults = {k: v for k, v in values.items() if k != "daemonsets"}

    ours = _operand_tolerations(values)
    chart_default = _operand_tolerations(defaults)

    assert ours == [{**COHORT_TAINT, "operator": "Equal"}]
    assert untolerated([AUTO_MODE_TAINT], ours) == ["nvidia.com/gpu:NoSchedule"]
    assert untolerated([COHORT_TAINT], ours) == []
    assert untolerated([AUTO_MODE_TAINT], chart_default) == []  # what the chart alone lets onto Auto Mode nodes
