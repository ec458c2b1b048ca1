"""The ledger record's format, read one way by the pack, the preflight, `inspect`, `move-host`, `migrate`, `review`.

The ledger ConfigMap (and the migration record beside it) holds one JSON object under one key (labels.LEDGER_KEY,
labels.MIGRATION_KEY). What a reader cannot use is a reason, never a crash or an empty map: the text is parsed
bounded in depth (vocab.parsing), must be an object, and a ledger must carry a `cohorts` object whose entries are
objects with a string map as `nodeSelector`. Where the ConfigMap is and what to do about a bad one is the caller's
(the pack reports a field it cannot read; the program raises with the fix).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .grammar import is_dns_label, is_label_key, is_label_value
from .parsing import load_json

COHORT_NAME_MAX = 40
"""The stack config's limit on a cohort name (components.config), so every ledger it writes reads back."""


def read_record(text: object) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object a record key holds: (object, None), or (None, why it cannot be read)."""
    if not isinstance(text, str):
        return None, "is not a string"
    document, error = load_json(text)
    if error is not None:
        return None, error
    if not isinstance(document, dict):
        return None, "is not a JSON object"
    return document, None


def ledger_problems(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(where, why) for each part of a ledger object a reader cannot use; `where` is '' for the whole record."""
    cohorts = document.get("cohorts")
    if not isinstance(cohorts, dict):
        return [("", "has no 'cohorts' object")]
    problems: list[tuple[str, str]] = []
    for name, entry in cohorts.items():
        if not is_dns_label(name, max_length=COHORT_NAME_MAX):
            # Cohort names reach label values, release names and commands the readers print: never a free string.
            problems.append((f" cohort {name[:80]!r}", "is not a cohort name (a DNS-1123 label of at most 40)"))
            continue
        if not isinstance(entry, dict):
            problems.append((f" cohort '{name}'", "is not an object"))
            continue
        selector = entry.get("nodeSelector")
        if selector is not None and not (
            isinstance(selector, dict)
            and all(is_label_key(key) and is_label_value(value) for key, value in selector.items())
        ):
            problems.append((f" cohort '{name}' nodeSelector", "is not a map of label keys to label values"))
        namespace = entry.get("namespace")
        if namespace is not None and not is_dns_label(namespace):
            problems.append((f" cohort '{name}' namespace", "is not a namespace name (a DNS-1123 label)"))
        if entry.get("beside") is not None and beside_of(entry) is None:
            problems.append((f" cohort '{name}' beside", "is not an object with an owner and a nodeSelector"))
    return problems


BESIDE_KEY = "beside"
"""A cohort entry's key for the owner installed beside its owner while `migrate` moves it one node at a time."""


def beside_of(entry: Mapping[str, Any]) -> tuple[str, dict[str, str]] | None:
    """(owner, nodeSelector) of the owner a cohort entry records beside its own, None when none (or unusable).

    While `migrate` moves a cohort to DRA one node at a time (KEP-5004), the ledger records the new owner beside
    the old, on the hosts' new selector: a key whose value differs from the old selector's, so no node has both.
    """
    beside = entry.get(BESIDE_KEY)
    if not isinstance(beside, dict):
        return None
    owner, selector = beside.get("owner"), beside.get("nodeSelector")
    if not isinstance(owner, str) or not isinstance(selector, dict):
        return None
    if not all(is_label_key(k) and is_label_value(v) for k, v in selector.items()):
        return None
    return owner, {str(k): str(v) for k, v in selector.items()}


def ledger_cohorts(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The usable cohort entries of a ledger object, by cohort name."""
    cohorts = document.get("cohorts")
    if not isinstance(cohorts, dict):
        return {}
    return {str(name): entry for name, entry in cohorts.items() if isinstance(entry, dict)}
