"""dra-claim-on-dra-cohort: a GPU claim is never pinned to a device plugin's cohort.

The scheduler allocates a claim only from the ResourceSlices a DRA driver publishes for a node (kube-scheduler's
DynamicResources plugin, structured parameters: a device must be in a slice of a node the pod may land on). A
device plugin publishes no slice: it advertises ``nvidia.com/gpu`` in the node's allocatable. So a workload whose node
selection (the scheduler's NodeAffinity reading, :func:`..shapes.node_selection`: every nodeSelector entry and one
required term) only admits a device plugin's cohort and which claims a GPU through DRA is never scheduled: the pod
stays Pending. Only a second owner on that cohort could serve it, and a DRA driver there hands out the GPUs the
device plugin already hands out (the seed: "do not run the DRA driver alongside the device plugin on the same node").
Either way the pod belongs on the DRA cohort, or asks ``nvidia.com/gpu`` through the plugin.

A claim is a GPU claim when one of its requests names a class of the NVIDIA DRA driver's GPUs (the chart's
``gpu.nvidia.com``, ``mig.nvidia.com``, ``vfio.gpu.nvidia.com``) or a DeviceClass of the stack whose CEL names the
driver ``gpu.nvidia.com`` (:func:`..dra_requests.asks_nvidia_gpu`); one whose claim object is not in the stack cannot
be told (refused, fail closed).
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, Severity, StackValidationArgs

from ...vocab.labels import DEVICE_PLUGIN, DRA, PROJECT
from ...vocab.owners import DRA_KIND
from ...vocab.selectors import (
    CANNOT_TELL,
    INSIDE,
    Placement,
    Requirement,
    cohort_membership,
    cohort_selector,
    reaches_outside,
    show_requirement,
)
from ..declare import stack_policy
from ..dra_requests import CLAIM_KINDS, ClaimIndex, asks_nvidia_gpu, claim_requests
from ..findings import CANNOT_JUDGE, LABELS_NOTE, PREVIEW_AGAIN, report_findings
from ..name_mapping import MAPPING_KINDS, Publisher, publishers, reads_mapping
from ..props import as_dict, compact_json
from ..resource import Resource
from ..shapes import POD_SPEC_PATHS, pod_claims, pod_placement
from ..stack_view import StackView

NAME = "dra-claim-on-dra-cohort"
KINDS = frozenset({*MAPPING_KINDS, *CLAIM_KINDS})


def _claim_entries(pod: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(entry name, object kind, object name) of each ``resourceClaims`` entry that names its claim object."""
    found = []
    for entry in pod_claims(pod):
        entry = as_dict(entry)
        for field, kind in (
            ("resourceClaimTemplateName", "ResourceClaimTemplate"),
            ("resourceClaimName", "ResourceClaim"),
        ):
            name = entry.get(field)
            if isinstance(name, str):
                found.append((str(entry.get("name")), kind, name))
    return found


def _gpu_claims(index: ClaimIndex, workload: Resource, pod: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the GPU claims, the claims whose object is not in the stack), each as ``'entry' (Kind 'name')``."""
    objects = dict(index.pod_claims(workload, pod))
    gpu, unseen = [], []
    for entry, kind, name in _claim_entries(pod):
        claim = objects.get(entry)
        if claim is None:
            unseen.append(f"'{entry}' ({kind} '{name}')")
        elif any(asks_nvidia_gpu(o) for options in claim_requests(claim, index.classes) for o in options):
            gpu.append(f"'{entry}' ({claim.describe})")
    return gpu, unseen


def _cohort(
    placement: Placement, plugins: list[Publisher], found: list[Publisher]
) -> tuple[Publisher, dict[str, str], Requirement | None] | None:
    """The device plugin whose cohort holds every node the placement admits, or one it cannot tell the placement from.

    The cohort is the part of the plugin's nodeSelector that tells it from the other allocators of the stack
    (:func:`...vocab.selectors.cohort_selector`). A placement pinned by ``In`` terms alone is read exactly
    (:data:`INSIDE`); one that leaves the cohort only through ``NotIn``/``Exists``/``Gt``/``Lt`` on its label comes back
    with that requirement (:data:`CANNOT_TELL`).
    """
    unclear: tuple[Publisher, dict[str, str], Requirement | None] | None = None
    others = [p.placement.node_selector for p in found if p.placement is not None]
    for plugin in plugins:
        if plugin.placement is None:
            continue
        selector = plugin.placement.node_selector
        cohort = cohort_selector(selector, [o for o in others if o != selector])
        verdict, requirement = cohort_membership(placement, cohort)
        if verdict == INSIDE:
            return plugin, cohort, None
        if verdict == CANNOT_TELL and unclear is None:
            unclear = plugin, cohort, requirement
    return unclear


def _fields(resource: Resource) -> str:
    base = ".".join(POD_SPEC_PATHS[resource.kind])
    return f"{base}.nodeSelector / {base}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def _fix(drivers: list[Publisher]) -> str:
    pinned = [d for d in drivers if d.placement is not None and d.placement.node_selector]
    to = (
        "pin the pod to the DRA cohort ("
        + "; ".join(sorted(f"nodeSelector {compact_json(d.placement.node_selector)}" for d in pinned if d.placement))
        + ")"
        if pinned
        else "pin the pod to a DRA cohort's nodes"
    )
    return (
        f"{to}, or, to stay on the device plugin's cohort, drop the claim and ask nvidia.com/gpu in the container's "
        f"resources.limits (the program's cohorts: {PROJECT}:cohorts[i].owner and .nodeSelector; a node changes owner "
        f"with `eks-hybrid-gpu move-host`); {PREVIEW_AGAIN}"
    )


def _cannot_tell(
    resource: Resource, what: str, plugin: Publisher, requirement: Requirement, drivers: list[Publisher]
) -> str:
    """A claim pod that reaches a plugin's cohort and leaves it only through labels no stack value names."""
    key = requirement[0]
    selectors = [d.placement.node_selector for d in drivers if d.placement is not None]
    values = sorted({selector[key] for selector in selectors if key in selector})
    pin = f"{key} In [{', '.join(values)}]" if values else f"{key} In [<the DRA cohort's value>]"
    return (
        f"{resource.describe} claims {what} through DRA, and its node selection "
        f"({_fields(resource)}) reaches the device plugin's cohort ({plugin.where}) and leaves it only through "
        f"'{show_requirement(requirement)}' on the label that tells the cohorts apart: which cohort the scheduler "
        "places the pod in depends on node labels this stack does not show, and no DRA driver of this stack runs on "
        "the nodes it admits outside that cohort, where the claim could be served without a second owner on the "
        f"plugin's GPUs; {CANNOT_JUDGE}. Replace '{show_requirement(requirement)}' with '{pin}', or "
        f"{_fix(drivers)}."
    )


