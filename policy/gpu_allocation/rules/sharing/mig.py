"""mig-strategy-consistent: nvidia.com/mig-* requests need the mixed strategy, and the profile exists on the GPU.

Seed: "changing a Pod request to nvidia.com/mig-1g.5gb does not create the MIG instance. Prepare the actual MIG
geometry and the plugin's appropriate strategy first." The profile tables are the vocabulary's
(:mod:`...vocab.gpu_models`), the ones the program validates its config against.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.cel import profile_literals, selects_mig
from ...vocab.dra_attributes import DRIVER_DOMAIN
from ...vocab.gpu_models import GPU_PRODUCT_LABEL, MIG_PROFILES, normalize_gpu_model
from ...vocab.labels import DRA, GPU_OPERATOR, PROJECT
from ...vocab.mig import RESOURCE_PREFIX, normalize_profile, tabulated_profiles
from ...vocab.selectors import INSIDE, Placement, cohort_membership, cohort_selector, confined_to, label_values
from ..declare import stack_policy
from ..dra_requests import CLAIM_KINDS, MIG_CLASS, ClaimIndex, DeviceRequest, claim_requests
from ..findings import CANNOT_JUDGE, PREVIEW_AGAIN, report_findings
from ..ledger import Ledger
from ..operator_crs import cr_flag, cr_mode
from ..props import UNKNOWN, config_mapping, dig, one_of, show, string_map
from ..resource import Resource
from ..shapes import pod_placement
from ..stack_view import INSTALL_KINDS, StackView, not_applicable_unless_unreadable
from .cohorts import (
    PluginCohort,
    cohort_selectors,
    ledger_sharing,
    plugin_cohorts,
    reads_sharing,
    workload_requests,
)


def _only_value(placement: Placement, key: str) -> str | None:
    """The one value of a label every node the placement admits carries (nodeSelector or ``In`` terms), else None."""
    values = label_values(placement, key)
    if values is None or len(values) != 1:
        return None
    return next(iter(values))


def _maybe_mixed(cohort: PluginCohort) -> bool:
    """The cohort's plugin may advertise MIG profiles (unknown during preview counts as may)."""
    strategy = cohort.strategy.value
    return strategy == "mixed" or strategy is UNKNOWN or cohort.sharing == "mig-mixed"


def _operator_cohorts(view: StackView, ledger: Ledger | None) -> list[tuple[str, dict[str, str] | None, bool, Any]]:
    """(cohort, the part of its selector that tells it apart (``vocab.selectors.cohort_selector``), mixed, gpuModel)."""
    operators = view.by_owner(GPU_OPERATOR)
    if not operators or ledger is None or not ledger.known:
        return []
    strategy = operators[0].setting("mig", "strategy")
    result = []
    selectors = cohort_selectors(view, ledger)
    for name, entry in ledger.cohorts.items():
        if entry.get("owner") != GPU_OPERATOR:
            continue
        sharing, model = ledger_sharing(ledger, [name])
        mixed = strategy == "mixed" or sharing == "mig-mixed"
        selector = string_map(entry.get("nodeSelector"))
        cohort = None if selector is None else cohort_selector(selector, [s for s in selectors if s != selector])
        result.append((name, cohort, mixed, model))
    return result


def _operator_mixed(view: StackView) -> bool:
    """Some GPU Operator of the stack runs its device plugin with the mixed strategy (UNKNOWN counts as may).

    The chart prints ``mig.strategy`` into the ClusterPolicy (``{{ if .Values.mig.strategy }}strategy: …`` in
    gpu-operator ``templates/clusterpolicy.yaml``, chart default ``single``) and the Operator hands
    ``spec.mig.strategy`` to its device plugin as ``MIG_STRATEGY``; read from the Release values, the rendered
    ClusterPolicy, or a ClusterPolicy object of its own. No ledger is needed: any stack can hold an Operator.
    """
    for operator in view.by_owner(GPU_OPERATOR):
        mode = operator.mode
        if not (mode is UNKNOWN or one_of(mode, ("cluster-policy", "both"))):
            continue
        if operator.operand_enabled("devicePlugin") is False:
            continue
        strategy = operator.setting("mig", "strategy")
        if strategy == "mixed" or strategy is UNKNOWN:
            return True
    return any(
        cr_mode(r) == "cluster-policy"
        and view.installation_of(r) is None
        and cr_flag(r, "devicePlugin") is not False
        and _mixed_or_unknown(dig(r.props, "spec", "mig", "strategy"))
        for r in view.resources
    )


