"""Driver and chart policies: who owns the driver, pinned charts, Operator hooks kept.

Seed: "driver.enabled=false is appropriate only if the host driver is already
verified", "This path assumes the host driver root is / ... An Operator-installed driver
typically uses a different root; do not copy this value into that deployment", the
reviewed chart versions ("verify the desired upgrade path"), and "For Operator-managed
DRA, follow its ordered Helm hook/finalizer teardown. Do not use helm uninstall
--no-hooks". STYLE.md "Avoid" 5: floating chart versions.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from ..vocab import grammar
from ..vocab import labels as vocab
from .installations import (
    Installation,
    Ledger,
    StackView,
    not_applicable_unless_unreadable,
    reads_gpu_objects,
)
from .props import (
    UNKNOWN,
    as_bool,
    config_bool,
    config_strings,
    show,
)
from .readers import helm_flag, report_findings
from .shapes import (
    CHART_TYPES,
    CHART_VERSION_PATHS,
    DRA,
    GPU_OPERATOR,
    PROJECT,
    RELEASE_TYPE,
    Resource,
    chart_inputs_hidden,
    classify_chart,
    fail_closed,
    reads_pods_and_helm,
)

_VERIFIED_KEY: Final = "hostDriverVerified"
_DRIVER_PATH: Final = f"{PROJECT}:operator.driverEnabled"


def _verified_path(cohort: str) -> str:
    return f"{PROJECT}:cohorts[i].{_VERIFIED_KEY} (cohort '{cohort}')"


def _operator_cohort_verification(ledger: Ledger | None, verified_config: tuple[str, ...]) -> dict[str, Any]:
    """Operator cohort -> True/False/None (None: the stack does not say)."""
    if ledger is None or not ledger.known:
        return {}
    result: dict[str, Any] = {}
    for name, entry in sorted(ledger.cohorts.items()):
        if entry.get("owner") != GPU_OPERATOR:
            continue
        if name in verified_config:
            result[name] = True
            continue
        recorded = entry.get(_VERIFIED_KEY)
        result[name] = recorded if isinstance(recorded, bool) else None
    return result


def _driver_disabled(operator: Installation) -> bool:
    return operator.operand_enabled("driver") is False


def _driver_managed(operator: Installation) -> bool:
    if operator.values is UNKNOWN:
        return False
    return operator.operand_enabled("driver") is True


def driver_ownership_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse an unverified host driver, and DRA root / next to an Operator driver."""
    view = StackView.from_args(args)
    operators = view.by_owner(GPU_OPERATOR)
    dra_installs = view.by_owner(DRA)
    if not operators:
        not_applicable_unless_unreadable(args, view, "the stack installs no GPU Operator", report_violation)
        return
    verified_config = config_strings(args.get_config(), "verifiedCohorts", ())
    verification = _operator_cohort_verification(view.ledger(), verified_config)
    for operator in operators:
        if not _driver_disabled(operator):
            continue
        for cohort, verified in verification.items():
            if verified is not False:
                continue
            report_violation(
                f"{operator.resource.describe} sets driver.enabled=false but cohort "
                f"'{cohort}' declares {_VERIFIED_KEY}: false. Without an Operator "
                "driver the GPUs need a verified host driver (being on premises does "
                f"not imply one exists). Verify it with nvidia-smi and set "
                f"{_verified_path(cohort)} to true, or set {_DRIVER_PATH} to true.",
                operator.resource.urn,
            )
    _check_driver_root(operators, dra_installs, report_violation)
    report_findings(view.problems(reads_gpu_objects), report_violation)


def _check_driver_root(
    operators: list[Installation], dra_installs: list[Installation], report_violation: ReportViolation
) -> None:
    managing = [o for o in operators if _driver_managed(o)]
    if not managing:
        return
    for install in dra_installs:
        root = install.driver_root()
        if root.value != "/":
            continue
        report_violation(
            f"{root.subject} is {show(root.value)}"
            f"{' (chart default)' if root.defaulted else ''} while "
            f"{managing[0].resource.describe} manages the driver (driver.enabled is "
            f"{show(managing[0].setting('driver', 'enabled'))}, default true). An "
            "Operator-installed driver lives under /run/nvidia/driver, so the DRA "
            "plugin would prepare devices against a host driver that is not the one in "
            f"use. Set {_DRIVER_PATH} to false with a verified host driver, or keep the "
            "DRA cohort out of an Operator-managed driver deployment.",
            install.resource.urn,
        )


