"""The GPU Operator's own GPU allocator beside a standalone allocator of the other kind, read as the Operator places it.

Under a GPUCluster the Operator runs the DRA driver's kubelet plugin on every GPU node it manages; under a ClusterPolicy
with ``devicePlugin.enabled`` its device plugin (:func:`..name_mapping.publishers`). It manages every GPU node but those
labelled ``nvidia.com/gpu.deploy.operands=false`` (:mod:`...vocab.operands`). A standalone device plugin's cohort
under a GPUCluster, or a standalone DRA driver's under a ClusterPolicy that runs its plugin, gets a second owner
wherever the Operator reaches it. The same-kind pairs are other rules' (``operator-device-plugin-disabled``,
``gpu-cluster-excludes-standalone-dra``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...vocab.labels import GPU_OPERATOR, PROJECT
from ...vocab.operands import EXCLUDED, REACHED, operator_reach
from ...vocab.selectors import Placement
from ..findings import LABELS_NOTE, PREVIEW_AGAIN
from ..name_mapping import Publisher, publishers
from ..props import string_map
from ..stack_view import StackView

KINDS = {"device-plugin": "device plugin", "dra": "DRA driver"}
"""The allocators, as messages name them."""


@dataclass(frozen=True)
class Crossing:
    """The Operator's allocator and a standalone allocator of the other kind whose nodes it may manage."""

    operator: Publisher
    standalone: Publisher
    verdict: str
    """:data:`...vocab.operands.REACHED` or :data:`...vocab.operands.UNSHOWN`."""

    @property
    def urn(self) -> str | None:
        """Where the violation is reported: the Operator's object."""
        return self.operator.urn

    def refusal(self) -> str:
        """The words for a crossing the stack shows (mandatory)."""
        return (
            f"{self._operator} runs on every GPU node the GPU Operator manages, and the standalone "
            f"{KINDS[self.standalone.owner]} {self.standalone.where} runs on nodes it manages (its node selection "
            "asks for nvidia.com/gpu.deploy.operands with a value other than false, or meets the Operator's own "
            f"cohort): the Operator's {KINDS[self.operator.owner]} and the standalone "
            f"{KINDS[self.standalone.owner]} allocate the same GPUs there (double-booked). {self._fix()}"
        )

    def review(self) -> str:
        """The words for a crossing the stack cannot show either way (advisory: node labels decide)."""
        return (
            f"Review: {self._operator} runs on every GPU node not labelled "
            f"nvidia.com/gpu.deploy.operands=false (the Operator's state manager), and the standalone "
            f"{KINDS[self.standalone.owner]} {self.standalone.where} does not require that label, so this stack "
            "cannot show that the Operator stays off its nodes: a host without the label gets both allocators on "
            f"the same GPUs. {self._fix()}"
        )

    @property
    def _operator(self) -> str:
        """The Operator's allocator as the subject of "runs" (a GPUCluster's publisher subject ends in it)."""
        return self.operator.subject.removesuffix(" runs")

    def _fix(self) -> str:
        return (
            "Label every host of that cohort nvidia.com/gpu.deploy.operands=false (`eks-hybrid-gpu inspect` reports "
            "each GPU node outside the Operator's cohort that lacks it as operands-would-start) and add "
            'nvidia.com/gpu.deploy.operands: "false" to the standalone allocator\'s nodeSelector so the pack sees '
            f"the boundary, or move the cohort to the Operator ({PROJECT}:cohorts[i].owner: {GPU_OPERATOR}); "
            f"{PREVIEW_AGAIN}. {LABELS_NOTE}"
        )


def _operator_cohorts(view: StackView) -> list[Placement]:
    """The Operator's own cohorts the ledger records: nodes it manages by this program's contract."""
    ledger = view.ledger()
    if ledger is None or not ledger.known:
        return []
    found = []
    for entry in ledger.cohorts.values():
        selector = string_map(entry.get("nodeSelector")) if isinstance(entry, dict) else None
        if isinstance(entry, dict) and entry.get("owner") == GPU_OPERATOR and selector:
            found.append(Placement.of(selector))
    return found


def crossings(view: StackView) -> list[Crossing]:
    """Each Operator allocator and standalone allocator of the other kind that it reaches or may reach."""
    found = publishers(view)
    operators = [p for p in found if p.operator]
    if not operators:
        return []
    cohorts = _operator_cohorts(view)
    result = []
    for standalone in (p for p in found if not p.operator):
        verdict = operator_reach(standalone.placement, cohorts)
        if verdict == EXCLUDED:
            continue
        result += [Crossing(o, standalone, verdict) for o in operators if o.owner != standalone.owner]
    return result


def refused(view: StackView) -> list[Crossing]:
    """The crossings the stack shows."""
    return [c for c in crossings(view) if c.verdict == REACHED]


def reviewed(view: StackView) -> list[Crossing]:
    """The crossings only the hosts' labels decide."""
    return [c for c in crossings(view) if c.verdict != REACHED]