def _mixed_or_unknown(value: Any) -> bool:
    return value == "mixed" or value is UNKNOWN


def _check_plugin_strategies(cohorts: list[PluginCohort], report: ReportViolation) -> None:
    expected_by_sharing = {"mig-mixed": "mixed", "mig-single": "single", "mig-none": "none"}
    for cohort in cohorts:
        setting = cohort.strategy
        strategy = setting.value
        if strategy is UNKNOWN or cohort.sharing is None:
            continue
        sharing = cohort.sharing
        expected = expected_by_sharing.get(sharing) if isinstance(sharing, str) else None
        path = cohort.install.config_path(".sharing.migStrategy", f"{PROJECT}:cohorts[i].sharing.migStrategy")
        if expected is not None and strategy != expected:
            report(
                f"{setting.subject} is "
                f"{show(strategy)} but the cohort is declared {cohort.sharing}, so the "
                f"plugin advertises the wrong MIG resources. Set {path} to {expected} "
                "after preparing the MIG geometry.",
                cohort.install.resource.urn,
            )
        elif expected is None and one_of(strategy, ("single", "mixed")):
            report(
                f"{setting.subject} is "
                f"{show(strategy)} but the cohort is declared {cohort.sharing}, not "
                f"MIG. Set {path} to match the prepared GPUs (none unless MIG is "
                "enabled).",
                cohort.install.resource.urn,
            )


def _dra_cohort_models(view: StackView, ledger: Ledger | None, resource: Resource, pod: dict[str, Any]) -> list[Any]:
    """The GPU-model names that may apply to a DRA workload: its cohorts' (config ``gpuModels`` keys, ledger)."""
    placement = pod_placement(pod)
    names = [resource.cohort] if resource.cohort else []
    for install in view.by_owner(DRA):
        selector = install.selector
        if placement is not None and isinstance(selector, dict) and confined_to(placement, selector):
            names += install.cohorts
    if ledger is not None and ledger.known and placement is not None:
        for name, entry in ledger.cohorts.items():
            selector = string_map(entry.get("nodeSelector"))
            if entry.get("owner") in {DRA, GPU_OPERATOR} and selector and confined_to(placement, selector):
                names.append(name)
    return names


def _check_dra_mig(
    view: StackView,
    ledger: Ledger | None,
    models: dict[str, str],
    default_model: Any,
    report: ReportViolation,
) -> bool:
    """A DRA claim on a MIG DeviceClass asks for a profile the cohort's GPU model has (read literally from its CEL).

    The DRA driver publishes each MIG instance as a device of ``type`` ``mig`` with a ``profile`` attribute
    (``CommonAttributesMig`` in dra-driver-nvidia-gpu ``cmd/gpu-kubelet-plugin/mig.go``); the scheduler's structured
    allocator gives a request only a device every selector accepts, so a profile the GPU model does not have is never
    allocated. A profile the selectors name in any other form than ``profile == "<literal>"`` cannot be judged here:
    refused (fail closed). True when some workload's claim asks for a MIG device.
    """
    index = ClaimIndex.of(view.resources)
    if not index.claims:
        return False
    judged = False
    for resource, pod in view.workloads():
        claims = list(index.pod_claims(resource, pod))
        if not claims:
            continue
        cohorts = _dra_cohort_models(view, ledger, resource, pod)
        selector = string_map(pod.get("nodeSelector")) or {}
        sources = [
            *(models.get(n) for n in cohorts),
            selector.get(GPU_PRODUCT_LABEL),
            *(ledger_sharing(ledger, [n])[1] for n in cohorts),
            default_model,
        ]
        model = next((m for m in map(normalize_gpu_model, sources) if m is not None), None)
        valid = MIG_PROFILES[model] if model is not None else dict.fromkeys(tabulated_profiles())
        known = f"the {model} profiles" if model is not None else "the profiles of any tabulated GPU"
        for entry, claim in claims:
            for options in claim_requests(claim, index.classes):
                judged = _judge_mig_request(resource, entry, options, valid, known, report) or judged
    return judged


