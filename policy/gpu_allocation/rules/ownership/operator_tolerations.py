"""operator-operand-tolerations-reviewed: GPU Operator operands that tolerate every taint are reviewed (advisory).

Seed: the Operator "cannot be pinned to a cohort"; its operands follow GPU discovery, and a taint is what keeps them
off the GPU nodes outside it. EKS Auto Mode GPU nodes carry ``nvidia.com/gpu:NoSchedule``: a toleration with no key
and ``operator: Exists`` matches every taint ("An empty key with operator Exists matches all keys, values and
effects", ``core/v1`` Toleration), so such operands may start there, next to the GPUs AWS manages. The pack cannot
see the nodes' ``nvidia.com/gpu.deploy.operands=false`` opt-outs, so it asks for a review rather than refusing.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import GPU_OPERATOR, PROJECT
from ...vocab.owners import GPU_OPERATOR_KIND
from ..declare import stack_policy
from ..findings import report_findings
from ..operator_crs import cr_mode
from ..props import UNKNOWN, as_list, dig, show
from ..resource import Resource
from ..stack_view import INSTALL_KINDS, StackView, reads_gpu_objects
from .operator_reach import reviewed

FIELD = "daemonsets.tolerations"
"""Where the Operator's operand tolerations live: values, and ``spec.daemonsets.tolerations`` of its CRs (the chart
prints ``toYaml .Values.daemonsets`` into both, gpu-operator ``templates/clusterpolicy.yaml``/``gpucluster.yaml``)."""


OPERATOR_CR_KINDS = frozenset({"ClusterPolicy", "GPUCluster"})
"""What this check reads besides Helm resources (whose props every stack view reads)."""


def tolerates_every_taint(toleration: Any) -> bool:
    """A toleration that matches any taint (of some effect): no key and ``operator: Exists``.

    The scheduler's ``Toleration.ToleratesTaint`` (k8s.io/api ``core/v1/toleration.go``): an empty key matches every
    key only with ``Exists``; an empty effect matches every effect. One that names an effect still matches every
    ``NoSchedule`` taint, Auto Mode's among them.
    """
    if not isinstance(toleration, dict):
        return False
    key = toleration.get("key")
    return key in (None, "") and toleration.get("operator") == "Exists"


def _sources(view: StackView) -> list[tuple[Resource, str, Any]]:
    """(object, field, tolerations) of every Operator Release's values and Operator CR of the stack."""
    found: list[tuple[Resource, str, Any]] = []
    for operator in view.by_owner(GPU_OPERATOR):
        if operator.inputs_visible:
            found.append((operator.resource, f"values {FIELD}", operator.value(*FIELD.split("."))))
    for resource in view.resources:
        if cr_mode(resource) is not None:
            found.append((resource, f"spec.{FIELD}", dig(resource.props, "spec", *FIELD.split("."))))
    return found


def operator_operand_tolerations_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Ask for a review of Operator operands that tolerate every taint: they may start on Auto Mode GPU nodes."""
    view = StackView.from_args(args, OPERATOR_CR_KINDS | INSTALL_KINDS)
    sources = _sources(view)
    if not sources:
        args.not_applicable("no GPU Operator Release or ClusterPolicy/GPUCluster in the stack")
        return
    for resource, field, tolerations in sources:
        if tolerations is UNKNOWN or tolerations is None:
            continue
        if not isinstance(tolerations, list):
            resource.cannot_read(field, "is not a list of tolerations")
            continue
        wide = [t for t in as_list(tolerations) if tolerates_every_taint(t)]
        if not wide:
            continue
        report_violation(
            f"{resource.describe}: {field} holds {show(wide[0])}, which tolerates every taint, so the Operator's "
            "operands (driver, toolkit, device plugin, GFD) may start on any GPU node that discovery finds, EKS Auto "
            "Mode nodes (nvidia.com/gpu:NoSchedule) and other cohorts' hosts included. Review: tolerate only the "
            "Operator cohort's own taint (a keyed toleration) and opt every other GPU node out with "
            "nvidia.com/gpu.deploy.operands=false.",
            resource.urn,
        )
    for crossing in reviewed(view):
        report_violation(crossing.review(), crossing.urn)
    report_findings(view.problems(reads_gpu_objects), report_violation)


OPERATOR_OPERAND_TOLERATIONS_REVIEWED = stack_policy(
    "operator-operand-tolerations-reviewed",
    (
        "GPU Operator operands whose daemonsets.tolerations tolerate every taint (no key, operator Exists) are "
        "reviewed: they can start on Auto Mode GPU nodes; so is a standalone allocator whose nodes the Operator's own "
        "allocator reaches unless its hosts carry nvidia.com/gpu.deploy.operands=false, which the stack does not show "
        "(advisory)."
    ),
    operator_operand_tolerations_validator,
    severity=Severity.MEDIUM,
    remediation=(
        "Give daemonsets.tolerations a key (the Operator cohort's taint; this program tolerates only the cohort label "
        f"of {PROJECT}:cohorts[i].nodeSelector), and label every GPU node outside the Operator cohort "
        "nvidia.com/gpu.deploy.operands=false."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=[GPU_OPERATOR, "targeting", "review"],
    level=EnforcementLevel.ADVISORY,
)
