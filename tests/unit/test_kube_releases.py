"""The version table: KEP-5004's gate per minor, the older of control plane and kubelet, refused overrides."""

from __future__ import annotations

import pytest

from policy.gpu_allocation.vocab.kube_releases import (
    DRA_EXTENDED_RESOURCE,
    DRA_GATES,
    EKS_MINORS,
    effective,
    refused_overrides,
    release,
    stage_at,
)


@pytest.mark.parametrize(
    ("minor", "on", "stage"),
    [((1, 34), False, "alpha"), ((1, 35), False, "alpha"), ((1, 36), True, "beta"), ((1, 37), True, "GA")],
)
def test_extended_resource_mapping_follows_kep_5004_graduation(minor: tuple[int, int], on: bool, stage: str) -> None:
    assert release(minor).keeps_extended_resource_name is on
    found = stage_at(DRA_EXTENDED_RESOURCE, minor)
    assert found is not None
    assert found.stage == stage


def test_a_stack_can_turn_the_alpha_gate_on_but_not_a_locked_one_off() -> None:
    assert release((1, 34), {DRA_EXTENDED_RESOURCE: True}).keeps_extended_resource_name is True
    assert release((1, 37), {DRA_EXTENDED_RESOURCE: False}).keeps_extended_resource_name is True
    assert refused_overrides((1, 37), {DRA_EXTENDED_RESOURCE: False}) == [
        (DRA_EXTENDED_RESOURCE, "is GA and locked to true in 1.37")
    ]
    assert refused_overrides((1, 36), {DRA_EXTENDED_RESOURCE: False}) == []
    assert refused_overrides((1, 34), {"DRADerivedAttributes": True})[0][1].startswith("is not a DRA gate")


def test_old_kubelets_decide_the_cohort() -> None:
    """A 1.37 control plane with 1.34 hybrid kubelets has no KEP-5004 on those nodes."""
    assert effective((1, 37), [(1, 34), (1, 37)]).keeps_extended_resource_name is False
    assert effective((1, 37), [(1, 36)]).name == "1.36"
    assert effective((1, 37), []).keeps_extended_resource_name is True


def test_a_newer_minor_than_the_table_reads_as_the_newest_known() -> None:
    assert release((1, 40)).minor == EKS_MINORS[-1]


def test_every_gate_has_increasing_stages() -> None:
    for gate, stages in DRA_GATES.items():
        versions = [s.since for s in stages]
        assert versions == sorted(set(versions)), gate