def _judge_mig_request(
    workload: Resource,
    entry: str,
    options: list[DeviceRequest],
    valid: Any,
    known: str,
    report: ReportViolation,
) -> bool:
    """One request (all its firstAvailable options): refused when no option can be met, cannot-judge when unread.

    True when some option asks for a MIG device (the request was this rule's to judge).
    """
    verdicts: list[tuple[str, DeviceRequest, Any]] = []
    for option in options:
        mig = option.device_class == MIG_CLASS or any(selects_mig(e.text) for e in option.expressions)
        if not mig:
            verdicts.append(("not-mig", option, None))
            continue
        unread = None
        profiles: set[str] = set()
        for expression in option.expressions:
            read = profile_literals(expression.text)
            if read is None:
                continue
            if not read[1]:
                unread = expression
            profiles |= read[0]
        if unread is not None:
            verdicts.append(("unread", option, unread))
        elif profiles and not profiles & set(valid):
            verdicts.append(("bad", option, sorted(profiles)))
        else:
            verdicts.append(("ok", option, None))
    mig_asked = any(v != "not-mig" for v, _, _ in verdicts)
    if any(v in {"ok", "not-mig"} for v, _, _ in verdicts):
        return mig_asked
    subject = f"{workload.describe}: claim '{entry}'"
    for verdict, option, detail in verdicts:
        device_class = show(option.device_class)
        request = f"request '{option.name}' of {option.claim.describe} ({option.field}, DeviceClass {device_class})"
        if verdict == "unread":
            report(
                f"{subject}: {request} asks for a MIG device whose profile {detail.subject} {detail.field} does not "
                f'state as device.attributes["{DRIVER_DOMAIN}"].profile == "<profile>" ({show(detail.text)}), '
                f"{CANNOT_JUDGE}. Name the profile literally in {detail.field} of {detail.subject}; {PREVIEW_AGAIN}.",
                option.claim.urn,
            )
        else:
            report(
                f"{subject}: {request} selects MIG profile {', '.join(repr(p) for p in detail)} through its CEL "
                f"selectors, which is not among {known} ({', '.join(sorted(valid))}): the DRA driver publishes no such "
                "MIG device there, so the claim is never allocated and the pod stays Pending. Select a profile of "
                f"the cohort's GPU in the selector of {option.claim.describe} {option.field}.selectors (or set the "
                f"cohort's gpuModel in this policy's gpuModels config if the model is wrong); {PREVIEW_AGAIN}.",
                option.claim.urn,
            )
    return True


