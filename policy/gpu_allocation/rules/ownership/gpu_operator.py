"""The GPU Operator beside other owners: its own device plugin, its GPUCluster mode, one Operator CR.

Seed: "GPUCluster ... cannot coexist with ClusterPolicy" and "Do not install an additional standalone DRA release for
an Operator-managed deployment". ClusterPolicy operands ignore cohort nodeSelectors, so these are cluster-wide.
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, PROJECT
from ...vocab.operands import EXCLUDED, operator_reach
from ...vocab.owners import GPU_OPERATOR_KIND
from ...vocab.selectors import Placement
from ..declare import stack_policy
from ..findings import LABELS_NOTE, PREVIEW_AGAIN, report_findings
from ..operator_crs import cr_flag, cr_mode
from ..props import UNKNOWN, as_dict, dig, show
from ..readers import helm_rendered_bool
from ..resource import Resource
from ..shapes import pod_placement
from ..stack_view import StackView
from .scope import judge_gpu_stack, reads_ownership


def _dra_workloads(view: StackView) -> list[Resource]:
    return [
        r
        for r in view.resources
        if r.owner == DRA and view.installation_urn(r) is None and r.kind in {"DaemonSet", "Deployment"}
    ]


def _reached_standalone(view: StackView, owners: set[str]) -> list[str]:
    """The standalone allocators of these owners that the Operator's operands may reach, for messages.

    Installs (a DRA driver that publishes GPUs) and allocator DaemonSets no Chart/Release rendered; one whose every
    node the stack shows labelled ``nvidia.com/gpu.deploy.operands=false`` is not reached (the Operator's state
    manager, :mod:`...vocab.operands`); one whose placement cannot be read is (fail closed).
    """
    found: list[str] = []
    for install in view.installations():
        if install.owner not in owners or install.owner == GPU_OPERATOR:
            continue
        if install.owner == DRA and install.publishes_gpus is False:
            continue
        placement = install.placement_setting.value
        if operator_reach(placement if isinstance(placement, Placement) else None) != EXCLUDED:
            found.append(install.resource.describe)
    for resource in view.resources:
        if not resource.is_allocator or resource.identity is None or resource.identity[0] not in owners:
            continue
        if view.installation_urn(resource) is not None or resource.describe in found:
            continue
        pod = resource.pod_spec
        if operator_reach(pod_placement(pod) if isinstance(pod, dict) else None) != EXCLUDED:
            found.append(resource.describe)
    return found


def _check_operator_device_plugin(view: StackView, report: ReportViolation) -> None:
    plugins = _reached_standalone(view, {DEVICE_PLUGIN})
    if not plugins:
        return
    for operator in view.by_owner(GPU_OPERATOR):
        if operator.values is UNKNOWN:
            continue
        if operator.mode not in {"cluster-policy", "both"}:
            continue
        enabled = operator.operand_enabled("devicePlugin")
        if enabled is not True:
            continue
        message = (
            f"{operator.resource.describe} deploys its own device plugin "
            f"(devicePlugin.enabled is {show(operator.setting('devicePlugin', 'enabled'))}"
            f", default true) while the standalone device plugin {', '.join(plugins)} "
            "also runs. ClusterPolicy operands are not restricted by the cohort "
            "nodeSelector, so both plugins advertise nvidia.com/gpu on the same GPUs. "
            "Set devicePlugin.enabled=false and gfd.enabled=false in the Operator "
            f"values, or move the cohort to the Operator ({PROJECT}:cohorts[i].owner: "
            f"{GPU_OPERATOR}). {LABELS_NOTE}"
        )
        report(message, operator.resource.urn)
    # A ClusterPolicy applied as a plain manifest (no Operator chart in this stack) deploys the plugin as well.
    for resource in view.resources:
        if cr_mode(resource) != "cluster-policy" or view.installation_of(resource) is not None:
            continue
        raw = dig(resource.props, "spec", "devicePlugin", "enabled")
        if cr_flag(resource, "devicePlugin") is not True:
            continue
        message = (
            f"{resource.describe} deploys the GPU Operator's own device plugin (spec.devicePlugin.enabled is "
            f"{show(raw)}, default true) while the standalone device plugin {', '.join(plugins)} also runs. "
            "ClusterPolicy operands are not restricted by a cohort nodeSelector, so both plugins advertise "
            "nvidia.com/gpu on the same GPUs. Set spec.devicePlugin.enabled: false (and spec.gfd.enabled: false) "
            f"in {resource.describe}, or remove the standalone plugin. {LABELS_NOTE}"
        )
        report(message, resource.urn)


SANDBOX_WORKLOADS: Final = frozenset({"vm-passthrough", "vm-vgpu"})
"""``sandboxWorkloads.defaultWorkload`` values that take a node's GPUs away from containers."""


