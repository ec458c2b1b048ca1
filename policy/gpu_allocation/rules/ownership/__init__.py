"""Ownership policies: one GPU allocation owner per node, one Operator CR per cluster; one module per rule.

The seed's words for each rule are in its module; this package lists the family's policies in README order.
"""

from __future__ import annotations

from typing import Final

from .cluster_scoped import COMPUTE_DOMAIN_CRDS_ONE_OWNER, NFD_ONE_OWNER
from .gpu_operator import GPU_CLUSTER_EXCLUDES_STANDALONE_DRA, OPERATOR_CR_EXCLUSIVE, OPERATOR_DEVICE_PLUGIN_DISABLED
from .ledger_consistent import OWNERSHIP_LEDGER_CONSISTENT
from .operator_tolerations import OPERATOR_OPERAND_TOLERATIONS_REVIEWED
from .single_owner import SINGLE_ALLOCATION_OWNER

__all__ = [
    "COMPUTE_DOMAIN_CRDS_ONE_OWNER",
    "GPU_CLUSTER_EXCLUDES_STANDALONE_DRA",
    "NFD_ONE_OWNER",
    "OPERATOR_CR_EXCLUSIVE",
    "OPERATOR_DEVICE_PLUGIN_DISABLED",
    "OPERATOR_OPERAND_TOLERATIONS_REVIEWED",
    "OWNERSHIP_LEDGER_CONSISTENT",
    "POLICIES",
    "SINGLE_ALLOCATION_OWNER",
]

POLICIES: Final = (
    SINGLE_ALLOCATION_OWNER,
    OPERATOR_DEVICE_PLUGIN_DISABLED,
    GPU_CLUSTER_EXCLUDES_STANDALONE_DRA,
    COMPUTE_DOMAIN_CRDS_ONE_OWNER,
    NFD_ONE_OWNER,
    OWNERSHIP_LEDGER_CONSISTENT,
    OPERATOR_CR_EXCLUSIVE,
    OPERATOR_OPERAND_TOLERATIONS_REVIEWED,
)
