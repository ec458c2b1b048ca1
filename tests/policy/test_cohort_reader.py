"""The one reader of a pod's node selection decides its cohort for every rule, nodeAffinity included (#43).

The scheduler's NodeAffinity filter admits a node that meets every nodeSelector entry and one required term (terms
ORed, expressions ANDed). A workload that reaches a device plugin's cohort only through `nodeAffinity` lands there as
surely as one with a nodeSelector, so the claim rule, the time-slicing rename and the MIG strategy judge it the same
way. A term that leaves the cohort only through `NotIn`/`Exists` on the cohort label cannot say which cohort the pod
lands in: the claim rule, where silence would double-book, refuses it (fail closed); the sharing rules, whose misses
leave a pod Pending, do not.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.dra import DRA_CLAIM_ON_DRA_COHORT
from policy.gpu_allocation.rules.sharing import MIG_STRATEGY_CONSISTENT, SHARED_GPU_RESOURCE_NAME
from policy.gpu_allocation.vocab.selectors import (
    CANNOT_TELL,
    INSIDE,
    OUTSIDE,
    PARTLY,
    Placement,
    cohort_membership,
    cohort_selector,
)
from tests.support.policy_harness import Harness, type_of

from .test_foreign_stacks import COHORT_KEY, DIGEST, device_plugin, dra, foreign, selector
from .test_round_four import COMPUTE, claim_pod, says_next_command, seed_claim_objects, terms, workload
from .test_time_slicing_selection import SHARED

pytestmark = [pytest.mark.policy, pytest.mark.charts]

PLUGIN = selector("device-plugin")
DRA_NODES = selector("dra")


def on(*values: str, operator: str = "In") -> dict[str, Any]:
    return {"key": COHORT_KEY, "operator": operator, "values": list(values)}


NOT_AUTO = {"key": COMPUTE, "operator": "NotIn", "values": ["auto"]}

# --------------------------------------------------------------------------- the reading itself

MEMBERSHIP: dict[str, tuple[dict[str, str], list[list[dict[str, Any]]] | None, str]] = {
    "nodeSelector": (PLUGIN, None, INSIDE),
    "affinity In, no nodeSelector": ({}, [[on("device-plugin")]], INSIDE),
    "ORed terms, each In the cohort": ({}, [[on("device-plugin")], [on("device-plugin"), NOT_AUTO]], INSIDE),
    "an ORed term In the DRA cohort": ({}, [[on("device-plugin")], [on("dra")]], PARTLY),
    "In both cohorts": ({}, [[on("device-plugin", "dra")]], PARTLY),
    "NotIn the other cohort": ({}, [[on("dra", operator="NotIn")]], CANNOT_TELL),
    "Exists": ({}, [[{"key": COHORT_KEY, "operator": "Exists"}]], CANNOT_TELL),
    "NotIn the cohort": ({}, [[on("device-plugin", operator="NotIn")]], OUTSIDE),
    "DoesNotExist": ({}, [[{"key": COHORT_KEY, "operator": "DoesNotExist"}]], OUTSIDE),
    "In the DRA cohort": ({}, [[on("dra")]], OUTSIDE),
    "unpinned, NotIn auto": ({}, [[NOT_AUTO]], PARTLY),
}


@pytest.mark.parametrize("case", sorted(MEMBERSHIP))
def test_membership_as_the_scheduler_reads_it(case: str) -> None:
    node_selector, affinity_terms, expected = MEMBERSHIP[case]
    raw = None if affinity_terms is None else [{"matchExpressions": t} for t in affinity_terms]
    cohort = cohort_selector(PLUGIN, [DRA_NODES])
    assert cohort == {COHORT_KEY: "device-plugin"}  # compute-type is every hybrid node's: it names no cohort
    verdict, requirement = cohort_membership(Placement.of(node_selector, raw), cohort)
    assert verdict == expected
    assert (requirement is not None) == (expected == CANNOT_TELL)


def test_a_cohort_alone_in_its_stack_is_its_selector_but_the_compute_type() -> None:
    assert cohort_selector(PLUGIN, []) == {COHORT_KEY: "device-plugin"}
    assert cohort_selector({COMPUTE: "hybrid"}, []) == {COMPUTE: "hybrid"}
    assert cohort_selector(PLUGIN, [{COMPUTE: "hybrid", COHORT_KEY: "device-plugin"}, {COMPUTE: "auto"}]) == {
        COMPUTE: "hybrid"
    }


# --------------------------------------------------------------------------- dra-claim-on-dra-cohort

CLAIM_ROUTES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # route: (affinity that only admits the plugin's cohort, its twin that reaches the DRA cohort)
    "affinity only": (terms([on("device-plugin")]), terms([on("dra")])),
    "ORed terms": (
        terms([on("device-plugin")], [on("device-plugin"), NOT_AUTO]),
        terms([on("device-plugin")], [on("dra"), NOT_AUTO]),
    ),
}


@pytest.mark.parametrize("kind", ["Pod", "Job", "CronJob", "Deployment"])
@pytest.mark.parametrize("route", sorted(CLAIM_ROUTES))
def test_a_claim_pinned_to_the_plugin_only_through_affinity_is_refused(harness: Harness, kind: str, route: str) -> None:
    pinned_affinity, twin_affinity = CLAIM_ROUTES[route]
    pinned = workload(kind, claim_pod({}, pinned_affinity))
    message = harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), *seed_claim_objects(), pinned]))
    text = message.one()
    assert text.startswith(f"{type_of(pinned)} 'ai-workloads/inference' claims a GPU"), text
    assert "only admits the device plugin's cohort" in text
    assert "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution" in text
    assert "pin the pod to the DRA cohort" in text
    says_next_command(text)
    twin = workload(kind, claim_pod({}, twin_affinity))
    harness.passes(
        harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), *seed_claim_objects(), twin]))
    )


def test_a_claim_that_leaves_the_cohort_only_through_not_in_cannot_be_judged(harness: Harness) -> None:
    job = workload("Job", claim_pod({}, terms([on("dra", operator="NotIn")])))
    stack = foreign([*device_plugin(), *dra(), *seed_claim_objects(), job])
    text = harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack).one()
    assert text.startswith("kubernetes:batch/v1:Job 'ai-workloads/inference' claims a GPU")
    assert f"leaves it only through '{COHORT_KEY} NotIn [dra]'" in text
    assert "cannot judge the object and refuses it (fail closed)" in text
    assert f"Replace '{COHORT_KEY} NotIn [dra]' with '{COHORT_KEY} In [dra]'" in text
    says_next_command(text)


@pytest.mark.parametrize(
    "affinity",
    [
        terms([{"key": COHORT_KEY, "operator": "Exists"}]),
        terms([on("dra", operator="NotIn")], [on("dra")]),
    ],
    ids=["exists-reaches-dra", "not-in-or-dra"],
)
def test_an_open_term_that_also_reaches_the_dra_cohort_is_served_there(harness: Harness, affinity: Any) -> None:
    """The scheduler binds a claim only where a driver published devices: the DRA cohort is among the pod's nodes."""
    job = workload("Job", claim_pod({}, affinity))
    harness.passes(
        harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), *seed_claim_objects(), job]))
    )


