"""The ledger the last `pulumi up` wrote, read once into a typed `Ledger`: who owns which cohort, by which selector.

One reader for the preflight, `inspect`, `move-host`, `migrate` and `review`: the text is parsed with the pack's
record format (`vocab.ledger`, bounded in depth), shape-checked once, and handed on as a `Ledger`, so no caller
re-checks a dict. Content that cannot be used is a `LedgerError` naming the ConfigMap and the fix: a check that
cannot read the previous owners says so rather than judging against nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, LEDGER_KEY, LEDGER_NAME, Owner
from policy.gpu_allocation.vocab.ledger import ledger_problems, read_record


class LedgerError(Exception):
    """A ledger (or migration record) ConfigMap whose content cannot be read: nothing can be judged against it."""


IN_CLUSTER_FIX: Final = "it is written by `pulumi up`: run it again, or restore the ConfigMap"
"""The fix for an unreadable record read from a cluster."""


def parse_record(
    configmap: Mapping[str, Any] | None, key: str = LEDGER_KEY, *, fix: str = IN_CLUSTER_FIX
) -> dict[str, Any] | None:
    """The JSON object under `key` of a ConfigMap; None when the ConfigMap or key is absent.

    Content that is not a JSON object (bounded in depth), or a ledger whose cohorts cannot be used, is a
    LedgerError. The migration record beside the ledger is read with it too (`cluster.records.migration`).
    """
    if configmap is None:
        return None
    meta = configmap.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')} key {key}"
    text = (configmap.get("data") or {}).get(key)
    if not text:
        return None
    found, reason = read_record(text)
    if found is None:
        msg = f"{where} {reason}; {fix}"
        raise LedgerError(msg)
    problems = ledger_problems(found) if key == LEDGER_KEY else []
    if problems:
        part, why = problems[0]
        msg = f"{where}{part} {why}; {fix}"
        raise LedgerError(msg)
    return found


@dataclass(frozen=True)
class LedgerCohort:
    """One cohort as the ledger records it."""

    name: str
    owner: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    namespace: str | None = None
    """The owner's namespace when it was installed; None in a ledger written before namespaces were recorded."""
    entry: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The entry as written (sharing, hostDriverVerified, installed): shown by `inspect`, never judged."""


@dataclass(frozen=True)
class Ledger:
    """The ownership map of ConfigMap `ref` (NAMESPACE/NAME), checked once."""

    ref: str
    cohorts: Mapping[str, LedgerCohort]
    operator_mode: str | None
    document: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The object as written: what `inspect -o json` prints."""

    @property
    def namespace(self) -> str:
        """The ledger's namespace, where the migration record and the Leases live too."""
        return self.ref.split("/", 1)[0]

    def owners(self) -> dict[str, str]:
        """Cohort -> owner."""
        return {name: cohort.owner for name, cohort in self.cohorts.items()}

    def selectors(self) -> dict[str, Mapping[str, str]]:
        """Cohort -> node selector."""
        return {name: cohort.node_selector for name, cohort in self.cohorts.items()}


def ledger_of(document: Mapping[str, Any] | None, ref: str) -> Ledger | None:
    """The typed ledger of an object `parse_record` accepted; None for none."""
    if document is None:
        return None
    cohorts = {
        str(name): LedgerCohort(
            str(name),
            str(entry.get("owner")),
            dict(entry.get("nodeSelector") or {}),
            entry.get("namespace"),
            dict(entry),
        )
        for name, entry in (document.get("cohorts") or {}).items()
    }
    mode = document.get("operatorMode")
    return Ledger(ref, cohorts, mode if isinstance(mode, str) else None, dict(document))


class NamespacesView(Protocol):
    """Where each owner kind is installed."""

    def of(self, owner: Owner) -> str:
        """The namespace of an owner kind."""
        ...


LEDGER_HOME: Final[Owner] = DEVICE_PLUGIN
"""The owner kind whose namespace holds the ledger and the migration record beside it (`namespaces.devicePlugin`)."""


def ledger_namespace(namespaces: NamespacesView) -> str:
    """Where a stack's ledger lives: the namespace of LEDGER_HOME, as the stack config names it."""
    return namespaces.of(LEDGER_HOME)


def ledger_ref_of(namespace: str) -> str:
    """`NAMESPACE/gpu-allocation-ledger`."""
    return f"{namespace}/{LEDGER_NAME}"
