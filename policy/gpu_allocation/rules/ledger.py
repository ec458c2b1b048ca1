"""The program's ledger ConfigMap as the pack reads it: the cohort -> owner map the stack declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..vocab import labels as vocab
from ..vocab.ledger import beside_of, ledger_cohorts, ledger_problems, read_record
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


def beside_key(ledger: Ledger | None, cohort: str | None, owner: str | None) -> str | None:
    """The unit key of `owner` installed beside cohort `cohort`'s own owner, as the ledger records it; else None.

    While `migrate` moves a cohort to DRA one node at a time, the ledger records the new owner beside the old
    (`beside`: its owner and the hosts' new selector); the pack judges it as a unit of its own, so the two owners'
    placements are still compared like two cohorts' (disjoint, or refused).
    """
    if ledger is None or not ledger.known or cohort is None or owner is None:
        return None
    entry = ledger.cohorts.get(cohort)
    beside = beside_of(entry) if entry is not None else None
    if beside is None or beside[0] != owner or entry is None or entry.get("owner") == owner:
        return None
    return f"{cohort} ({owner} beside, one node at a time)"
