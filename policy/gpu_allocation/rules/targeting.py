"""Targeting policies: stay on Hybrid GPU nodes, keep the charts' GPU affinity.

Seed: "The standalone examples below target only the identified Hybrid GPU nodes; do not
install duplicate allocation managers on Auto Mode or other GPU nodes" and "If no node
matches, fix the inventory/labels; do not remove affinity just to obtain running Pods."
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from ..vocab import labels as vocab
from ..vocab.labels import DEVICE_PLUGIN, DRA, PROJECT
from ..vocab.owners import DEVICE_PLUGIN_KIND, owner_kind, owner_of_app_label
from .charts import NFD_NAME
from .fail_closed import fail_closed, reads_pods_and_helm
from .findings import LABELS_NOTE
from .props import (
    UNKNOWN,
    as_dict,
    as_list,
    compact_json,
    config_strings,
    contains_unknown,
    one_of,
    show,
    string_list,
)
from .resource import Resource
from .shapes import APP_NAME_LABEL, POD_SPEC_PATHS, required_node_terms

GPU_DISCOVERY_LABELS: Final = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
    "feature.node.kubernetes.io/cpu-model.vendor_id",
    "nvidia.com/gpu.present",
)
"""Labels of the charts' default GPU-discovery affinity (charts.md 2.1 and 3.1)."""

_COHORT_SELECTOR_PATH: Final = f"{PROJECT}:cohorts[i].nodeSelector"


def _rendered_owner(resource: Resource) -> Any:
    """Return a workload's allocator owner: stamped label, else what it runs, else its chart's app label.

    The GPU Operator's own pods allocate nothing (its operands do), so neither its image nor its app label makes a
    workload an allocator here.
    """
    owner = resource.label(vocab.OWNER_LABEL)
    if owner is UNKNOWN or isinstance(owner, str):
        return owner
    if resource.identity is not None and resource.identity[1] != "operator":
        return resource.identity[0]
    app = resource.label(APP_NAME_LABEL)
    if app is UNKNOWN:
        return UNKNOWN
    found = owner_of_app_label(app) if isinstance(app, str) else None
    return found if found is not None and not owner_kind(found).manager else None


# --------------------------------------------------------------------------- pinning


def _term_pinning(term: Any, label: str, required: str, forbidden: Sequence[str]) -> str:
    """Classify one nodeSelectorTerm: pinned, auto, unknown or unpinned."""
    if contains_unknown(term):
        return "unknown"
    verdict = "unpinned"
    for expression in as_list(as_dict(term).get("matchExpressions")):
        expression = as_dict(expression)
        if expression.get("key") != label:
            continue
        operator = expression.get("operator")
        values = [v for v in as_list(expression.get("values")) if isinstance(v, str)]
        if operator == "In" and values and all(v == required for v in values):
            return "pinned"
        if operator == "NotIn" and forbidden and set(forbidden) <= set(values):
            return "pinned"
        if operator == "In" and set(values) & set(forbidden):
            verdict = "auto"
    return verdict


def pinning(
    node_selector: Any,
    affinity: Any,
    label: str = vocab.COMPUTE_TYPE_LABEL,
    required: str = vocab.HYBRID,
    forbidden: Sequence[str] = (vocab.AUTO_MODE,),
) -> tuple[str, str]:
    """Decide whether a placement is pinned to ``label=required``.

    Returns ``(verdict, detail)``; verdict is ``pinned``, ``unknown`` (preview),
    ``auto`` (explicitly reaches Auto Mode) or ``unpinned``. A nodeSelector with the
    required value pins; otherwise every required nodeAffinity term must require the
    value (``In``) or exclude every forbidden value (``NotIn``). The charts' OR'ed
    GPU-discovery terms do not pin compute-type on their own.
    """
    if node_selector is UNKNOWN:
        return "unknown", "nodeSelector"
    selected = as_dict(node_selector).get(label)
    if selected is UNKNOWN:
        return "unknown", f"nodeSelector {label}"
    if selected == required:
        return "pinned", ""
    if selected in forbidden:
        return "auto", f"nodeSelector {label}={show(selected)}"
    terms = required_node_terms(affinity)
    if terms is UNKNOWN:
        return "unknown", "affinity"
    selector_text = (
        f"nodeSelector {label}={show(selected)}" if selected is not None else f"nodeSelector without {label}"
    )
    if not terms:
        return "unpinned", f"{selector_text} and no required nodeAffinity on {label}"
    verdicts = [_term_pinning(t, label, required, forbidden) for t in terms]
    if "unknown" in verdicts:
        return "unknown", "affinity"
    if all(v == "pinned" for v in verdicts):
        return "pinned", ""
    loose = [i for i, v in enumerate(verdicts) if v != "pinned"]
    verdict = "auto" if "auto" in verdicts else "unpinned"
    shown = compact_json(as_dict(terms[loose[0]]))
    detail = (
        f"{selector_text} and required nodeAffinity term {loose[0]} {shown} that does not require {label}={required}"
    )
    return verdict, detail


