"""Where a pod can run, and whether two placements can share a node: one home for the rule program and pack apply.

A placement is a nodeSelector (equality, AND) plus the required node affinity (OR of terms, each an AND of
matchExpressions). Two allocators conflict when one node can satisfy both placements, so overlap is decided
by satisfiability: for every pair of terms, can one set of node labels meet every requirement at once? A
requirement that cannot be read (unknown during preview, an unknown operator) constrains nothing, so
overlap errs towards "can share a node". `matchFields` (node names) is ignored the same way. Plain data in,
no Pulumi imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .labels import COMPUTE_TYPE_LABEL

Requirement = tuple[str, str, tuple[str, ...]]
"""(label key, operator, values): one matchExpression, or one nodeSelector entry as (key, "In", (value,))."""

_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def selects(selector: Mapping[str, str], labels: Mapping[str, Any]) -> bool:
    """An equality selector (AND of `key = value`) matches these labels: the one home of that rule."""
    return all(labels.get(key) == value for key, value in selector.items())


def selects_node(selector: Mapping[str, str], node: Mapping[str, Any]) -> bool:
    """An equality selector matches a Node object's labels (a Node without labels matches only `{}`)."""
    return selects(selector, (node.get("metadata") or {}).get("labels") or {})


def selectors_overlap(first: Mapping[str, str], second: Mapping[str, str]) -> bool:
    """Two equality selectors can select one node unless some key has different values."""
    return all(first[key] == second[key] for key in first.keys() & second.keys())


