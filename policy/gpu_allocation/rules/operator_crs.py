"""The GPU Operator's custom resources as the rules read them: which mode a CR is, and its operand switches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .props import UNKNOWN, dig

if TYPE_CHECKING:
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
    """``cluster-policy``/``gpu-cluster`` for a rendered Operator CR object."""
    if not resource.api_group_version.startswith("nvidia.com/"):
        return None
    if resource.kind == "ClusterPolicy":
        return "cluster-policy"
    if resource.kind == "GPUCluster":
        return "gpu-cluster"
    return None
