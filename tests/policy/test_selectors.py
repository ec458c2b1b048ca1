"""Placement overlap: can one node satisfy two nodeSelector + required-affinity placements?

Checked against brute force: every node over a small label universe (each key absent or one of a few values,
numbers included for Gt/Lt) is tried against both placements.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.gpu_allocation.vocab.selectors import Placement, placements_overlap, selectors_overlap

pytestmark = pytest.mark.policy

KEYS = ("a", "b")
VALUES = ("1", "2", "x")
UNIVERSE = ("0", *VALUES, "3", "y")
"""What the placements name, plus numbers below and above every bound and a value none of them names."""
NODES = [
    {k: v for k, v in zip(KEYS, choice, strict=True) if v is not None}
    for choice in product((None, *UNIVERSE), repeat=len(KEYS))
]


def _meets(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    value = labels.get(expression["key"])
    operator, values = expression["operator"], expression.get("values", [])
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if value is None or not value.isdigit():
        return False
    return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])


def _admits(node_selector: dict[str, str], terms: list[dict[str, Any]] | None, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    if not terms:
        return True
    return any(all(_meets(labels, e) for e in term["matchExpressions"]) for term in terms)


EXPRESSION = st.one_of(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(KEYS),
            "operator": st.sampled_from(["In", "NotIn"]),
            "values": st.lists(st.sampled_from(VALUES), min_size=1, max_size=2),
        }
    ),
    st.fixed_dictionaries({"key": st.sampled_from(KEYS), "operator": st.sampled_from(["Exists", "DoesNotExist"])}),
    st.fixed_dictionaries(
        {"key": st.sampled_from(KEYS), "operator": st.sampled_from(["Gt", "Lt"]), "values": st.just(["1"])}
    ),
)
TERMS = st.one_of(
    st.none(), st.lists(st.fixed_dictionaries({"matchExpressions": st.lists(EXPRESSION, max_size=3)}), max_size=2)
)
SELECTOR = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)


@settings(max_examples=300)
@given(SELECTOR, TERMS, SELECTOR, TERMS)
def test_overlap_is_exactly_a_node_satisfying_both(
    sel_a: dict[str, str], terms_a: Any, sel_b: dict[str, str], terms_b: Any
) -> None:
    expected = any(_admits(sel_a, terms_a, n) and _admits(sel_b, terms_b, n) for n in NODES)
    assert placements_overlap(Placement.of(sel_a, terms_a), Placement.of(sel_b, terms_b)) == expected


@given(SELECTOR, SELECTOR)
def test_equality_selectors_overlap_as_the_config_validation_says(a: dict[str, str], b: dict[str, str]) -> None:
    assert placements_overlap(Placement.of(a), Placement.of(b)) == selectors_overlap(a, b)


def test_guide_cohorts_are_disjoint_and_an_unplaced_plugin_overlaps_both() -> None:
    plugin = Placement.of({"eks.amazonaws.com/compute-type": "hybrid", "cohort": "device-plugin"})
    dra = Placement.of({"eks.amazonaws.com/compute-type": "hybrid", "cohort": "dra"})
    anywhere = Placement.of({})
    assert not placements_overlap(plugin, dra)
    assert placements_overlap(anywhere, plugin)
    assert placements_overlap(anywhere, dra)
    not_dra = Placement.of({}, [{"matchExpressions": [{"key": "cohort", "operator": "NotIn", "values": ["dra"]}]}])
    assert not placements_overlap(not_dra, dra)
    assert placements_overlap(not_dra, plugin)