def driver_verification_declared_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Ask for a review when driver.enabled=false and verification is not declared."""
    view = StackView.from_args(args)
    operators = [o for o in view.by_owner(GPU_OPERATOR) if _driver_disabled(o)]
    if not operators:
        not_applicable_unless_unreadable(args, view, "no GPU Operator with driver.enabled=false", report_violation)
        return
    verified_config = config_strings(args.get_config(), "verifiedCohorts", ())
    verification = _operator_cohort_verification(view.ledger(), verified_config)
    unknown = sorted(c for c, v in verification.items() if v is None)
    if verification and not unknown:
        return
    cohorts = ", ".join(f"'{c}'" for c in unknown) or "the Operator cohort"
    for operator in operators:
        report_violation(
            f"{operator.resource.describe} sets driver.enabled=false, but the stack "
            f"does not show whether {cohorts} has a verified host driver (no "
            f"{_VERIFIED_KEY} in the ledger, not in verifiedCohorts). Review: verify "
            "the driver and toolkit on every host (nvidia-smi), then set "
            f"{PROJECT}:cohorts[i].{_VERIFIED_KEY} to true or list the cohort in this "
            "policy's verifiedCohorts.",
            operator.resource.urn,
        )


# --------------------------------------------------------------------------- versions

_ARCHIVE_RE: Final = re.compile(r"-v?\d+\.\d+\.\d+[^/]*\.tgz$")


def version_problem(chart: Any, version: Any, *, allow_prerelease: bool) -> Any:
    """Why a chart version is not an exact pin; None if it is; UNKNOWN in preview."""
    if version is UNKNOWN or chart is UNKNOWN:
        return UNKNOWN
    if version is None or version == "":
        if isinstance(chart, str) and _ARCHIVE_RE.search(chart):
            return None
        return "is not set, so Helm installs whatever is latest"
    if not isinstance(version, str):
        return "is not a version string"
    match = grammar.EXACT_VERSION.fullmatch(version)
    if match is None:
        return "is a range or tag, not an exact version (no ^, ~, >, *, x, latest)"
    if match.group(1) and not allow_prerelease:
        return "is a pre-release"
    return None


def chart_version_pinned_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse Helm charts without an exact version: Release inputs, and the chart stamp of rendered objects."""
    resource = Resource.from_args(args)
    if resource.inputs_hidden:
        args.not_applicable(
            chart_inputs_hidden(
                f"the version is checked on the {vocab.CHART_ANNOTATION} annotation of every object it renders"
            )
        )
        return
    if resource.is_helm:
        chart = resource.props.get("chart")
        version = resource.props.get("version")
        subject = f"{resource.describe}: chart {show(chart)} version {show(version)}"
        owner = resource.chart_owner
    else:
        stamp = resource.chart_stamp
        if stamp is None:
            args.not_applicable(f"not a Helm Chart or Release, and no {vocab.CHART_ANNOTATION} annotation")
            return
        if stamp is UNKNOWN:
            args.not_applicable("the chart annotation is unknown during preview")
            return
        chart, version = stamp
        rendered_by = f" (rendered by Chart '{resource.parent_name}')" if resource.rendered_by_chart else ""
        subject = (
            f"{resource.describe}{rendered_by}: annotation {vocab.CHART_ANNOTATION} says chart {show(chart)} "
            f"version {show(version)}"
        )
        owner = classify_chart(chart)
    allow_prerelease = config_bool(args.get_config(), "allowPrerelease", True)
    problem = version_problem(chart, version, allow_prerelease=allow_prerelease)
    if problem is UNKNOWN:
        args.not_applicable("the chart version is unknown during preview")
        return
    if problem is None:
        return
    path = CHART_VERSION_PATHS.get(owner or "", "the version input of this chart")
    report_violation(
        f"{subject} {problem}. A floating version changes the installed allocator without review. Set "
        f"{path} to an exact reviewed version (e.g. 0.20.0, 0.5.0, v26.7.0).",
        None,
    )


# --------------------------------------------------------------------------- hooks

_HOOK_OPTIONS: Final = {
    "disableCRDHooks": "skips the Operator's CRD hooks (--no-crd-hook)",
    "disableWebhooks": "prevents every Helm hook from running (--no-hooks)",
    "skipCrds": "skips the CRDs the hooks upgrade and clean up (--skip-crds)",
}


