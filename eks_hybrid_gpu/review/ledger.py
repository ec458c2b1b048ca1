"""The review's cohort -> owner map: the rendered ledger ConfigMap, where the stack puts it, read by the one reader.

The ledger lives in the stack's `namespaces.devicePlugin` (`cluster.records.ledger.ledger_namespace`; the
registry's default when the stack names none) and is parsed by `cluster.records.ledger.parse_record`, as the
preflight and `inspect` parse the cluster's. A render whose ledger is missing there or cannot be read is reported
as such, never shown as an empty map.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from cluster.records.ledger import LedgerError, ledger_namespace, parse_record
from components.config import NamespacesConfig
from eks_hybrid_gpu.review.normalize import REDACTED
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME, PROJECT
from policy.gpu_allocation.vocab.parsing import load_yaml

NO_MAP = "the cohort → owner map cannot be shown"
RENDERED_FIX = (
    "the checkout's program rendered it so: its ledger (components/ownership_ledger.py) must write a JSON object"
)


def ledger_path(namespace: str) -> str:
    """The review-tree path of the ledger ConfigMap in `namespace`."""
    return f"ConfigMap/{namespace}/{LEDGER_NAME}.yaml"


def _ledger_document(tree: Mapping[str, str], namespace: str) -> Mapping[str, Any] | None:
    """The rendered ledger ConfigMap in `namespace`, or None when the render has none there."""
    text = tree.get(ledger_path(namespace))
    if text is None:
        return None
    document, error = load_yaml(text)
    if error is not None or not isinstance(document, Mapping):
        msg = f"ConfigMap {namespace}/{LEDGER_NAME} {error or 'is not a mapping'}"
        raise LedgerError(msg)
    return document


def ownership_from_tree(tree: Mapping[str, str], namespace: str) -> dict[str, Any] | None:
    """The ownership map of the ledger ConfigMap in `namespace`, or None when the render has none there.

    Parsed by the one ledger reader (`cluster.records.ledger.parse_record`); content it cannot read is a
    LedgerError.
    """
    return parse_record(_ledger_document(tree, namespace), fix=RENDERED_FIX)


def stack_ledger_namespace(stack_document: Mapping[str, Any]) -> str:
    """Where a stack's ledger lives: its `namespaces.devicePlugin` (the registry's default when unset).

    ValueError when the stack file's `namespaces` cannot be read (malformed, or set as a secret).
    """
    config = stack_document.get("config") or {}
    raw = config.get(f"{PROJECT}:namespaces") if isinstance(config, Mapping) else None
    try:
        namespaces = NamespacesConfig.model_validate(raw or {})
    except ValidationError:
        msg = f"the stack file's {PROJECT}:namespaces cannot be read (malformed, or set as a secret)"
        raise ValueError(msg) from None
    return ledger_namespace(namespaces)


def read_ledger(tree: Mapping[str, str], stack_document: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(ownership map, None), or (None, why it cannot be shown): the review never shows an empty map instead.

    The ledger is found where the stack puts it (`namespaces.devicePlugin`); a render without one, or with one
    that cannot be read (a stack with secret config makes it a Pulumi secret, which the review redacts), is
    reported, not taken for a stack without cohorts.
    """
    try:
        namespace = stack_ledger_namespace(stack_document)
    except ValueError as error:
        return None, f"{error}, so its ledger cannot be found: {NO_MAP}"
    ref = f"ConfigMap {namespace}/{LEDGER_NAME}"
    try:
        document = _ledger_document(tree, namespace)
        if document is None:
            where = f"the stack's namespaces.devicePlugin is {namespace}"
            return None, f"the render has no ledger {ref} ({where}): {NO_MAP}"
        data = document.get("data")
        if isinstance(data, Mapping) and data.get(LEDGER_KEY) == REDACTED:
            return None, (
                f"the ledger {ref} holds a Pulumi secret (the stack sets secret config), so the review redacted it: "
                f"{NO_MAP}"
            )
        ownership = parse_record(document, fix=RENDERED_FIX)
    except LedgerError as error:
        return None, f"the rendered ledger cannot be read ({error}): {NO_MAP}"
    if ownership is None:
        return None, f"the rendered ledger {ref} has no {LEDGER_KEY}: {NO_MAP}"
    return ownership, None
