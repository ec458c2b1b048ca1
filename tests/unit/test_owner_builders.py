"""The stack dispatches owners through one table: every registered owner kind has a builder, an unknown one none."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from components.config import StackConfig
from components.owner_builders import OWNER_BUILDERS, CohortOwner, UnknownOwnerError, builder_of
from components.stack import namespace_roles
from components.stamping import Ownership
from policy.gpu_allocation.vocab.labels import OWNERS
from policy.gpu_allocation.vocab.owners import OWNER_KINDS
from tests.support.configs import DRA_COHORT, OPERATOR_COHORT, PLUGIN_COHORT, Construct, _base_config, cohort

pytestmark = pytest.mark.unit

COHORTS = {"device-plugin": PLUGIN_COHORT, "dra": DRA_COHORT, "gpu-operator": OPERATOR_COHORT}
COMPONENTS = {
    "device-plugin": "eks-hybrid-gpu:owners:DevicePlugin",
    "dra": "eks-hybrid-gpu:owners:DraDriver",
    "gpu-operator": "eks-hybrid-gpu:owners:GpuOperator",
}


def test_every_registered_owner_kind_has_a_builder() -> None:
    assert set(OWNER_BUILDERS) == set(OWNER_KINDS) == set(OWNERS)
    for owner in OWNER_KINDS:
        assert builder_of(owner) is OWNER_BUILDERS[owner]


@pytest.mark.parametrize("owner", ["nvidia", "", "GPU-OPERATOR", "gpu_operator"])
def test_an_unknown_owner_is_refused_by_name(owner: str) -> None:
    with pytest.raises(UnknownOwnerError) as refused:
        builder_of(owner)

    assert str(refused.value) == (
        f"no component builds owner {owner!r} (builders: device-plugin, dra, gpu-operator); add its registry entry "
        "to policy/gpu_allocation/vocab/owners.py and its builder to components.owner_builders.OWNER_BUILDERS "
        "(docs/adding-an-owner-kind.md)"
    )


@pytest.mark.parametrize("owner", OWNERS)
def test_each_builder_builds_its_owners_component_in_the_given_namespace(construct: Construct, owner: str) -> None:
    config = StackConfig.model_validate(_base_config(cohorts=[cohort(COHORTS[owner])]))
    (chosen,) = config.cohorts
    stamp = Ownership(owner=owner, cohort=chosen.name, selector={}, sharing="none", config_path="cohorts[0]")

    def build() -> pulumi.Output[str]:
        inputs = CohortOwner(config, chosen, stamp, "owner-ns", Path.cwd(), render_only=False)
        return builder_of(owner)("built", inputs, pulumi.ResourceOptions())

    recorder = construct(build)

    assert recorder.named("built").type_ == COMPONENTS[owner]
    charts = [r for r in recorder.registrations if r.parent == "built" and r.inputs.get("namespace")]
    assert charts
    assert {r.inputs["namespace"] for r in charts} == {"owner-ns"}


def test_namespace_roles_come_from_the_registry() -> None:
    config = StackConfig.model_validate(
        _base_config(
            cohorts=[cohort(DRA_COHORT), cohort(OPERATOR_COHORT)],
            namespaces={"devicePlugin": "team-gpu", "draDriver": "team-dra"},
        )
    )

    assert namespace_roles(config) == {
        "device-plugin": ("team-gpu", "privileged"),  # the ledger's home, with or without a plugin cohort
        "workloads": ("ai-workloads", "restricted"),
        "dra": ("team-dra", "privileged"),
        "gpu-operator": ("gpu-operator", "privileged"),
    }
