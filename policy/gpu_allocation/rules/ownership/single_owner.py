"""single-allocation-owner: no cohort has two owners or two installs, and no node can satisfy two allocators.

Seed: "Choose one allocation owner per GPU" and "do not install duplicate allocation managers". Placements are
compared as the scheduler reads them (nodeSelector and required node affinity, :mod:`...vocab.selectors`).
"""

from __future__ import annotations

from itertools import combinations

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab import labels as vocab
from ...vocab.labels import PROJECT
from ...vocab.owners import GPU_OPERATOR_KIND
from ...vocab.parsing import contained
from ...vocab.selectors import Placement, placements_overlap
from ..declare import stack_policy
from ..findings import LABELS_NOTE, report_findings
from ..props import compact_json
from ..stack_view import StackView
from .cohorts import Unit, cohort_units
from .operator_reach import refused
from .scope import gpu_stack, reads_ownership


def _summarize(sources: list[str]) -> str:
    """Name the Helm installs of an owner, else its first two objects."""
    unique = sorted(set(sources))
    shown = [s for s in unique if ":helm.sh/" in s] or unique[:2]
    rest = len(unique) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest > 0 else "")


def _check_cohort_owners(units: dict[str, Unit], report: ReportViolation) -> None:
    for current in units.values():
        if len(current.installs) > 1:
            message = (
                f"{current.title} is installed by {len(current.installs)} Helm resources: "
                f"{', '.join(sorted(current.installs.values()))}. Two allocators on the same nodes "
                "advertise the same physical GPUs twice. Keep one install per cohort "
                f"({current.path('')}). {LABELS_NOTE}"
            )
            report(message, sorted(current.installs)[1])
        if len(current.owners) < 2:
            continue
        listing = "; ".join(f"{owner} ({_summarize(sources)})" for owner, sources in sorted(current.owners.items()))
        message = (
            f"{current.title} has {len(current.owners)} GPU allocation owners: "
            f"{listing}. Two owners on one node advertise the same physical GPUs "
            f"twice and over-admit workloads. Set {current.path('.owner')} to exactly "
            f"one of {', '.join(sorted(current.owners))} and give the other owner its "
            f"own cohort with a disjoint nodeSelector. {LABELS_NOTE}"
        )
        report(message, current.urn)


def _first_of_each(selectors: list[tuple[Placement, str]]) -> list[tuple[Placement, str]]:
    """The first occurrence of each distinct placement, in order (each stamped object repeats its cohort's)."""
    seen: set[Placement] = set()
    found = []
    for placement, source in selectors:
        if placement not in seen:
            seen.add(placement)
            found.append((placement, source))
    return found


def _show_placement(placement: Placement) -> str:
    shown = f"nodeSelector {compact_json(placement.node_selector)}"
    if placement.terms:
        terms = [[{"key": k, "operator": o, "values": list(v)} for k, o, v in term] for term in placement.terms]
        shown += f" + required nodeAffinity {compact_json(terms)}"
    return shown


def _check_disjoint(units: dict[str, Unit], report: ReportViolation) -> None:
    ordered = sorted(units.values(), key=lambda u: u.key)
    # The first overlapping pair is always made of first occurrences, so comparing only those finds the
    # same pair (and reports the same sources) with far fewer comparisons: this check is quadratic in the
    # cohorts, and each cohort repeats its selector on every object it stamps.
    distinct = {id(u): _first_of_each(u.selectors) for u in ordered}
    for first, second in combinations(ordered, 2):
        overlap = next(
            ((a, b) for a in distinct[id(first)] for b in distinct[id(second)] if placements_overlap(a[0], b[0])),
            None,
        )
        if overlap is None:
            continue
        (selector_a, source_a), (selector_b, source_b) = overlap
        owners_a = ", ".join(sorted(first.owners)) or "unknown owner"
        owners_b = ", ".join(sorted(second.owners)) or "unknown owner"
        message = (
            f"{first.title} ({owners_a}, {_show_placement(selector_a)} "
            f"from {source_a}) and {second.title} ({owners_b}, "
            f"{_show_placement(selector_b)} from {source_b}) can select the same nodes: "
            "one node can satisfy both placements (no label key has values that exclude each other), so a node "
            "matching both gets two allocation owners. Give the cohorts a key with different "
            f"values (e.g. {vocab.DEFAULT_COHORT_LABEL_KEY}=device-plugin vs =dra) in "
            f"{first.path('.nodeSelector')} and {second.path('.nodeSelector')}. "
            f"{LABELS_NOTE}"
        )
        report(message, first.urn or second.urn)


def _check_operator_reach(view: StackView, report: ReportViolation) -> None:
    """The Operator's allocator on a standalone cohort of the other kind, where the stack shows it reaches."""
    for crossing in refused(view):
        report(crossing.refusal(), crossing.urn)


def single_allocation_owner_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two owners for one cohort and placements of two allocators that one node can satisfy."""
    view = gpu_stack(args, report_violation)
    if view is None:
        return
    ledger = view.ledger()
    units = cohort_units(view, ledger)
    # Independent checks: one that cannot walk a value (too deep to read) must not take the other with it, and
    # says so (fail closed).
    for name, check in (
        ("one owner per cohort", lambda: _check_cohort_owners(units, report_violation)),
        ("disjoint placements", lambda: _check_disjoint(units, report_violation)),
        ("the GPU Operator's reach", lambda: _check_operator_reach(view, report_violation)),
    ):
        if not contained(check):
            report_violation(_unfinished(name), None)
    report_findings(view.problems(reads_ownership), report_violation)


def _unfinished(check: str) -> str:
    return (
        f"The check '{check}' could not finish: a value in this stack nests too deep to walk, so this policy "
        "cannot judge the stack and refuses it (fail closed). Find the deeply nested value (the other violations "
        "name unreadable fields) and flatten or remove it."
    )


SINGLE_ALLOCATION_OWNER = stack_policy(
    "single-allocation-owner",
    (
        "Every GPU node has at most one allocation owner: no cohort has two owners or two installs, and no node "
        "can satisfy the placements (nodeSelector and required node affinity) of two allocators, the GPU Operator's "
        "(every GPU node not labelled nvidia.com/gpu.deploy.operands=false) included."
    ),
    single_allocation_owner_validator,
    severity=Severity.CRITICAL,
    remediation=(
        f"Give each cohort one owner in {PROJECT}:cohorts[i].owner and a nodeSelector "
        f"({PROJECT}:cohorts[i].nodeSelector) with a label key whose value differs "
        "from every other cohort; for an allocator this program did not install, change its own nodeSelector or "
        "required node affinity so that no node satisfies two allocators. Labels are scheduling inputs, not a "
        "security boundary."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=["ownership", "gpu"],
)
