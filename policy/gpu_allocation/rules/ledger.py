"""The program's ledger ConfigMap as the pack reads it: the cohort -> owner map the stack declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..vocab import labels as vocab
from ..vocab.ledger import ledger_cohorts, ledger_problems, read_record
from .props import UNKNOWN, dig
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
    """Read ``data["ownership.json"]`` of the ledger ConfigMap with the vocabulary's one ledger reader."""
    raw = dig(resource.props, "data", vocab.LEDGER_KEY)
    if raw is UNKNOWN:
        return Ledger(resource, known=False)
    if not isinstance(raw, str):
        return Ledger(resource, known=True, error="has no ownership.json key")
    where = f"data['{vocab.LEDGER_KEY}']"
    document, error = read_record(raw)
    if document is None:
        reason = error or "is not a JSON object"
        resource.cannot_read(where, reason)
        return Ledger(resource, known=True, error=reason)
    problems = ledger_problems(document)
    for part, why in problems:
        resource.cannot_read(f"{where}{part}", why)
    if problems and problems[0][0] == "":
        return Ledger(resource, known=True, error=problems[0][1])
    return Ledger(
        resource,
        known=True,
        cohorts=ledger_cohorts(document),
        operator_mode=document.get("operatorMode"),
    )
