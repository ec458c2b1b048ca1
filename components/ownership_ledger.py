"""The ownership ledger: the cohort -> owner map as data, in the cluster and as a stack output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import StackConfig
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_LABEL, LEDGER_NAME
from policy.gpu_allocation.vocab.ledger import BESIDE_KEY


def ownership_map(config: StackConfig, beside: Mapping[str, StackConfig] | None = None) -> dict[str, Any]:
    """Cohort -> owner, selector, sharing, namespace and driver verification; plus the Operator mode, if any.

    `beside`: cohort -> the config whose entry of that cohort is installed beside it (`migrate` one node at a
    time); its owner and selector are recorded under the cohort's `beside` key.
    """
    cohorts: dict[str, dict[str, Any]] = {
        cohort.name: {
            "owner": cohort.owner,
            "nodeSelector": cohort.selector(config.cohort_label_key),
            "sharing": cohort.sharing_label,
            "namespace": config.namespaces.of(cohort.owner),
            "hostDriverVerified": cohort.host_driver_verified,
        }
        for cohort in config.cohorts
    }
    for name, other in (beside or {}).items():
        cohort = next(c for c in other.cohorts if c.name == name)
        cohorts[name][BESIDE_KEY] = {
            "owner": cohort.owner,
            "nodeSelector": cohort.selector(other.cohort_label_key),
            "namespace": other.namespaces.of(cohort.owner),
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