def _targeting_message(subject: str, verdict: str, detail: str, path: str, label: str, required: str) -> str:
    reach = (
        "explicitly targets EKS Auto Mode nodes"
        if verdict == "auto"
        else "can schedule on EKS Auto Mode or other non-hybrid GPU nodes"
    )
    return (
        f"{subject} is not pinned to {label}={required}: {detail}, so it {reach}, "
        "where AWS already manages the GPU device plugin and a second allocation "
        f"manager double-advertises GPUs. Add {label}: {required} to {path} (or a "
        f"required nodeAffinity term per OR'ed term). {LABELS_NOTE}"
    )


def no_auto_mode_targeting_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Require allocation-owner workloads and smoke Jobs to be pinned to hybrid."""
    resource = Resource.from_args(args)
    config = args.get_config()
    label = str(config.get("computeTypeLabel") or vocab.COMPUTE_TYPE_LABEL)
    required = str(config.get("requiredComputeType") or vocab.HYBRID)
    forbidden = config_strings(config, "forbiddenComputeTypes", (vocab.AUTO_MODE,))
    resource.not_applicable_if_inputs_hidden(args, "the workloads it renders are checked instead")
    owner = resource.chart_owner
    if owner in {DEVICE_PLUGIN, DRA}:
        values = resource.values
        if values is UNKNOWN:
            args.not_applicable("the chart values are unknown during preview")
            return
        base = values if owner == DEVICE_PLUGIN else as_dict(values.get("kubeletPlugin"))
        key = "nodeSelector" if owner == DEVICE_PLUGIN else "kubeletPlugin.nodeSelector"
        verdict, detail = pinning(base.get("nodeSelector"), base.get("affinity"), label, required, forbidden)
        if verdict in {"auto", "unpinned"}:
            subject = f"{resource.describe} values {key}"
            path = _COHORT_SELECTOR_PATH if resource.stamped else subject
            message = _targeting_message(subject, verdict, detail, path, label, required)
            report_violation(message, None)
        return
    pod = resource.pod_spec
    if pod is None:
        args.not_applicable("not a workload with a pod template")
        return
    owner_label = _rendered_owner(resource)
    smoke = resource.label(vocab.SMOKE_JOB_LABEL)
    if owner_label is UNKNOWN or smoke is UNKNOWN or pod is UNKNOWN:
        args.not_applicable("labels or pod spec unknown during preview")
        return
    if owner_label is None and not resource.is_smoke_job:
        args.not_applicable("not an allocation-owner workload or smoke Job")
        return
    if resource.is_nfd:
        args.not_applicable(
            "Node Feature Discovery labels nodes, it allocates no GPU (single-allocation-owner checks it has one owner)"
        )
        return
    verdict, detail = pinning(pod.get("nodeSelector"), pod.get("affinity"), label, required, forbidden)
    if verdict in {"auto", "unpinned"}:
        field_path = ".".join((*POD_SPEC_PATHS[resource.kind], "nodeSelector"))
        default = _COHORT_SELECTOR_PATH if resource.stamped else f"{field_path} of {resource.describe}"
        path = resource.config_path(".nodeSelector", default)
        message = _targeting_message(resource.describe, verdict, detail, path, label, required)
        report_violation(message, None)


NO_AUTO_MODE_TARGETING = ResourceValidationPolicy(
    name="no-auto-mode-targeting",
    description=(
        "Allocation-owner workloads and smoke Jobs are pinned to "
        "eks.amazonaws.com/compute-type=hybrid and never reach EKS Auto Mode nodes."
    ),
    validate=fail_closed(reads_pods_and_helm)(no_auto_mode_targeting_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(
        properties={
            "computeTypeLabel": {
                "type": "string",
                "default": vocab.COMPUTE_TYPE_LABEL,
                "description": "Node label that tells hybrid from Auto Mode nodes.",
            },
            "requiredComputeType": {
                "type": "string",
                "default": vocab.HYBRID,
                "description": "The value every allocation workload must require.",
            },
            "forbiddenComputeTypes": string_list(
                [vocab.AUTO_MODE], "Values a NotIn term must exclude to count as pinned."
            ),
        }
    ),
    remediation_steps=(
        f"Put eks.amazonaws.com/compute-type: hybrid in {_COHORT_SELECTOR_PATH} (the "
        "device plugin's nodeSelector, the DRA kubeletPlugin.nodeSelector and the "
        "smoke Job nodeSelector derive from it). Labels are scheduling inputs, not a "
        "security boundary."
    ),
    url="https://docs.aws.amazon.com/eks/latest/userguide/automode.html",
    tags=["targeting", "auto-mode"],
)


# --------------------------------------------------------------------------- affinity


def affinity_problem(affinity: Any, labels: Sequence[str], *, present: bool, merged: bool) -> Any:
    """Describe how an affinity lost the GPU-discovery terms; None if it kept them.

    ``merged`` is true for chart values: Helm deep-merges a values map into the
    chart default (only ``null`` removes it, and a given list replaces the default
    list), so a map without ``nodeSelectorTerms`` keeps the default terms.
    """
    if not present:
        return "the pod template has no affinity, so the chart's GPU-discovery affinity was removed"
    if affinity is None:
        return "affinity: null removes the chart's GPU-discovery affinity"
    if affinity is UNKNOWN:
        return UNKNOWN
    if not isinstance(affinity, dict) or not affinity:
        return f"affinity {show(affinity)} is empty"
    terms = required_node_terms(affinity)
    if terms is UNKNOWN:
        return UNKNOWN
    if terms is None and merged:
        return None
    if not terms:
        return f"affinity {compact_json(affinity)} has no required nodeAffinity nodeSelectorTerms"
    for index, term in enumerate(terms):
        if contains_unknown(term):
            return UNKNOWN
        expressions = as_list(as_dict(term).get("matchExpressions"))
        if not any(
            as_dict(e).get("key") in labels and one_of(as_dict(e).get("operator"), ("In", "Exists"))
            for e in expressions
        ):
            return f"required nodeAffinity term {index} {compact_json(term)} has none of the GPU-discovery labels"
    return None


def _affinity_message(subject: str, problem: str, path: str) -> str:
    return (
        f"{subject}: {problem}. Without those OR'ed terms "
        f"({', '.join(GPU_DISCOVERY_LABELS[i] for i in (0, 3, 4))}) the GPU "
        "allocator also lands on nodes without an NVIDIA GPU. Keep the chart's default "
        f"affinity (remove the override from {path}); if no node matches, label the "
        "hosts through the approved NFD/GFD or inventory process (e.g. "
        "nvidia.com/gpu.present=true) instead of removing the affinity."
    )


def gpu_discovery_affinity_kept_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse device-plugin/DRA values and DaemonSets that drop the GPU affinity."""
    resource = Resource.from_args(args)
    labels = config_strings(args.get_config(), "discoveryLabels", GPU_DISCOVERY_LABELS)
    resource.not_applicable_if_inputs_hidden(args, "the DaemonSets it renders are checked instead")
    owner = resource.chart_owner
    path = f"{PROJECT}:cohorts[i] chart values"
    if owner in {DEVICE_PLUGIN, DRA}:
        values = resource.values
        if values is UNKNOWN:
            args.not_applicable("the chart values are unknown during preview")
            return
        base = values if owner == DEVICE_PLUGIN else values.get("kubeletPlugin")
        if base is UNKNOWN:
            args.not_applicable("the chart values are unknown during preview")
            return
        base = as_dict(base)
        if "affinity" not in base:
            return
        problem = affinity_problem(base["affinity"], labels, present=True, merged=True)
        if isinstance(problem, str):
            key = "affinity" if owner == DEVICE_PLUGIN else "kubeletPlugin.affinity"
            subject = f"{resource.describe} values {key}"
            report_violation(_affinity_message(subject, problem, path if resource.stamped else subject), None)
        return
    if resource.kind != "DaemonSet" or not resource.is_kubernetes:
        args.not_applicable("not a device-plugin/DRA Chart or DaemonSet")
        return
    owner_label = _rendered_owner(resource)
    if owner_label is UNKNOWN:
        args.not_applicable("labels unknown during preview")
        return
    if owner_label not in {DEVICE_PLUGIN, DRA}:
        args.not_applicable("not a device-plugin or DRA DaemonSet")
        return
    if resource.is_nfd or NFD_NAME in (resource.k8s_name or ""):
        args.not_applicable("the NFD worker runs on every node by design")
        return
    pod = resource.pod_spec
    if not isinstance(pod, dict):
        args.not_applicable("pod spec unknown during preview")
        return
    problem = affinity_problem(pod.get("affinity"), labels, present="affinity" in pod, merged=False)
    if isinstance(problem, str):
        default = path if resource.stamped else f"spec.template.spec.affinity of {resource.describe}"
        report_violation(
            _affinity_message(resource.describe, problem, resource.config_path(" chart values", default)), None
        )


GPU_DISCOVERY_AFFINITY_KEPT = ResourceValidationPolicy(
    name="gpu-discovery-affinity-kept",
    description=(
        "Rendered device-plugin and DRA DaemonSets (and Release values) keep the chart's "
        "GPU-discovery node affinity instead of removing it to get Pods running."
    ),
    validate=fail_closed(reads_pods_and_helm)(gpu_discovery_affinity_kept_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "discoveryLabels": string_list(
                list(GPU_DISCOVERY_LABELS), "Node labels that count as GPU discovery in a term."
            )
        }
    ),
    remediation_steps=(
        "Remove the affinity override (affinity / kubeletPlugin.affinity) from the "
        f"chart values of {PROJECT}:cohorts[i]; if nothing schedules, label the GPU "
        "hosts through the approved NFD/GFD or host-inventory process."
    ),
    url=DEVICE_PLUGIN_KIND.docs_url,
    tags=["targeting", "discovery"],
)

POLICIES: Final = (NO_AUTO_MODE_TARGETING, GPU_DISCOVERY_AFFINITY_KEPT)
