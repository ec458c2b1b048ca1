"""The base of every config model: strict, frozen, unknown keys refused, camelCase aliases accepted."""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict

from policy.gpu_allocation.vocab.labels import Owner
from policy.gpu_allocation.vocab.owners import owner_kind

RESERVED_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces Kubernetes itself uses: GPU components never go there."""
MAX_RUN_AS_USER: Final = 2**31 - 1
"""Kubernetes refuses a runAsUser above the int32 range."""


class StrictModel(BaseModel):
    """Refuses unknown keys (a typo is an error, not a silent default) and cannot change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


def owner_field(model: type[BaseModel], owner: Owner) -> str:
    """The model field whose config key is the owner's `config_key` (`devicePlugin` -> device_plugin)."""
    key = owner_kind(owner).config_key
    found = next((name for name, field in model.model_fields.items() if (field.alias or name) == key), None)
    if found is None:
        msg = f"{model.__name__} has no field {key} for owner {owner}: add one (docs/adding-an-owner-kind.md)"
        raise LookupError(msg)
    return found
