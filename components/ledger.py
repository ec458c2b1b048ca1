"""The ownership ledger: the cohort -> owner map as data, in the cluster and as a stack output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components.config import NamespacesConfig, StackConfig
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, LEDGER_KEY, LEDGER_LABEL, LEDGER_NAME, Owner
from policy.gpu_allocation.vocab.ledger import ledger_problems, read_record

LEDGER_HOME: Final[Owner] = DEVICE_PLUGIN
"""The owner kind whose namespace holds the ledger and the migration record beside it (`namespaces.devicePlugin`)."""


class LedgerError(Exception):
    """A ledger (or migration record) ConfigMap whose content cannot be read: nothing can be judged against it."""


IN_CLUSTER_FIX: Final = "it is written by `pulumi up`: run it again, or restore the ConfigMap"
"""The fix for an unreadable record read from a cluster."""


def parse_record(
    configmap: Mapping[str, Any] | None, key: str = LEDGER_KEY, *, fix: str = IN_CLUSTER_FIX
) -> dict[str, Any] | None:
    """The JSON object under `key` of a ConfigMap; None when the ConfigMap or key is absent.

    The program's side of the one ledger reader (`vocab.ledger`, which the pack reads the rendered ledger with),
    for the preflight, `inspect`, `move-host`, `migrate` and `review` (which reads the rendered ConfigMap, and
    passes its own `fix`); it reads the migration record beside the ledger too. Content that is not a JSON object
    (bounded in depth), or a ledger whose cohorts cannot be used, is a LedgerError: a check that cannot read the
    previous owners says so rather than judging against nothing.
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


def ledger_namespace(namespaces: NamespacesConfig) -> str:
    """Where a stack's ledger lives: the namespace of LEDGER_HOME, as the stack config names it."""
    return namespaces.of(LEDGER_HOME)


def ownership_map(config: StackConfig) -> dict[str, Any]:
    """Cohort -> owner, selector, sharing, namespace and driver verification; plus the Operator mode, if any."""
    cohorts = {
        cohort.name: {
            "owner": cohort.owner,
            "nodeSelector": cohort.selector(config.cohort_label_key),
            "sharing": cohort.sharing_label,
            "namespace": config.namespaces.of(cohort.owner),
            "hostDriverVerified": cohort.host_driver_verified,
        }
        for cohort in config.cohorts
    }
    return {"cohorts": cohorts, "operatorMode": config.operator_mode}


class OwnershipLedger(pulumi.ComponentResource):
    """A ConfigMap holding the ownership map, so people and the day-2 commands can read it in-cluster."""

    ownership: pulumi.Output[dict[str, Any]]
    """The ownership map."""

    def __init__(
        self,
        name: str,
        *,
        ownership: dict[str, Any],
        namespace: pulumi.Input[str],
        secret: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("eks-hybrid-gpu:cluster:OwnershipLedger", name, None, opts)
        content = json.dumps(ownership, sort_keys=True, indent=2)
        # A secret stack input stays secret in the ledger's inputs and state (the cluster object is plain data).
        data: pulumi.Input[str] = pulumi.Output.secret(content) if secret else content
        k8s.core.v1.ConfigMap(
            f"{name}-configmap",
            metadata={"name": LEDGER_NAME, "namespace": namespace, "labels": {LEDGER_LABEL: "true"}},
            data={LEDGER_KEY: data},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.ownership = pulumi.Output.secret(ownership) if secret else pulumi.Output.from_input(ownership)
        self.register_outputs({"ownership": self.ownership})
