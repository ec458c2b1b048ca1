"""What `eks-hybrid-gpu inspect` says about each GPU node: the findings, and which of them are conflicts (exit 1).

The evidence is `cluster.judge.publishers`'; consumers, the Operator's boundary and kubelet floors add their own
findings of the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cluster.judge.publishers import NodePublishers, foreign
from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL

FindingKind = Literal[
    "two-publishers",
    "disagrees-with-ledger",
    "nothing-publishes",
    "auto-mode-touched",
    "two-cohorts",
    "held-through-other-mechanism",
    "in-transit",
    "kubelet-version",
    "container-runtime",
]
BoundaryFindingKind = Literal["operand-outside-cohort", "operands-would-start"]
"""The GPU Operator's boundary (`cluster.judge.operator_boundary`)."""


@dataclass(frozen=True)
class Finding:
    """One thing `inspect` reports about a node; conflicts make it exit 1."""

    node: str
    kind: FindingKind | BoundaryFindingKind
    conflict: bool
    message: str

    def as_json(self) -> dict[str, Any]:
        """The `inspect --json` form."""
        return {"node": self.node, "kind": self.kind, "conflict": self.conflict, "message": self.message}


def findings(node: NodePublishers, cohort: str | None, cohorts: Mapping[str, str]) -> list[Finding]:
    """What `inspect` says about one node, given the ledger cohort that selects it (None: no single one)."""
    found: list[Finding] = []
    sources = node.sources()
    if len(sources) > 1:
        found.append(
            Finding(
                node.name,
                "two-publishers",
                True,
                f"{len(sources)} publishers on one node over-admit its GPUs: {'; '.join(sources)}",
            )
        )
    stamped = [p for p in node.publishers if p.stamp is not None]
    if node.auto_mode and (cohort is not None or stamped):
        touched = f"cohort {cohort} selects it" if cohort is not None else stamped[0].describe()
        found.append(
            Finding(
                node.name,
                "auto-mode-touched",
                True,
                f"an EKS Auto Mode node touched by our allocator ({touched}); AWS manages its GPUs: "
                f"exclude it with {COMPUTE_TYPE_LABEL}: hybrid in the cohort selector",
            )
        )
    if cohort is None:
        return found
    owner = cohorts[cohort]
    others = foreign(node, cohort, owner, cohorts, same_cohort=True)
    if others:
        found.append(
            Finding(
                node.name,
                "disagrees-with-ledger",
                True,
                f"the ledger gives it to cohort {cohort} ({owner}), but it is also published by "
                + "; ".join(p.describe() for p in others)
                + ": "
                + "; ".join(dict.fromkeys(p.fix() for p in others)),
            )
        )
    if not node.publishers:
        found.append(
            Finding(
                node.name,
                "nothing-publishes",
                False,
                f"cohort {cohort} ({owner}) selects it but nothing publishes its GPUs: the allocator is not running "
                "there (check its DaemonSet's pods and the node's GPU discovery labels)",
            )
        )
    return found
