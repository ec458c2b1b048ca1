"""Driver and chart policies: who owns the driver, pinned charts, Operator hooks kept; one module per rule.

The seed's words for each rule are in its module; this package lists the family's policies in README order.
"""

from __future__ import annotations

from typing import Final

from .chart_versions import CHART_VERSION_PINNED
from .driver_ownership import DRIVER_OWNERSHIP_CONSISTENT, DRIVER_VERIFICATION_DECLARED
from .operator_hooks import OPERATOR_HOOKS_KEPT

__all__ = [
    "CHART_VERSION_PINNED",
    "DRIVER_OWNERSHIP_CONSISTENT",
    "DRIVER_VERIFICATION_DECLARED",
    "OPERATOR_HOOKS_KEPT",
    "POLICIES",
]

POLICIES: Final = (
    DRIVER_OWNERSHIP_CONSISTENT,
    DRIVER_VERIFICATION_DECLARED,
    CHART_VERSION_PINNED,
    OPERATOR_HOOKS_KEPT,
)
