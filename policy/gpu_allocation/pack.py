"""Build the ``eks-hybrid-gpu`` policy pack.

Constructing a :class:`pulumi_policy.PolicyPack` starts the analyzer's gRPC server and
blocks, so the policy list is built by :func:`build_policies` (what tests import) and
:func:`serve` is the only place that constructs the pack.
"""

from __future__ import annotations

from typing import Final

from pulumi_policy import EnforcementLevel, Policy, PolicyPack

from .rules import dra, drivers, ownership, sharing, targeting, workloads
from .rules.sdk_internals import share_deserialization_per_request, take_stack_config_from_configure_stack

PACK_NAME: Final = "eks-hybrid-gpu"
PACK_DESCRIPTION: Final = (
    "Refuses what the EKS Hybrid GPU chapter warns against: two GPU allocation owners "
    "on one node, Auto Mode targeting, removed GPU affinity, unhardened smoke Jobs, "
    "malformed GPU requests, old DRA shapes, floating charts and skipped Operator hooks."
)


def build_policies() -> list[Policy]:
    """Every policy of the pack, in README order."""
    return [
        *ownership.POLICIES,
        *targeting.POLICIES,
        *workloads.POLICIES,
        *sharing.POLICIES,
        *dra.POLICIES,
        *drivers.POLICIES,
    ]


def serve() -> None:
    """Construct the pack, which serves the analyzer until the engine stops it."""
    take_stack_config_from_configure_stack()
    share_deserialization_per_request()
    PolicyPack(
        name=PACK_NAME,
        policies=build_policies(),
        enforcement_level=EnforcementLevel.ADVISORY,
        description=PACK_DESCRIPTION,
        display_name="EKS Hybrid GPU allocation ownership",
        tags=["kubernetes", "eks", "gpu", "nvidia"],
    )
