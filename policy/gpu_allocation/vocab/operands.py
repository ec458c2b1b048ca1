"""Where the GPU Operator's operands run, read as its controller decides it, against another allocator's placement.

The Operator pins no operand to a cohort: its DaemonSets select ``nvidia.com/gpu.deploy.<operand>=true`` and take no
nodeSelector or affinity from ``daemonsets`` (gpu-operator #2626, #547; the v26.7.0 CRDs' ``spec.daemonsets`` holds
labels, annotations, tolerations, priorityClassName, podSecurityContext and the update strategy only, so a
``daemonsets.nodeSelector`` in the values is pruned by the API server). Its state manager puts those labels on every
GPU node and removes them from a node labelled ``nvidia.com/gpu.deploy.operands=false``
(``controllers/state_manager.go``, ``hasOperandsDisabled``: the value ``"false"`` and nothing else). A per-operand
``nvidia.com/gpu.deploy.<operand>=false`` is not an exclusion the pack counts: the Operator rewrites those labels
(gpu-operator #2288, "known limitation"). Plain data in, no Pulumi imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .labels import OPERANDS_OPT_OUT_LABEL
from .selectors import Placement, confined_to, conjunction_satisfiable, placements_overlap

EXCLUDED: Final = "excluded"
"""Every node of the placement carries ``nvidia.com/gpu.deploy.operands=false``: no operand runs there."""
REACHED: Final = "reached"
"""The stack shows the Operator runs there: the placement asks for the opt-out label with another value (``true``),
or meets the Operator's own cohort."""
UNSHOWN: Final = "unshown"
"""The Operator runs there unless the hosts carry ``nvidia.com/gpu.deploy.operands=false``, which the stack does not
show (node labels are not in it)."""

OPTED_OUT: Final = {OPERANDS_OPT_OUT_LABEL: "false"}
"""The one node label that keeps every operand off a node."""


def operator_reach(placement: Placement | None, operator_cohorts: Sequence[Placement] = ()) -> str:
    """:data:`EXCLUDED`, :data:`REACHED` or :data:`UNSHOWN` for an allocator placed at ``placement``.

    None (a placement the pack cannot read) is :data:`UNSHOWN`: the Operator's reach is the fail-closed answer.
    """
    if placement is None:
        return UNSHOWN
    if confined_to(placement, OPTED_OUT):
        return EXCLUDED
    opted_in = any(
        conjunction_satisfiable(alternative) and any(_opts_in(requirement) for requirement in alternative)
        for alternative in placement.alternatives()
    )
    if opted_in or any(placements_overlap(placement, cohort) for cohort in operator_cohorts):
        return REACHED
    return UNSHOWN


def _opts_in(requirement: tuple[str, str, tuple[str, ...]]) -> bool:
    """``nvidia.com/gpu.deploy.operands In [...]`` without ``false``: only nodes the Operator manages."""
    key, operator, values = requirement
    return key == OPERANDS_OPT_OUT_LABEL and operator == "In" and "false" not in values