@dataclass(frozen=True)
class Placement:
    """Where a pod can run: nodeSelector plus required node affinity terms (None: no required affinity)."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[tuple[Requirement, ...], ...] | None = None

    @classmethod
    def of(cls, node_selector: Mapping[str, str], terms: Any = None) -> Placement:
        """Build from a plain nodeSelector and the plain `nodeSelectorTerms` list (or None)."""
        return cls(tuple(sorted(node_selector.items())), _terms(terms))

    @property
    def node_selector(self) -> dict[str, str]:
        """The equality part, as a dict."""
        return dict(self.selector)

    def alternatives(self) -> list[tuple[Requirement, ...]]:
        """One conjunction of requirements per required affinity term (one in all without affinity)."""
        base = tuple((key, "In", (value,)) for key, value in self.selector)
        if self.terms is None:
            return [base]
        return [base + term for term in self.terms]


def _terms(raw: Any) -> tuple[tuple[Requirement, ...], ...] | None:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        return None
    terms: list[tuple[Requirement, ...]] = []
    for term in raw:
        expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
        requirements: list[Requirement] = []
        if isinstance(expressions, Sequence) and not isinstance(expressions, str):
            for expression in expressions:
                requirement = _requirement(expression)
                if requirement is not None:
                    requirements.append(requirement)
        terms.append(tuple(requirements))
    return tuple(terms)


def _requirement(expression: Any) -> Requirement | None:
    if not isinstance(expression, Mapping):
        return None
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values")
    if not isinstance(key, str) or not isinstance(operator, str) or operator not in _OPERATORS:
        return None
    if not isinstance(values, Sequence) or isinstance(values, str):
        values = []
    return key, operator, tuple(v for v in values if isinstance(v, str))


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _key_satisfiable(requirements: list[Requirement]) -> bool:
    """Tell whether one value (or the absence) of a single label key meets every requirement on it."""
    allowed: set[str] | None = None
    excluded: set[str] = set()
    present = absent = False
    low, high = None, None
    for _, operator, values in requirements:
        if operator == "In":
            present = True
            allowed = set(values) if allowed is None else allowed & set(values)
        elif operator == "NotIn":
            excluded |= set(values)
        elif operator == "Exists":
            present = True
        elif operator == "DoesNotExist":
            absent = True
        else:
            bound = _number(values[0]) if len(values) == 1 else None
            if bound is None:
                continue
            present = True
            if operator == "Gt":
                low = bound if low is None else max(low, bound)
            else:
                high = bound if high is None else min(high, bound)
    if present and absent:
        return False
    if absent:
        return True

    def in_range(value: str) -> bool:
        number = _number(value)
        if low is None and high is None:
            return True
        return number is not None and (low is None or number > low) and (high is None or number < high)

    if allowed is not None:
        return any(value not in excluded and in_range(value) for value in allowed)
    if low is not None and high is not None:
        return high - low > 1
    return True


def conjunction_satisfiable(requirements: Sequence[Requirement]) -> bool:
    """Tell whether one node can meet every requirement of an AND."""
    by_key: dict[str, list[Requirement]] = {}
    for requirement in requirements:
        by_key.setdefault(requirement[0], []).append(requirement)
    return all(_key_satisfiable(group) for group in by_key.values())


def placements_overlap(first: Placement, second: Placement) -> bool:
    """Tell whether one node can satisfy both placements (nodeSelector and required node affinity of each)."""
    return any(conjunction_satisfiable(a + b) for a in first.alternatives() for b in second.alternatives())


def label_values(placement: Placement, key: str) -> frozenset[str | None] | None:
    """The values of one label key a node meeting the placement can carry (None in the set: the label is absent).

    None when some satisfiable term leaves the key open (no ``In`` or ``DoesNotExist`` on it): any value.
    """
    found: set[str | None] = set()
    for requirements in placement.alternatives():
        if not conjunction_satisfiable(requirements):
            continue
        allowed: set[str] | None = None
        excluded: set[str] = set()
        absent = False
        for _, operator, values in (r for r in requirements if r[0] == key):
            if operator == "In":
                allowed = set(values) if allowed is None else allowed & set(values)
            elif operator == "NotIn":
                excluded |= set(values)
            elif operator == "DoesNotExist":
                absent = True
        if allowed is not None:
            found |= allowed - excluded
        elif absent:
            found.add(None)
        else:
            return None
    return frozenset(found)


def alternative_admits(requirements: Sequence[Requirement], key: str, values: Sequence[str]) -> bool:
    """Tell whether a node meeting this AND can carry ``key`` with one of ``values`` (the scheduler's reading)."""
    return conjunction_satisfiable((*requirements, (key, "In", tuple(values))))


def confined_to(placement: Placement, selector: Mapping[str, str]) -> bool:
    """Tell whether every node the placement admits carries the whole equality selector (an empty one confines nothing).

    The scheduler's NodeAffinity filter admits a node that meets the nodeSelector and one required term; the
    placement is confined when no satisfiable term leaves room for a node missing one of the selector's labels.
    """
    if not selector:
        return False
    alternatives = [a for a in placement.alternatives() if conjunction_satisfiable(a)]
    if not alternatives:
        return False
    return all(
        not conjunction_satisfiable((*alternative, (key, "NotIn", (value,))))
        for alternative in alternatives
        for key, value in selector.items()
    )


INSIDE: Final = "inside"
"""Every node the placement admits is in the cohort."""
OUTSIDE: Final = "outside"
"""No node the placement admits is in the cohort."""
PARTLY: Final = "partly"
"""Nodes in the cohort and nodes named outside it (a value of the cohort key that the placement admits by ``In``)."""
CANNOT_TELL: Final = "cannot-tell"
"""The placement reaches the cohort, and leaves it only through labels no stack value names: which cohort a pod
lands in depends on node labels the pack cannot see."""

UNJUDGED_OPERATORS: Final = frozenset({"NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
"""Operators that admit label values nobody wrote down: on a cohort key they say nothing of which cohort."""


def cohort_selector(selector: Mapping[str, str], others: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The part of a cohort's equality selector that tells it apart from the other cohorts of the stack.

    A key another cohort gives another value separates them (the cohort label, ``workload.example.com/gpu-allocation``
    by default); without one, every key but ``eks.amazonaws.com/compute-type``, which EKS puts on every hybrid node
    (``hybrid``) and so names no cohort. A pod pinned by ``gpu-allocation In [device-plugin]`` alone lands in that
    cohort whether or not it repeats ``compute-type: hybrid``.
    """
    separating = {k: v for k, v in selector.items() if any(k in o and o[k] != v for o in others)}
    if separating:
        return separating
    rest = {k: v for k, v in selector.items() if k != COMPUTE_TYPE_LABEL}
    return rest or dict(selector)


def cohort_membership(placement: Placement, cohort: Mapping[str, str]) -> tuple[str, Requirement | None]:
    """Where a placement stands to a cohort (:func:`cohort_selector`), as the scheduler's NodeAffinity filter reads it.

    :data:`INSIDE` (:func:`confined_to`), :data:`OUTSIDE` (no admitted node carries the cohort's labels), else
    :data:`CANNOT_TELL` with the requirement that leaves it open when a term reaching the cohort constrains one of its
    keys with ``NotIn``/``Exists``/``DoesNotExist``/``Gt``/``Lt`` (``gpu-allocation NotIn [dra]`` admits the plugin's
    cohort and any node labelled otherwise, which may not exist), else :data:`PARTLY` (it also reaches a value named
    by ``In``). An empty cohort (every node) is :data:`PARTLY`.
    """
    if not cohort:
        return PARTLY, None
    required = tuple((key, "In", (value,)) for key, value in cohort.items())
    reaching = [a for a in placement.alternatives() if conjunction_satisfiable(a + required)]
    if not reaching:
        return OUTSIDE, None
    if confined_to(placement, cohort):
        return INSIDE, None
    for alternative in reaching:
        for requirement in alternative:
            if requirement[0] in cohort and requirement[1] in UNJUDGED_OPERATORS:
                return CANNOT_TELL, requirement
    return PARTLY, None


def show_requirement(requirement: Requirement) -> str:
    """``key Operator [values]`` as a matchExpression reads, for messages."""
    key, operator, values = requirement
    shown = f" [{', '.join(values)}]" if values else ""
    return f"{key} {operator}{shown}"


def reaches_outside(placement: Placement, selector: Mapping[str, str], other: Placement | None) -> bool:
    """Tell whether one node outside the cohort (``selector``) can meet both ``placement`` and ``other``.

    ``other`` None: a placement that admits every node (the GPU Operator's operands). Outside the cohort is a node
    that lacks one of the selector's labels or carries another value under its key (``NotIn``).
    """
    others = [()] if other is None else other.alternatives()
    return any(
        conjunction_satisfiable((*a, *b, (key, "NotIn", (value,))))
        for a in placement.alternatives()
        for b in others
        for key, value in selector.items()
    )
