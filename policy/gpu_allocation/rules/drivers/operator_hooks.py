"""operator-hooks-kept: the GPU Operator is a Helm Release that keeps its CRD, pre-delete and pre-upgrade hooks.

Seed: "For Operator-managed DRA, follow its ordered Helm hook/finalizer teardown. Do not use helm uninstall
--no-hooks".
"""

from __future__ import annotations

from typing import Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab.labels import GPU_OPERATOR, PROJECT
from ...vocab.owners import GPU_OPERATOR_KIND
from ..charts import CHART_TYPES, RELEASE_TYPE
from ..declare import resource_policy
from ..fail_closed import fail_closed, reads_pods_and_helm
from ..props import as_bool, config_strings, string_list
from ..readers import helm_flag
from ..resource import Resource

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
    resource.not_applicable_if_inputs_hidden(args, "a GPU Operator it renders is refused on its workloads")
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


OPERATOR_HOOKS_KEPT = resource_policy(
    "operator-hooks-kept",
    (
        "The GPU Operator is installed as a Helm Release that keeps its CRD, "
        "pre-delete and pre-upgrade hooks (no --no-hooks equivalents)."
    ),
    fail_closed(reads_pods_and_helm)(operator_hooks_kept_validator),
    severity=Severity.HIGH,
    remediation=(
        "Install the Operator with kubernetes.helm.v3.Release without disableCRDHooks, "
        "disableWebhooks or skipCrds, and keep operator.upgradeCRD true."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=["drivers", GPU_OPERATOR],
    config={"forbiddenOptions": string_list(list(_HOOK_OPTIONS), "Release inputs that bypass the Operator's hooks.")},
)