def _sandbox_default(enabled: Any, workload: Any) -> bool:
    return enabled is True and isinstance(workload, str) and workload in SANDBOX_WORKLOADS


def _check_operator_sandbox(view: StackView, report: ReportViolation) -> None:
    """A ClusterPolicy whose sandbox workloads default to a VM takes every GPU it manages from a standalone owner.

    The chart prints ``sandboxWorkloads.enabled`` and ``.defaultWorkload`` into the ClusterPolicy
    (gpu-operator ``templates/clusterpolicy.yaml``, defaults false / ``container``); with sandbox workloads enabled the
    Operator gives every GPU node without an ``nvidia.com/gpu.workload.config`` label the default workload
    (``controllers/state_manager.go``, ``getWorkloadConfig``) and, for ``vm-passthrough``, deploys its vfio-manager,
    which binds the GPUs to ``vfio-pci``, and its sandbox device plugin, which publishes them again, whatever
    ``devicePlugin.enabled`` says (GPU Operator docs, "GPU Operator with KubeVirt"). ClusterPolicy operands ignore
    cohort nodeSelectors, so a standalone plugin's or DRA driver's cohort loses its GPUs.
    """
    owners = _reached_standalone(view, {DEVICE_PLUGIN, DRA})
    if not owners:
        return
    found: list[tuple[str, str, Any, str]] = []
    for operator in view.by_owner(GPU_OPERATOR):
        if operator.mode not in {"cluster-policy", "both"}:
            continue
        if operator.inputs_visible:
            enabled = helm_rendered_bool(operator.values, GPU_OPERATOR, "sandboxWorkloads.enabled")
            workload = dig(operator.values, "sandboxWorkloads", "defaultWorkload") or "container"
            if _sandbox_default(enabled, workload):
                fix = (
                    f"set sandboxWorkloads.enabled: false (or sandboxWorkloads.defaultWorkload: container) in the "
                    f"values of {operator.describe}"
                )
                found.append((operator.describe, "values sandboxWorkloads", workload, fix))
            continue
    for resource in view.resources:
        if cr_mode(resource) != "cluster-policy":
            continue
        install = view.installation_of(resource)
        if install is not None and install.inputs_visible:
            continue  # judged through its Release values above
        sandbox = as_dict(dig(resource.props, "spec", "sandboxWorkloads"))
        workload = sandbox.get("defaultWorkload") or "container"
        if _sandbox_default(sandbox.get("enabled"), workload):
            fix = (
                f"set spec.sandboxWorkloads.enabled: false (or spec.sandboxWorkloads.defaultWorkload: container) in "
                f"{resource.describe}"
            )
            found.append((resource.describe, "spec.sandboxWorkloads", workload, fix))
    urns = {r.describe: r.urn for r in view.resources}
    for subject, field, workload, fix in found:
        message = (
            f"{subject}: {field} enables sandbox workloads with defaultWorkload {show(workload)}, so the GPU Operator "
            "binds every GPU of the nodes it manages to vfio-pci (vfio-manager) and publishes them again through its "
            "sandbox device plugin, devicePlugin.enabled=false notwithstanding, while "
            f"{', '.join(sorted(owners))} also allocates GPUs; ClusterPolicy operands ignore cohort nodeSelectors, so "
            f"that cohort's GPUs are taken from it. To fix it, {fix}, or label only the VM hosts "
            f"nvidia.com/gpu.workload.config=vm-passthrough; {PREVIEW_AGAIN}. {LABELS_NOTE}"
        )
        report(message, urns.get(subject))