def mig_strategy_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Check MIG requests against the plugin strategy and the GPU's profile table."""
    view = StackView.from_args(args, INSTALL_KINDS | CLAIM_KINDS)
    config = args.get_config()
    models = config_mapping(config, "gpuModels")
    default_model = config.get("defaultGpuModel")
    ledger = view.ledger()
    cohorts = plugin_cohorts(view, ledger)
    operator_cohorts = _operator_cohorts(view, ledger)
    requests = [r for r in workload_requests(view) if r[3].startswith(RESOURCE_PREFIX)]
    claims = _check_dra_mig(view, ledger, models, default_model, report_violation)
    if not cohorts and not requests and not claims:
        not_applicable_unless_unreadable(
            args, view, "no device plugin and no nvidia.com/mig-* request", report_violation, reads_sharing
        )
        return
    _check_plugin_strategies(cohorts, report_violation)
    # An unknown strategy (preview) may be mixed: it never causes a refusal.
    any_mixed = (
        any(_maybe_mixed(c) for c in cohorts)
        or any(mixed for _, _, mixed, _ in operator_cohorts)
        or _operator_mixed(view)
    )
    for resource, placement, container, name, _ in requests:
        subject = f"{resource.describe}: container '{container.name}' requests {name}"
        path = resource.manifest_path
        confining = [c for c in cohorts if c.confines(resource, placement)]
        confining_ops = [
            o
            for o in operator_cohorts
            if resource.cohort == o[0] or (o[1] and cohort_membership(placement, o[1])[0] == INSIDE)
        ]
        not_mixed = [c for c in confining if not _maybe_mixed(c)]
        for cohort in not_mixed:
            report_violation(
                f"{subject}, but it only runs on {cohort.title}, whose migStrategy is "
                f"{show(cohort.strategy.value)}: only the mixed strategy "
                "advertises nvidia.com/mig-<profile>, and changing a request does not "
                "create MIG instances. Prepare the MIG geometry, then set "
                f"{PROJECT}:cohorts[i].sharing.migStrategy to mixed, or request "
                f"nvidia.com/gpu ({path}).",
                resource.urn,
            )
        for op_cohort, _, mixed, _ in confining_ops:
            if not mixed:
                report_violation(
                    f"{subject}, but it only runs on the GPU Operator cohort '{op_cohort}', "
                    "whose mig.strategy is not mixed, so nothing advertises that "
                    "resource. Prepare the MIG geometry and set "
                    f"{PROJECT}:cohorts[i].sharing.migStrategy to mixed ({path}).",
                    resource.urn,
                )
        if not confining and not confining_ops and not any_mixed:
            report_violation(
                f"{subject}, but no device plugin or Operator in this stack uses the "
                "mixed MIG strategy, so nothing advertises that resource. Prepare the "
                "MIG geometry and set "
                f"{PROJECT}:cohorts[i].sharing.migStrategy to mixed ({path}).",
                resource.urn,
            )
        model_source = (
            [models.get(n) for c in confining for n in c.names]
            + [models.get(o[0]) for o in confining_ops]
            + [_only_value(placement, GPU_PRODUCT_LABEL)]
            + [c.gpu_model for c in confining]
            + [o[3] for o in confining_ops]
            + [default_model]
        )
        model = next((m for m in map(normalize_gpu_model, model_source) if m is not None), None)
        profile = normalize_profile(name)
        valid = MIG_PROFILES[model] if model is not None else tabulated_profiles()
        if profile not in valid:
            known = f"the {model} profiles" if model is not None else "any tabulated GPU"
            report_violation(
                f"{subject}: MIG profile '{profile}' is not among {known} "
                f"({', '.join(sorted(valid))}); profiles are SKU-specific (e.g. "
                "4g.40gb exists on A100 80GB, not 40GB). Request a profile of the "
                f"actual GPU and set {PROJECT}:cohorts[i].sharing.gpuModel / "
                f"migProfile to match ({path}).",
                resource.urn,
            )
    report_findings(view.problems(reads_sharing), report_violation)


MIG_STRATEGY_CONSISTENT = stack_policy(
    "mig-strategy-consistent",
    (
        "nvidia.com/mig-* requests need a device plugin with the mixed MIG strategy, "
        "and the profile exists for the cohort's GPU model."
    ),
    mig_strategy_consistent_validator,
    severity=Severity.MEDIUM,
    remediation=(
        "Prepare the MIG geometry first, then set "
        f"{PROJECT}:cohorts[i].sharing.mode: mig with .sharing.migStrategy: mixed, "
        ".sharing.gpuModel and .sharing.migProfile; request a profile that exists on "
        "that GPU (A100 40GB: 1g.5gb ... 7g.40gb; A100/H100 80GB: 1g.10gb ... 7g.80gb; "
        "H200: 1g.18gb ... 7g.141gb)."
    ),
    url="https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html",
    tags=["workloads", "mig"],
    config={
        "gpuModels": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "default": {},
            "description": 'GPU model per cohort name, e.g. {"a": "A100-40GB"}.',
        },
        "defaultGpuModel": {
            "type": "string",
            "enum": sorted(MIG_PROFILES),
            "description": "GPU model when neither config nor labels say.",
        },
    },
)
