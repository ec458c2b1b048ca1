"""dra-extended-resource-one-publisher: a mapped name is never also published by a device plugin on DRA nodes.

KEP-5004's migration advice: a node must never have the device plugin and DRA publishing the same name. kube-scheduler
v1.37.2 (``noderesources/fit.go``, ``shouldDelegateResourceToDRA``) serves a plain request through the device plugin on
a node whose allocatable of that name is above 0, and through the mapping DeviceClass elsewhere; on a node where a
device plugin publishes ``nvidia.com/gpu`` and the DRA driver runs too, plain requests go to the plugin while the
driver owns the same GPUs: two owners of one GPU. Nodes are compared as the scheduler reads placements
(:mod:`..name_mapping`, :func:`...vocab.selectors.placements_overlap`).
"""

from __future__ import annotations

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import DEFAULT_COHORT_LABEL_KEY, DRA, PROJECT
from ...vocab.owners import DRA_KIND
from ..declare import stack_policy
from ..findings import LABELS_NOTE, PREVIEW_AGAIN, report_findings
from ..name_mapping import MAPPING_KINDS, mapping_classes, publishers, publishes_name, reads_mapping
from ..stack_view import StackView


def one_publisher_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a mapping class whose name a device plugin publishes on nodes the DRA driver also runs on."""
    view = StackView.from_args(args, MAPPING_KINDS)
    mapped = mapping_classes(view)
    found = publishers(view)
    drivers = [p for p in found if p.owner == DRA]
    if not mapped or not drivers:
        unreadable = view.problems(reads_mapping)
        if unreadable:
            report_findings(unreadable, report_violation)
            return
        reason = "no DeviceClass maps an extended resource" if not mapped else "the stack runs no DRA driver"
        args.not_applicable(reason)
        return
    for mapping in mapped:
        for plugin in (p for p in found if publishes_name(p, mapping.name)):
            for driver in (d for d in drivers if plugin.meets(d)):
                report_violation(
                    f"{mapping.describe} maps spec.extendedResourceName {mapping.name!r}, and a node can run both "
                    f"the device plugin ({plugin.where}) and the DRA driver ({driver.where}). On such a node the "
                    f"device plugin publishes {mapping.name} too: the scheduler gives plain {mapping.name} requests "
                    "to the plugin wherever the node's allocatable of the name is above 0, while the DRA driver "
                    "owns the same GPUs, so one GPU has two owners. Give the device plugin and the DRA driver "
                    f"disjoint cohorts (a label key with different values, e.g. {DEFAULT_COHORT_LABEL_KEY}="
                    f"device-plugin vs =dra, in {PROJECT}:cohorts[i].nodeSelector, or in each allocator's own "
                    "nodeSelector); `eks-hybrid-gpu move-host` moves one node between cohorts in order (cordon, drain, "
                    f"relabel, wait); {PREVIEW_AGAIN}. {LABELS_NOTE}",
                    mapping.resource.urn,
                )
    report_findings(view.problems(reads_mapping), report_violation)


DRA_EXTENDED_RESOURCE_ONE_PUBLISHER = stack_policy(
    name="dra-extended-resource-one-publisher",
    description=(
        "A name a DeviceClass maps (spec.extendedResourceName) is never also published by a device plugin on a "
        "node the DRA driver runs on."
    ),
    validate=one_publisher_validator,
    severity=Severity.CRITICAL,
    # Nothing to tune: only the enforcement level is configurable (one publisher of a name per node).
    remediation=(
        f"Give the device plugin and the DRA driver disjoint cohorts ({PROJECT}:cohorts[i].nodeSelector, or each "
        "allocator's own nodeSelector and required node affinity); move a node from one to the other with "
        "`eks-hybrid-gpu move-host`, never by running both on it."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra", "ownership", "gpu"],
)