def operator_device_plugin_disabled_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a ClusterPolicy Operator that deploys its own device plugin next to a standalone one."""

    def check(view: StackView, report: ReportViolation) -> None:
        _check_operator_device_plugin(view, report)
        _check_operator_sandbox(view, report)

    judge_gpu_stack(args, report_violation, check)


OPERATOR_DEVICE_PLUGIN_DISABLED = stack_policy(
    "operator-device-plugin-disabled",
    (
        "A ClusterPolicy GPU Operator next to a standalone device plugin does not deploy its own plugin, and next to "
        "any standalone owner does not default its GPUs to sandbox (VM) workloads."
    ),
    operator_device_plugin_disabled_validator,
    severity=Severity.CRITICAL,
    remediation=(
        "Set devicePlugin.enabled=false and gfd.enabled=false in the Operator values, or move the cohort to the "
        f"Operator ({PROJECT}:cohorts[i].owner: {GPU_OPERATOR})."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=["ownership", GPU_OPERATOR],
)


def _check_gpu_cluster_vs_dra(view: StackView, report: ReportViolation) -> None:
    standalone = [i.resource.describe for i in view.by_owner(DRA)]
    standalone += [r.describe for r in _dra_workloads(view)]
    if not standalone:
        return
    sources = [
        (o.resource.describe, o.resource.urn) for o in view.by_owner(GPU_OPERATOR) if o.mode in {"gpu-cluster", "both"}
    ]
    sources += [(r.describe, r.urn) for r in view.resources if cr_mode(r) == "gpu-cluster"]
    for describe, urn in sources:
        message = (
            f"{describe} runs the GPU Operator in GPUCluster mode (gpuCluster.deployCR"
            f"=true) while the standalone DRA driver {', '.join(standalone)} is also "
            "installed. Both create the gpu.nvidia.com DeviceClasses and a DRA kubelet "
            "plugin; the guide forbids an additional standalone DRA release for an "
            f"Operator-managed deployment. Set {PROJECT}:operator.mode to "
            f"cluster-policy, or remove the dra cohort ({PROJECT}:cohorts[i].owner). "
            f"{LABELS_NOTE}"
        )
        report(message, urn)


def gpu_cluster_excludes_standalone_dra_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a GPUCluster Operator next to a standalone DRA driver."""
    judge_gpu_stack(args, report_violation, _check_gpu_cluster_vs_dra)