def claim_on_dra_cohort_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a workload whose GPU claim can only land on a device plugin's cohort."""
    view = StackView.from_args(args, KINDS)
    found = publishers(view)
    plugins = [p for p in found if p.owner == DEVICE_PLUGIN and p.placement is not None]
    drivers = [p for p in found if p.owner == DRA]
    index = ClaimIndex.of(view.resources)
    judged = False
    for resource, pod in view.workloads():
        if resource.is_allocator or resource.kind not in POD_SPEC_PATHS or not pod_claims(pod):
            continue
        placement = pod_placement(pod)
        if placement is None or not plugins:
            continue  # unknown during preview (judged at up), or no device plugin's cohort to be pinned to
        judged = True
        pinned = _cohort(placement, plugins, found)
        if pinned is None:
            continue
        plugin, cohort, unclear = pinned
        gpu, unseen = _gpu_claims(index, resource, pod)
        if unclear is not None:
            if (gpu or unseen) and not any(reaches_outside(placement, cohort, d.placement) for d in drivers):
                what = (
                    f"a GPU ({', '.join(gpu)})"
                    if gpu
                    else f"{', '.join(unseen)}, whose claim object is not in this stack (its devices cannot be told),"
                )
                report_violation(_cannot_tell(resource, what, plugin, unclear, drivers), resource.urn)
            continue

        def lands(what: str, resource: Resource = resource, plugin: Publisher = plugin) -> str:
            return (
                f"{resource.describe} claims {what} through DRA, and its node selection ({_fields(resource)}) only "
                f"admits the device plugin's cohort ({plugin.where})"
            )

        if unseen and not gpu:
            report_violation(
                f"{lands(', '.join(unseen))}, but the claim object is not in this stack, so which devices it "
                f"asks cannot be told, {CANNOT_JUDGE}. Manage the ResourceClaim/ResourceClaimTemplate in this stack, "
                f"or {_fix(drivers)}.",
                resource.urn,
            )
            continue
        if not gpu:
            continue  # another driver's devices (a NIC, a compute domain): not the GPUs' owner question
        also = [d for d in drivers if d.reaches(placement)]
        what = lands(f"a GPU ({', '.join(gpu)})")
        if also:
            served = (
                f"; a DRA driver runs there too ({'; '.join(sorted(d.where for d in also))}), so the claim would be "
                "served by a second owner of the GPUs the device plugin already hands out (double-booked)"
            )
        else:
            served = (
                ": no DRA driver of this stack runs there, so no ResourceSlice offers those GPUs and the pod stays "
                "Pending; only a second owner installed on that cohort could serve it, double-booking the GPUs the "
                "device plugin hands out"
            )
        report_violation(f"{what}{served}. {LABELS_NOTE} Either {_fix(drivers)}.", resource.urn)
    if not judged:
        unreadable = view.problems(reads_mapping)
        if unreadable:
            report_findings(unreadable, report_violation)
            return
        args.not_applicable(
            "no device plugin's cohort in the stack" if not plugins else "no workload in the stack claims through DRA"
        )
        return
    report_findings(view.problems(reads_mapping), report_violation)


DRA_CLAIM_ON_DRA_COHORT = stack_policy(
    NAME,
    "A workload that claims a GPU through DRA is never pinned to a device plugin's cohort, where no DRA driver "
    "publishes devices (or a second one double-books the plugin's GPUs).",
    claim_on_dra_cohort_validator,
    severity=Severity.HIGH,
    remediation=(
        "Pin a DRA workload to the DRA cohort (its nodeSelector, or a required node affinity term on the DRA cohort's "
        f"label: {PROJECT}:cohorts[i].nodeSelector of the cohort whose owner is dra); on a device-plugin cohort ask "
        "nvidia.com/gpu in resources.limits instead of a claim."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra", "workloads", "gpu"],
)
