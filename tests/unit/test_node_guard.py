"""The guard's CEL, evaluated on old and new Nodes: which allocator-label changes a schedulable node may take.

The rule under test (components/node_guard.py): on a schedulable node the allocator label may stay as it is, or
go from absent (or empty) to `device-plugin` (migrate's `label` phase); every other change — removal included —
needs a cordon. The real API server's verdict is tests/integration/test_in_transit.py's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.node_guard import (
    FIRST_ALLOCATORS,
    allocator_expression,
    allocator_refusal_message,
    cel_string,
    guard_expression,
)
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, DEFAULT_COHORT_LABEL_KEY, DEVICE_PLUGIN, DRA
from tests.support.node_cel import evaluate

pytestmark = pytest.mark.unit

COHORT = DEFAULT_COHORT_LABEL_KEY
ABSENT = None
"""The label not there at all (as opposed to `""`, an empty value)."""


def node(labels: dict[str, str] | None, *, cordoned: bool = False, no_labels: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "gpu-1"}
    if not no_labels:
        metadata["labels"] = {COHORT: "device-plugin", **(labels or {})}
    return {"metadata": metadata, "spec": {"unschedulable": True} if cordoned else {}}


def allocator(value: str | None) -> dict[str, str]:
    return {} if value is None else {ALLOCATOR_LABEL: value}


def admitted(old: str | None, new: str | None, *, cordoned: bool = False) -> bool:
    """Both validations of the policy, as the API server runs them: the update passes only if both hold."""
    before, after = node(allocator(old)), node(allocator(new), cordoned=cordoned)
    return evaluate(guard_expression(COHORT), before, after) and evaluate(allocator_expression(), before, after)


@pytest.mark.parametrize(
    ("old", "new", "schedulable_verdict", "why"),
    [
        (ABSENT, DEVICE_PLUGIN, True, "migrate's label phase: the device plugin still selects by the cohort label"),
        ("", DEVICE_PLUGIN, True, "an empty value is no allocator, as absent"),
        (DEVICE_PLUGIN, DEVICE_PLUGIN, True, "unchanged: a repeated label phase, a heartbeat"),
        (DRA, DRA, True, "unchanged"),
        (ABSENT, ABSENT, True, "unchanged"),
        (ABSENT, "", True, "absent and empty are one value"),
        (DEVICE_PLUGIN, DRA, False, "DRA would start beside pods holding GPUs through the device plugin"),
        (DRA, DEVICE_PLUGIN, False, "the device plugin would start beside pods holding GPUs through DRA"),
        (DEVICE_PLUGIN, ABSENT, False, "removal: the first half of a two-step move"),
        (DRA, ABSENT, False, "removal: the first half of a two-step move"),
        (DEVICE_PLUGIN, "", False, "emptied: a removal by another name"),
        (ABSENT, DRA, False, "DRA would start where the device plugin may serve by the cohort label"),
        ("", DRA, False, "as absent"),
        (ABSENT, "gpu-operator", False, "no move starts there"),
        (DRA, "gpu-operator", False, "any other change"),
    ],
)
def test_each_transition_on_a_schedulable_node_and_every_one_on_a_cordoned_node(
    old: str | None, new: str | None, schedulable_verdict: bool, why: str
) -> None:
    assert admitted(old, new) is schedulable_verdict, why
    assert admitted(old, new, cordoned=True) is True  # move-host's and migrate's own steps, under their cordon


def test_a_node_without_labels_at_all_is_judged_as_absent() -> None:
    bare = node(None, no_labels=True)
    expression = allocator_expression()
    assert evaluate(expression, bare, bare) is True
    assert evaluate(expression, bare, node(allocator(DEVICE_PLUGIN))) is True
    assert evaluate(expression, bare, node(allocator(DRA))) is False
    assert evaluate(expression, node(allocator(DRA)), bare) is False  # all labels dropped: a removal


def test_the_cohort_label_and_the_allocator_label_are_guarded_apart() -> None:
    before = node(allocator(DEVICE_PLUGIN))
    labels = {COHORT: "dra", ALLOCATOR_LABEL: DEVICE_PLUGIN}
    other_cohort = {"metadata": {"name": "gpu-1", "labels": labels}, "spec": {}}
    assert evaluate(allocator_expression(), before, other_cohort) is True
    assert evaluate(guard_expression(COHORT), before, other_cohort) is False
    moved = node(allocator(DRA))
    assert evaluate(guard_expression(COHORT), before, moved) is True
    assert evaluate(allocator_expression(), before, moved) is False


# Label values as the API server admits them, and hostile strings it never would, CEL syntax among them.
VALUES = st.one_of(
    st.none(),
    st.sampled_from(["", DEVICE_PLUGIN, DRA, "gpu-operator", "Device-Plugin", "device-plugin ", "dra\x00"]),
    st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?", fullmatch=True),
    st.sampled_from(['" || true || "', "' || true || '", "\\", '\\"', "\\u0022", "dra\n", "é", "\u202e"]),
    st.text(max_size=20),
)


def expected(old: str | None, new: str | None, cordoned: bool) -> bool:
    """The rule in words: cordoned, or unchanged (absent = empty), or absent -> a first allocator."""
    was, now = old or "", new or ""
    return cordoned or was == now or (was == "" and now in FIRST_ALLOCATORS)


@given(old=VALUES, new=VALUES, cordoned=st.booleans())
def test_every_pair_of_values_follows_the_rule(old: str | None, new: str | None, cordoned: bool) -> None:
    before, after = node(allocator(old)), node(allocator(new), cordoned=cordoned)
    assert evaluate(allocator_expression(), before, after) is expected(old, new, cordoned)


@given(middle=VALUES, start=st.sampled_from([DEVICE_PLUGIN, DRA]))
def test_no_two_schedulable_updates_move_a_node_between_allocators(middle: str | None, start: str) -> None:
    """Remove (or set anything), then set the other value: one of the two updates is refused."""
    end = DRA if start == DEVICE_PLUGIN else DEVICE_PLUGIN
    first = evaluate(allocator_expression(), node(allocator(start)), node(allocator(middle)))
    second = evaluate(allocator_expression(), node(allocator(middle)), node(allocator(end)))
    assert not (first and second)


@given(key=st.text(min_size=1, max_size=40), value=VALUES)
def test_a_hostile_key_reaches_cel_only_as_a_quoted_literal(key: str, value: str | None) -> None:
    """Whatever the key, the expression parses in the guard's subset and judges that key's label alone."""
    expression = allocator_expression(key, FIRST_ALLOCATORS)
    before = {"metadata": {"labels": {key: DEVICE_PLUGIN}}, "spec": {}}
    after = {"metadata": {"labels": {} if value is None else {key: value}}, "spec": {}}
    assert evaluate(expression, before, after) is expected(DEVICE_PLUGIN, value, False)
    assert cel_string(key) in expression


def test_the_key_and_values_come_from_their_one_definition() -> None:
    expression = allocator_expression()
    assert expression.count(cel_string(ALLOCATOR_LABEL)) == 8
    assert cel_string(DEVICE_PLUGIN) in expression
    assert FIRST_ALLOCATORS == (DEVICE_PLUGIN,)  # a move one node at a time starts from the device plugin
    assert evaluate(allocator_expression(ALLOCATOR_LABEL, ()), node({}), node(allocator(DEVICE_PLUGIN))) is False


def test_the_refusal_names_the_label_the_risk_and_the_commands() -> None:
    message = allocator_refusal_message()
    assert f"the {ALLOCATOR_LABEL} label of a schedulable node cannot change which allocator serves it" in message
    assert "booking them twice" in message
    assert "eks-hybrid-gpu migrate --stack STACK --cohort COHORT --to dra" in message
    assert "eks-hybrid-gpu move-host NODE --to COHORT" in message
