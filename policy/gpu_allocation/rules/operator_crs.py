"""The GPU Operator's custom resources as the rules read them: which mode a CR is, and its operand switches.

A layer above :mod:`.resource` (it reads a :class:`.resource.Resource`); ``resource`` never imports it.
"""

from __future__ import annotations

from typing import Any

from .props import UNKNOWN, dig
from .resource import Resource


def cr_flag(resource: Resource, component: str) -> Any:
    """``spec.<component>.enabled`` of an Operator CR (the CRD defaults it to true): True/False, UNKNOWN, or None.

    The field is typed boolean: any other value cannot be judged (recorded on the resource).
    """
    raw = dig(resource.props, "spec", component, "enabled")
    if raw is None:
        return True
    if raw is UNKNOWN or isinstance(raw, bool):
        return raw
    resource.cannot_read(f"spec.{component}.enabled", "is not a boolean")
    return None


def cr_mode(resource: Resource) -> str | None:
    """``cluster-policy``/``gpu-cluster`` for a rendered Operator CR object (:attr:`Resource.operator_cr_mode`)."""
    return resource.operator_cr_mode
