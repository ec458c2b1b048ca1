"""shared-gpu-resource-name: time-slicing configs are attached and kept strict, and requests use the shared name.

A time-slicing config is selected by the plugin, keeps failRequestsGreaterThanOne, and workloads ask for the name it
advertises.

Seed: with time-slicing ``renameByDefault: true`` "the advertised resource is nvidia.com/gpu.shared". A request is
judged against the configs of every node the workload can land on (the plugin's own selection: the node's
``nvidia.com/device-plugin.config`` label, else ``config.default``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab import labels as vocab
from ...vocab.grammar import parse_quantity
from ...vocab.labels import GPU_OPERATOR, PROJECT
from ...vocab.owners import DEVICE_PLUGIN_KIND
from ...vocab.selectors import Placement
from ..declare import stack_policy
from ..findings import CANNOT_JUDGE, report_findings
from ..installations import Installation
from ..operator_crs import cr_flag, cr_mode
from ..plugin_configs import (
    CONFIG_VOLUME,
    PLUGIN_CONFIG_LABEL,
    Replicated,
    SharingConfig,
    operator_config,
    replicated_settings,
    selected_configs,
    sharing_config,
)
from ..props import UNKNOWN, as_dict, as_list, show
from ..resource import CONFIG_MAP_TYPE, Resource
from ..stack_view import INSTALL_KINDS, StackView, not_applicable_unless_unreadable
from .cohorts import PluginCohort, plugin_cohorts, reads_sharing, workload_requests


def _advertised(time_slicing: dict[str, Any]) -> dict[str, str]:
    """Original resource name -> advertised name under a time-slicing or MPS config, as plugin 0.20.0 applies it.

    Only ``renameByDefault: true`` renames (to ``<name>.shared``); 0.20.0 ignores a per-resource ``rename``
    (``disableResoureRenaming`` in ``api/config/v1/replicas.go`` at v0.20.0, for ``timeSlicing`` and ``mps``
    alike), so honouring it would judge a name the plugin never advertises.
    """
    if time_slicing.get("renameByDefault") is not True:
        return {}
    renamed: dict[str, str] = {}
    for entry in as_list(time_slicing.get("resources")):
        name = as_dict(entry).get("name")
        if isinstance(name, str):
            renamed[name] = f"{name}.shared"
    return renamed


@dataclass
class _Slicing:
    """What each named config of one plugin advertises, and which config a node gets (the plugin's selection)."""

    title: str
    configs: dict[str, tuple[dict[str, str], bool, str]]
    """Config name -> (renames, failRequestsGreaterThanOne, strategy title) for every config of the plugin."""
    default_key: str | None
    """The config of nodes without the nvidia.com/device-plugin.config label (config.default)."""
    confines: Any
    """``confines(workload, placement) -> bool``: the workload only runs where this plugin runs."""

    def possible(self, selected: frozenset[str | None] | None) -> list[tuple[str, dict[str, str], bool, str]]:
        """The configs of the nodes a workload can land on: the ones its node selection admits, else every one.

        ``selected`` holds the ``nvidia.com/device-plugin.config`` values its nodes can carry (None: unlabelled
        nodes, which get the default); the config-manager (``updateConfigName``, k8s-device-plugin
        ``cmd/config-manager/main.go``) applies the labelled value, else ``DEFAULT_CONFIG``, else its fallbacks.
        """
        keys = (
            {self.default_key or "", *self.configs}
            if selected is None
            else {(self.default_key or "") if value is None else value for value in selected}
        )
        return [(key, *self.configs.get(key, ({}, False, "time-slicing"))) for key in sorted(keys)]


def _check_documents(
    sharing: SharingConfig, path: str, urn: str | None, require_fail: bool, report: ReportViolation
) -> dict[str, Replicated]:
    """Report configs that cannot be read and sharing without failRequestsGreaterThanOne; the shared ones."""
    for error in sharing.errors:
        report(f"{sharing.where}: {error}, {CANNOT_JUDGE}. Fix {path}.", urn)
    sliced = {k: t for k, d in sharing.documents.items() if (t := replicated_settings(d))}
    for key, replicated in sorted(sliced.items()):
        fail = replicated.fail_requests_greater_than_one
        if require_fail and fail is not True and fail is not UNKNOWN:
            report(
                f"{sharing.where}.{key}: sharing.{replicated.strategy}."
                f"failRequestsGreaterThanOne is {show(fail)}. Without it a pod asking "
                "for several shared replicas is admitted although replicas give no "
                f"proportional compute or memory. Keep it true ({path}).",
                urn,
            )
    return sliced


def _slices(sharing: SharingConfig, sliced: dict[str, Replicated]) -> dict[str, tuple[dict[str, str], bool, str]]:
    return {
        key: (
            _advertised(sliced[key].settings),
            sliced[key].fail_requests_greater_than_one is True,
            sliced[key].title,
        )
        if key in sliced
        else ({}, False, "time-slicing")
        for key in sharing.documents
    }


def _operator_slicings(
    view: StackView, cohorts: list[PluginCohort], require_fail: bool, report: ReportViolation
) -> list[_Slicing]:
    """The Operator's own device plugin (ClusterPolicy mode): it serves every GPU node no standalone plugin owns."""
    found: list[tuple[Installation | None, Resource | None]] = []
    for operator in view.by_owner(GPU_OPERATOR):
        if operator.mode not in {"cluster-policy", "both"} or operator.operand_enabled("devicePlugin") is not True:
            continue
        rendered = next((r for r in operator.custom_resources if cr_mode(r) == "cluster-policy"), None)
        found.append((operator, rendered))
    for resource in view.resources:
        if cr_mode(resource) == "cluster-policy" and view.installation_of(resource) is None:
            if cr_flag(resource, "devicePlugin") is True:
                found.append((None, resource))

    def off_standalone(workload: Resource, placement: Placement) -> bool:
        return not any(c.confines(workload, placement) for c in cohorts)

    result = []
    for install, policy in found:
        sharing = operator_config(view, install, policy)
        subject = install.resource if install is not None else policy
        if not isinstance(sharing, SharingConfig) or subject is None:
            continue
        sliced = _check_documents(sharing, sharing.selector, subject.urn, require_fail, report)
        title = f"the GPU Operator's device plugin ({subject.describe})"
        result.append(_Slicing(title, _slices(sharing, sliced), sharing.default_key, off_standalone))
    return result


def _check_plugin_sharing(
    cohort: PluginCohort,
    sharing: Any,
    require_fail: bool,
    report: ReportViolation,
) -> dict[str, tuple[dict[str, str], bool, str]] | None:
    """Check one plugin's time-slicing/MPS configs; return (renames, fails >1 requests, strategy) per config."""
    if sharing is UNKNOWN:
        return None
    install = cohort.install
    subject = install.resource.describe
    path = install.config_path(".sharing", f"{PROJECT}:cohorts[i].sharing")
    urn = install.resource.urn
    if sharing is None:
        if cohort.sharing == "time-slicing":
            carries = (
                "its values carry no config.map or config.name"
                if install.inputs_visible
                else f"its rendered plugin DaemonSet mounts no device-plugin ConfigMap ({CONFIG_VOLUME})"
            )
            report(
                f"{subject} belongs to a cohort declared time-slicing "
                f"({vocab.SHARING_ANNOTATION}) but {carries}, so no time-slicing config is attached and the GPUs "
                f"stay exclusive. Set {path}.mode and {path}.replicas so the program renders "
                "config.map with config.default pointing at it.",
                urn,
            )
        return None
    sliced = _check_documents(sharing, path, urn, require_fail, report)
    # A config that config.default does not select still applies to nodes labelled
    # nvidia.com/device-plugin.config=<name>; only a cohort this program declared time-slicing must get it on every
    # node.
    if sliced and sharing.default_key not in sliced and cohort.sharing == "time-slicing":
        report(
            f"{sharing.selector}: time-slicing config(s) {', '.join(sorted(sliced))} "
            f"are not selected by {sharing.selector_field} ({show(sharing.default_text)} resolves "
            f"to {show(sharing.default_key)}), so they only apply to nodes labelled "
            "nvidia.com/device-plugin.config=<name>; an unattached config changes "
            f"nothing. Point config.default at the time-slicing config ({path}).",
            urn,
        )
    elif not sliced and cohort.sharing == "time-slicing":
        report(
            f"{subject} belongs to a cohort declared time-slicing but none of its "
            f"device-plugin configs ({', '.join(sorted(sharing.documents))}) has "
            f"sharing.timeSlicing, so the GPUs stay exclusive. Fix {path}.",
            urn,
        )
    return _slices(sharing, sliced)


def _check_request(
    slicing: _Slicing,
    resource: Resource,
    selected: frozenset[str | None] | None,
    container: str,
    name: str,
    value: Any,
    report: ReportViolation,
) -> None:
    """Judge one request against the configs of the nodes the workload can land on (all of them must agree)."""
    possible = slicing.possible(selected)
    path = resource.manifest_path
    labelled = selected is not None and None not in selected
    if labelled and len(possible) == 1:
        where = f"config '{possible[0][0]}' (its {PLUGIN_CONFIG_LABEL} node label) advertises"
    elif labelled:
        where = f"configs {', '.join(k for k, *_ in possible)} (the {PLUGIN_CONFIG_LABEL} values it admits) advertise"
    elif len(possible) == 1:
        where = "config advertises"
    else:
        where = f"configs {', '.join(k or '<none>' for k, *_ in possible)} (every one its nodes can get) advertise"
    strategy = "/".join(sorted({title for *_, title in possible}))
    if possible and all(name in renames for _, renames, _, _ in possible):
        advertised = possible[0][1][name]
        report(
            f"{resource.describe}: container '{container}' requests "
            f"{name} but it only runs on {slicing.title}, whose {strategy} "
            f"{where} {advertised} instead (renameByDefault: "
            f"true), so the pod stays Pending. Ask for {advertised} ({path}); "
            "a shared replica is not an exclusive GPU.",
            resource.urn,
        )
    quantity = parse_quantity(value)
    failing = [key for key, renames, fail, _ in possible if fail and name in renames.values()]
    if quantity is not None and quantity > 1 and failing and len(failing) == len(possible):
        report(
            f"{resource.describe}: container '{container}' requests "
            f"{show(value)} {name} on {slicing.title}, whose {strategy} config "
            "sets failRequestsGreaterThanOne: true, so the allocation fails. "
            f"Request 1 replica ({path}).",
            resource.urn,
        )


def shared_gpu_resource_name_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Check time-slicing configs are attached and workloads ask for shared names."""
    view = StackView.from_args(args, INSTALL_KINDS)
    config = args.get_config()
    require_fail = config.get("requireFailRequestsGreaterThanOne", True) is not False
    ledger = view.ledger()
    cohorts = plugin_cohorts(view, ledger)
    config_maps = [r for r in view.resources if r.resource_type == CONFIG_MAP_TYPE]
    operators = bool(view.by_owner(GPU_OPERATOR)) or any(cr_mode(r) == "cluster-policy" for r in view.resources)
    if not cohorts and not config_maps and not operators:
        not_applicable_unless_unreadable(
            args, view, "no device plugin, GPU Operator or ConfigMap in the stack", report_violation, reads_sharing
        )
        return
    slicings: list[_Slicing] = []
    for cohort in cohorts:
        if cohort.install.values is UNKNOWN:
            continue
        sharing = sharing_config(cohort.install, view)
        configs = _check_plugin_sharing(cohort, sharing, require_fail, report_violation)
        if configs and isinstance(sharing, SharingConfig):
            slicings.append(_Slicing(cohort.title, configs, sharing.default_key, cohort.confines))
    slicings += _operator_slicings(view, cohorts, require_fail, report_violation)
    selections: dict[str, frozenset[str | None] | None] = {}
    for resource, selector, container, name, value in workload_requests(view):
        for slicing in slicings:
            if not slicing.confines(resource, selector):
                continue
            if resource.urn not in selections:
                pod = resource.pod_spec
                selections[resource.urn] = selected_configs(pod) if isinstance(pod, dict) else None
            _check_request(slicing, resource, selections[resource.urn], container.name, name, value, report_violation)
    report_findings(view.problems(reads_sharing), report_violation)


SHARED_GPU_RESOURCE_NAME = stack_policy(
    "shared-gpu-resource-name",
    (
        "A time-slicing device-plugin config is attached through config.default, keeps "
        "failRequestsGreaterThanOne, and workloads on a renamed cohort request "
        "nvidia.com/gpu.shared rather than nvidia.com/gpu."
    ),
    shared_gpu_resource_name_validator,
    severity=Severity.MEDIUM,
    remediation=(
        f"Configure time-slicing through {PROJECT}:cohorts[i].sharing.mode "
        "(time-slicing) and .sharing.replicas so the program renders config.map with "
        "config.default selecting it; request nvidia.com/gpu.shared (1 replica) on that "
        "cohort."
    ),
    url=f"{DEVICE_PLUGIN_KIND.docs_url}#shared-access-to-gpus",
    tags=["workloads", "time-slicing"],
    config={
        "requireFailRequestsGreaterThanOne": {
            "type": "boolean",
            "default": True,
            "description": "Refuse time-slicing configs that admit >1 replica.",
        }
    },
)
