"""The program's ledger ConfigMap as the pack reads it: the cohort -> owner map the stack declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..vocab import labels as vocab
from .parsing import load_json
from .props import UNKNOWN, dig, string_map
from .resource import Resource


@dataclass
class Ledger:
    """The parsed ledger ConfigMap."""

    resource: Resource
    known: bool
    error: str | None = None
    cohorts: dict[str, dict[str, Any]] = field(default_factory=dict)
    operator_mode: Any = None


def parse_ledger(resource: Resource) -> Ledger:
    """Read ``data["ownership.json"]`` of the ledger ConfigMap."""
    raw = dig(resource.props, "data", vocab.LEDGER_KEY)
    if raw is UNKNOWN:
        return Ledger(resource, known=False)
    if not isinstance(raw, str):
        return Ledger(resource, known=True, error="has no ownership.json key")
    document, error = load_json(raw)
    where = f"data['{vocab.LEDGER_KEY}']"
    if error is not None:
        resource.cannot_read(where, error)
        return Ledger(resource, known=True, error=error)
    if not isinstance(document, dict) or not isinstance(document.get("cohorts"), dict):
        resource.cannot_read(where, "has no 'cohorts' object")
        return Ledger(resource, known=True, error="has no 'cohorts' object")
    for name, entry in document["cohorts"].items():
        if not isinstance(entry, dict):
            resource.cannot_read(f"{where} cohort '{name}'", "is not an object")
        elif entry.get("nodeSelector") is not None and string_map(entry.get("nodeSelector")) is None:
            resource.cannot_read(f"{where} cohort '{name}' nodeSelector", "is not a map of strings")
    cohorts = {str(name): entry for name, entry in document["cohorts"].items() if isinstance(entry, dict)}
    return Ledger(
        resource,
        known=True,
        cohorts=cohorts,
        operator_mode=document.get("operatorMode"),
    )
