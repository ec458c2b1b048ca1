"""Targeting policies: stay on Hybrid GPU nodes, keep the charts' GPU affinity.

Seed: "The standalone examples below target only the identified Hybrid GPU nodes; do not
install duplicate allocation managers on Auto Mode or other GPU nodes" and "If no node
matches, fix the inventory/labels; do not remove affinity just to obtain running Pods."
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ..vocab import labels as vocab
from ..vocab.labels import DEVICE_PLUGIN, DRA, PROJECT
from ..vocab.owners import DEVICE_PLUGIN_KIND, owner_kind, owner_of_app_label
from ..vocab.selectors import Requirement, alternative_admits
from .charts import NFD_NAME
from .declare import resource_policy
from .fail_closed import fail_closed, reads_pods_and_helm
from .findings import LABELS_NOTE, PREVIEW_AGAIN
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
from .shapes import APP_NAME_LABEL, POD_SPEC_PATHS, containers, node_selection, pod_claims, required_node_terms

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


def _show_term(requirements: tuple[Requirement, ...]) -> str:
    """One required term as the manifest writes it (what the scheduler read of it)."""
    expressions = [
        {
            "key": key,
            "operator": operator,
            **({"values": list(values)} if values or operator in {"In", "NotIn"} else {}),
        }
        for key, operator, values in requirements
    ]
    return compact_json({"matchExpressions": expressions})


def _aims_at(alternative: tuple[Requirement, ...], label: str, forbidden: Sequence[str]) -> bool:
    """The alternative explicitly asks for a forbidden compute type, or for Karpenter capacity that may be Auto Mode.

    Auto Mode nodes carry ``eks.amazonaws.com/compute-type: auto`` and a ``karpenter.sh/nodepool`` label (its built-in
    NodePools); a term that requires either (``In``; ``Exists`` for the NodePool) and still admits a forbidden compute
    type lands there.
    """
    if not forbidden or not alternative_admits(alternative, label, forbidden):
        return False
    for key, operator, values in alternative:
        if key == label and operator == "In" and set(values) & set(forbidden):
            return True
        if key == vocab.KARPENTER_NODEPOOL_LABEL and operator in {"In", "Exists"}:
            return True
    return False


def _alternative_pinning(
    alternative: tuple[Requirement, ...], label: str, required: str, forbidden: Sequence[str]
) -> str:
    """Classify one alternative (nodeSelector AND one required term): pinned, auto or unpinned.

    Pinned: it requires ``label`` ``In`` the required value only, or excludes every forbidden value with ``NotIn``
    (AWS's own Auto Mode exclusion). Auto: it admits a forbidden compute type and explicitly asks for it or for
    Karpenter capacity (:func:`_aims_at`).
    """
    for key, operator, values in alternative:
        if key != label:
            continue
        if operator == "In" and values and all(v == required for v in values):
            return "pinned"
        if operator == "NotIn" and forbidden and set(forbidden) <= set(values):
            return "pinned"
    return "auto" if _aims_at(alternative, label, forbidden) else "unpinned"


def pinning(
    node_selector: Any,
    affinity: Any,
    label: str = vocab.COMPUTE_TYPE_LABEL,
    required: str = vocab.HYBRID,
    forbidden: Sequence[str] = (vocab.AUTO_MODE,),
) -> tuple[str, str]:
    """Decide whether a placement is pinned to ``label=required``, reading it as the scheduler does.

    Returns ``(verdict, detail)``; verdict is ``pinned``, ``unknown`` (preview), ``auto`` (some alternative
    explicitly reaches Auto Mode: a forbidden compute type, or a ``karpenter.sh/nodepool`` requirement that admits
    one) or ``unpinned``. The placement is :func:`.shapes.node_selection`'s: the nodeSelector AND one of the required
    nodeAffinity terms (ORed), so every alternative must be pinned. The charts' OR'ed GPU-discovery terms do not pin
    compute-type on their own.
    """
    if node_selector is UNKNOWN:
        return "unknown", "nodeSelector"
    placement = node_selection(node_selector, affinity)
    if placement is None:
        return "unknown", "nodeSelector or affinity"
    selected = placement.node_selector.get(label)
    if selected == required:
        return "pinned", ""
    selector_text = (
        f"nodeSelector {label}={show(selected)}" if selected is not None else f"nodeSelector without {label}"
    )
    if selected in forbidden:
        return "auto", f"nodeSelector {label}={show(selected)}"
    alternatives = placement.alternatives()
    verdicts = [_alternative_pinning(a, label, required, forbidden) for a in alternatives]
    if all(v == "pinned" for v in verdicts):
        return "pinned", ""
    if placement.terms is None:
        return verdicts[0], f"{selector_text} and no required nodeAffinity on {label}"
    loose = next(i for i, v in enumerate(verdicts) if v == "auto") if "auto" in verdicts else verdicts.index("unpinned")
    verdict = "auto" if "auto" in verdicts else "unpinned"
    base = len(placement.selector)
    shown = _show_term(alternatives[loose][base:])
    reach = "that reaches EKS Auto Mode" if verdicts[loose] == "auto" else f"that does not require {label}={required}"
    return verdict, f"{selector_text} and required nodeAffinity term {loose} {shown} {reach}"


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
        if _claims(pod):
            _judge_claim_placement(resource, pod, label, required, forbidden, report_violation)
            return
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


def _claims(pod: dict[str, Any]) -> list[str]:
    """The DRA claims a pod asks for: its ``resourceClaims`` names, else the claims its containers list."""
    named = [str(as_dict(c).get("name")) for c in pod_claims(pod) if isinstance(c, dict)]
    listed = [str(as_dict(c).get("name")) for c in containers(pod) for c in c.claims if isinstance(c, dict)]
    return sorted(set(named or listed))


def _judge_claim_placement(
    resource: Resource,
    pod: dict[str, Any],
    label: str,
    required: str,
    forbidden: Sequence[str],
    report_violation: ReportViolation,
) -> None:
    """A workload of any kind whose DRA claim may be scheduled where no DRA driver runs: EKS Auto Mode.

    The seed: "The NVIDIA DRA driver is not supported with EKS Auto Mode, which already manages its GPU device
    plugin". Where the pod may land is the scheduler's reading (:func:`.shapes.node_selection`); a claim pod is
    refused when some alternative aims at Auto Mode (``compute-type`` ``auto``, or Karpenter's NodePool label),
    not merely for leaving compute-type open: the scheduler only binds it where a driver published devices.
    """
    verdict, detail = pinning(pod.get("nodeSelector"), pod.get("affinity"), label, required, forbidden)
    if verdict != "auto":
        return
    base = ".".join(POD_SPEC_PATHS[resource.kind])
    fields = f"{base}.nodeSelector / {base}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    message = (
        f"{resource.describe} claims a GPU through DRA ({', '.join(_claims(pod))}) but its node selection "
        f"({fields}) reaches EKS Auto Mode: {detail}. The NVIDIA DRA driver is not supported on Auto Mode (AWS "
        "manages its own device plugin there), so the claim is never allocated on those nodes, or a second "
        "allocator gets installed to serve it. Remove the Auto Mode term and pin the pod to the DRA cohort "
        f"({label}: {required} and the DRA cohort label, e.g. {vocab.DEFAULT_COHORT_LABEL_KEY}: dra) in "
        f"{resource.manifest_path}; {PREVIEW_AGAIN}. {LABELS_NOTE}"
    )
    report_violation(message, None)


NO_AUTO_MODE_TARGETING = resource_policy(
    "no-auto-mode-targeting",
    (
        "Allocation-owner workloads and smoke Jobs are pinned to "
        "eks.amazonaws.com/compute-type=hybrid, and no workload's DRA claim is aimed at EKS Auto Mode nodes."
    ),
    fail_closed(reads_pods_and_helm)(no_auto_mode_targeting_validator),
    severity=Severity.CRITICAL,
    remediation=(
        f"Put eks.amazonaws.com/compute-type: hybrid in {_COHORT_SELECTOR_PATH} (the "
        "device plugin's nodeSelector, the DRA kubeletPlugin.nodeSelector and the "
        "smoke Job nodeSelector derive from it). Labels are scheduling inputs, not a "
        "security boundary."
    ),
    url="https://docs.aws.amazon.com/eks/latest/userguide/automode.html",
    tags=["targeting", "auto-mode"],
    config={
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
        "forbiddenComputeTypes": string_list([vocab.AUTO_MODE], "Values a NotIn term must exclude to count as pinned."),
    },
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


GPU_DISCOVERY_AFFINITY_KEPT = resource_policy(
    "gpu-discovery-affinity-kept",
    (
        "Rendered device-plugin and DRA DaemonSets (and Release values) keep the chart's "
        "GPU-discovery node affinity instead of removing it to get Pods running."
    ),
    fail_closed(reads_pods_and_helm)(gpu_discovery_affinity_kept_validator),
    severity=Severity.HIGH,
    remediation=(
        "Remove the affinity override (affinity / kubeletPlugin.affinity) from the "
        f"chart values of {PROJECT}:cohorts[i]; if nothing schedules, label the GPU "
        "hosts through the approved NFD/GFD or host-inventory process."
    ),
    url=DEVICE_PLUGIN_KIND.docs_url,
    tags=["targeting", "discovery"],
    config={
        "discoveryLabels": string_list(list(GPU_DISCOVERY_LABELS), "Node labels that count as GPU discovery in a term.")
    },
)

POLICIES: Final = (NO_AUTO_MODE_TARGETING, GPU_DISCOVERY_AFFINITY_KEPT)