# --------------------------------------------------------------------------- the sharing rules

SLICED = {"config__map": {"shared": SHARED}, "config__default": "shared"}


def gpu_request(resource: str, node_selector: dict[str, str], affinity: dict[str, Any] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "nodeSelector": node_selector,
        "containers": [
            {"name": "server", "image": DIGEST, "resources": {"requests": {resource: 1}, "limits": {resource: 1}}}
        ],
    }
    if affinity is not None:
        pod["affinity"] = affinity
    return workload("Deployment", pod)


SHARING_ROUTES: dict[str, tuple[dict[str, str], dict[str, Any] | None, bool]] = {
    "nodeSelector": (PLUGIN, None, True),
    "affinity only": ({}, terms([on("device-plugin")]), True),
    "ORed terms": ({}, terms([on("device-plugin")], [on("device-plugin"), NOT_AUTO]), True),
    "an ORed term on the DRA cohort": ({}, terms([on("device-plugin")], [on("dra")]), False),
    "NotIn the DRA cohort": ({}, terms([on("dra", operator="NotIn")]), False),
}


@pytest.mark.parametrize("with_dra", [True, False], ids=["two-cohorts", "plugin-alone"])
@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_time_sliced_cohort_reached_through_affinity_asks_the_shared_name(
    harness: Harness, route: str, with_dra: bool
) -> None:
    node_selector, affinity, refused = SHARING_ROUTES[route]
    others = dra() if with_dra else []
    stack = foreign([*device_plugin(**SLICED), *others, gpu_request("nvidia.com/gpu", node_selector, affinity)])
    outcome = harness.stack(SHARED_GPU_RESOURCE_NAME, stack)
    if not refused:
        harness.passes(outcome)
        return
    text = outcome.one()
    assert text.startswith("kubernetes:apps/v1:Deployment 'ai-workloads/inference': container 'server' requests")
    assert "advertises nvidia.com/gpu.shared instead" in text
    assert "Ask for nvidia.com/gpu.shared" in text
    twin = gpu_request("nvidia.com/gpu.shared", node_selector, affinity)
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, foreign([*device_plugin(**SLICED), *others, twin])))


def test_a_mig_request_reaching_a_plugin_without_mixed_only_through_affinity_is_refused(harness: Harness) -> None:
    asking = gpu_request("nvidia.com/mig-1g.18gb", {}, terms([on("device-plugin")]))
    text = harness.stack(MIG_STRATEGY_CONSISTENT, foreign([*device_plugin(), *dra(), asking])).one()
    assert "requests nvidia.com/mig-1g.18gb, but it only runs on" in text
    assert "only the mixed strategy advertises nvidia.com/mig-<profile>" in text
    twin = gpu_request("nvidia.com/mig-1g.18gb", {}, terms([on("dra")]))
    outcome = harness.stack(MIG_STRATEGY_CONSISTENT, foreign([*device_plugin(), *dra(), twin]))
    assert not any("only runs on" in m for m in outcome.messages), outcome.messages


def test_the_gpu_model_of_a_mig_request_is_read_from_its_affinity_too(harness: Harness) -> None:
    product = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H200"]}
    rendered = device_plugin(migStrategy="mixed")
    asking = gpu_request("nvidia.com/mig-1g.10gb", {}, terms([on("device-plugin"), product]))
    text = harness.stack(MIG_STRATEGY_CONSISTENT, foreign([*rendered, asking])).one()
    assert "MIG profile '1g.10gb' is not among the H200-141GB profiles" in text
    fits = gpu_request("nvidia.com/mig-1g.18gb", {}, terms([on("device-plugin"), product]))
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, foreign([*rendered, fits])))


def test_an_open_term_claim_whose_object_is_not_in_the_stack_cannot_be_judged(harness: Harness) -> None:
    job = workload("Job", claim_pod({}, terms([on("dra", operator="NotIn")])))
    text = harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), job])).one()
    assert "claims 'gpu' (ResourceClaimTemplate 'single-large-gpu'), whose claim object is not in this stack" in text
    assert "cannot judge the object and refuses it (fail closed)" in text
    says_next_command(text)
    pinned = workload("Job", claim_pod({}, terms([on("dra")])))
    harness.passes(harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), pinned])))