GPU_CLUSTER_EXCLUDES_STANDALONE_DRA = stack_policy(
    "gpu-cluster-excludes-standalone-dra",
    "A GPUCluster GPU Operator manages DRA itself, so no standalone DRA driver runs beside it.",
    gpu_cluster_excludes_standalone_dra_validator,
    severity=Severity.CRITICAL,
    remediation=(
        f"Set {PROJECT}:operator.mode to cluster-policy, or remove the standalone DRA cohort "
        f"({PROJECT}:cohorts[i].owner)."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=["ownership", "dra", GPU_OPERATOR],
)


def operator_cr_exclusive_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse ClusterPolicy and GPUCluster together, and two Operator installs."""
    view = StackView.from_args(args)
    operators = view.by_owner(GPU_OPERATOR)
    crs = [r for r in view.resources if cr_mode(r) is not None]
    if not operators and not crs:
        args.not_applicable("the stack installs no GPU Operator")
        return
    modes: dict[str, list[str]] = {}
    first_urn: dict[str, str] = {}
    for operator in operators:
        mode = operator.mode
        values = as_dict(operator.values)
        if mode == "both" and not operator.inputs_visible:
            rendered = ", ".join(r.describe for r in operator.custom_resources)
            message = (
                f"{operator.resource.describe} renders both a ClusterPolicy and a GPUCluster ({rendered}): "
                "they cannot coexist (each controller refuses the other CR). Set "
                f"{PROJECT}:operator.mode to exactly one of cluster-policy or gpu-cluster."
            )
            report_violation(message, operator.resource.urn)
            continue
        if mode == "both":
            message = (
                f"{operator.resource.describe} sets clusterPolicy.deployCR="
                f"{show(_deploy_cr(values, 'clusterPolicy', default=True))} and "
                f"gpuCluster.deployCR={show(_deploy_cr(values, 'gpuCluster'))}: "
                "ClusterPolicy and GPUCluster cannot coexist (the chart fails with "
                "'cannot both be true' and each controller refuses the other CR). Set "
                f"{PROJECT}:operator.mode to exactly one of cluster-policy or "
                "gpu-cluster."
            )
            report_violation(message, operator.resource.urn)
            continue
        if isinstance(mode, str):
            modes.setdefault(mode, []).append(operator.resource.describe)
            first_urn.setdefault(mode, operator.resource.urn)
    for resource in crs:
        install = view.installation_of(resource)
        if install is not None and not install.inputs_visible:
            continue  # counted through its Chart above
        mode = cr_mode(resource) or ""
        modes.setdefault(mode, []).append(resource.describe)
        first_urn.setdefault(mode, resource.urn)
    if "cluster-policy" in modes and "gpu-cluster" in modes:
        message = (
            "ClusterPolicy ("
            f"{', '.join(modes['cluster-policy'])}) and GPUCluster "
            f"({', '.join(modes['gpu-cluster'])}) are both in this stack. GPUCluster "
            "is a greenfield singleton that cannot coexist with ClusterPolicy, and a "
            "leftover CR (resource-policy: keep) blocks the other mode until deleted. "
            f"Set {PROJECT}:operator.mode to one mode and delete the other CR."
        )
        origins = sorted(r.origin for r in crs if r.origin is not None)
        if origins:
            # The Operator chart renders extraObjects verbatim (templates/extra-objects.yaml): the CR is created too.
            message += (
                f" The chart renders {', '.join(origins)} as an object of its own: remove that entry from "
                f"extraObjects; {PREVIEW_AGAIN}."
            )
        report_violation(message, first_urn["gpu-cluster"])
    if len(operators) > 1:
        message = (
            f"{len(operators)} GPU Operator installs: "
            f"{', '.join(o.resource.describe for o in operators)}. A cluster has at "
            "most one Operator (one ClusterPolicy or one GPUCluster). Keep one "
            f"release and set {PROJECT}:operator.mode for it."
        )
        report_violation(message, operators[1].resource.urn)
    report_findings(view.problems(reads_ownership), report_violation)


def _deploy_cr(values: dict[str, Any], key: str, *, default: bool = False) -> Any:
    raw = as_dict(values.get(key)).get("deployCR")
    return default if raw is None else raw


OPERATOR_CR_EXCLUSIVE = stack_policy(
    "operator-cr-exclusive",
    "A cluster runs at most one GPU Operator, with either a ClusterPolicy or a GPUCluster, never both.",
    operator_cr_exclusive_validator,
    severity=Severity.HIGH,
    remediation=(
        f"Set {PROJECT}:operator.mode to cluster-policy or gpu-cluster (never both "
        "deployCR values true), install one Operator release, and delete a leftover CR "
        "of the other mode by hand; there is no in-place migration."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=["ownership", GPU_OPERATOR],
)