def operator_hooks_kept_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse hook bypasses on the GPU Operator release."""
    resource = Resource.from_args(args)
    fix = (
        "The Operator's pre-delete cleanup-gpucluster/cleanup-crd and pre-upgrade "
        "upgrade-crd hooks drain finalizers and upgrade CRDs in order; the guide forbids "
        "--no-hooks. Install it as helm.v3.Release with hooks on"
    )
    if resource.inputs_hidden:
        args.not_applicable(chart_inputs_hidden("a GPU Operator it renders is refused on its workloads"))
        return
    if resource.chart_owner != GPU_OPERATOR:
        if resource.rendered_by_chart and _renders_operator(resource):
            report_violation(
                f"{resource.describe} is a GPU Operator workload rendered by Chart '{resource.parent_name}' "
                f"({resource.parent_type}), which installs the chart without its hooks. {fix} "
                f"({PROJECT}:operator.mode selects the mode, not the installer).",
                None,
            )
            return
        args.not_applicable("not the GPU Operator chart")
        return
    subject = resource.describe
    if resource.resource_type in CHART_TYPES:
        report_violation(
            f"{subject} installs the GPU Operator with {resource.resource_type}, which "
            f"renders the chart without hooks. {fix} "
            f"({PROJECT}:operator.mode selects the mode, not the installer).",
            None,
        )
        return
    if resource.resource_type != RELEASE_TYPE:
        args.not_applicable("not a Helm Release")
        return
    forbidden = config_strings(args.get_config(), "forbiddenOptions", tuple(_HOOK_OPTIONS))
    for option in forbidden:
        value = as_bool(resource.props.get(option))
        if value is True:
            effect = _HOOK_OPTIONS.get(option, "bypasses the Operator's hooks")
            report_violation(
                f"{subject} sets {option}: true, which {effect}. {fix}: remove {option} from the Operator Release.",
                None,
            )
    # `{{ if .Values.operator.upgradeCRD }}`: Helm truthiness (the string "false" keeps the hook).
    upgrade_crd = helm_flag(resource.values, GPU_OPERATOR, "operator.upgradeCRD")
    if upgrade_crd is False:
        report_violation(
            f"{subject} values operator.upgradeCRD is false, which removes the "
            f"pre-upgrade upgrade-crd hook, so CRDs stay at the first install. {fix}: "
            "keep operator.upgradeCRD true.",
            None,
        )


def _renders_operator(resource: Resource) -> bool:
    """A workload of the GPU Operator chart itself (not of its NFD subchart)."""
    if resource.pod_spec is None or resource.is_nfd:
        return False
    if resource.rendered_chart_owner == GPU_OPERATOR or resource.owner == GPU_OPERATOR:
        return True
    return resource.identity == (GPU_OPERATOR, "operator")


def _reads_any(resource: Resource) -> bool:
    """Every object can carry the chart stamp."""
    return resource.is_kubernetes or resource.is_helm


DRIVER_OWNERSHIP_CONSISTENT = StackValidationPolicy(
    name="driver-ownership-consistent",
    description=(
        "The GPU Operator disables its driver only for cohorts that declare a verified "
        "host driver, and a DRA driver root of / is never combined with an "
        "Operator-managed driver."
    ),
    validate=driver_ownership_consistent_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "verifiedCohorts": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Operator cohorts whose host driver was verified.",
            }
        }
    ),
    remediation_steps=(
        f"Set {PROJECT}:cohorts[i].hostDriverVerified only after verifying the host "
        f"driver; otherwise keep {_DRIVER_PATH} true. Do not reuse the standalone DRA "
        "nvidiaDriverRoot / next to an Operator-managed driver."
    ),
    url=("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html"),
    tags=["drivers", "gpu-operator"],
)

DRIVER_VERIFICATION_DECLARED = StackValidationPolicy(
    name="driver-verification-declared",
    description=(
        "When the GPU Operator's driver is disabled, the stack should show that every "
        "Operator cohort has a verified host driver (review otherwise)."
    ),
    validate=driver_verification_declared_validator,
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "verifiedCohorts": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Operator cohorts whose host driver was verified.",
            }
        }
    ),
    remediation_steps=(
        "Verify the driver/toolkit on the hosts, then record it in "
        f"{PROJECT}:cohorts[i].hostDriverVerified or in this policy's verifiedCohorts."
    ),
    url=("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html"),
    tags=["drivers", "gpu-operator", "review"],
)

CHART_VERSION_PINNED = ResourceValidationPolicy(
    name="chart-version-pinned",
    description=(
        "Every Helm Release, and every object a Chart v4 renders (its eks-hybrid-gpu.io/chart stamp), "
        "names an exact chart version, never a range, latest, an empty version, *, ^, ~ or >."
    ),
    validate=fail_closed(_reads_any)(chart_version_pinned_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "allowPrerelease": {
                "type": "boolean",
                "default": True,
                "description": "Accept exact pre-release versions such as 0.5.0-rc.1.",
            }
        }
    ),
    remediation_steps=(
        f"Pin {PROJECT}:charts.devicePlugin.version, charts.draDriver.version and "
        "charts.gpuOperator.version to exact reviewed versions."
    ),
    url="https://helm.sh/docs/helm/helm_install/",
    tags=["drivers", "supply-chain"],
)

OPERATOR_HOOKS_KEPT = ResourceValidationPolicy(
    name="operator-hooks-kept",
    description=(
        "The GPU Operator is installed as a Helm Release that keeps its CRD, "
        "pre-delete and pre-upgrade hooks (no --no-hooks equivalents)."
    ),
    validate=fail_closed(reads_pods_and_helm)(operator_hooks_kept_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "forbiddenOptions": {
                "type": "array",
                "items": {"type": "string"},
                "default": list(_HOOK_OPTIONS),
                "description": "Release inputs that bypass the Operator's hooks.",
            }
        }
    ),
    remediation_steps=(
        "Install the Operator with kubernetes.helm.v3.Release without disableCRDHooks, "
        "disableWebhooks or skipCrds, and keep operator.upgradeCRD true."
    ),
    url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    tags=["drivers", "gpu-operator"],
)

POLICIES: Final = (
    DRIVER_OWNERSHIP_CONSISTENT,
    DRIVER_VERIFICATION_DECLARED,
    CHART_VERSION_PINNED,
    OPERATOR_HOOKS_KEPT,
)
