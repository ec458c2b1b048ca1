"""time-slicing-config-attached: a ConfigMap holding a time-slicing config is read by some device plugin.

Seed: "an unattached ConfigMap changes nothing". Advisory: the stack may attach it in a way the pack cannot see.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import DEVICE_PLUGIN, GPU_OPERATOR, PROJECT
from ...vocab.owners import DEVICE_PLUGIN_KIND, owner_of_app_label
from ..declare import stack_policy
from ..operator_crs import cr_mode
from ..plugin_configs import (
    config_file_source,
    config_volume_name,
    load_documents,
    time_slicing_settings,
)
from ..props import dig, one_of
from ..resource import CONFIG_MAP_TYPE
from ..shapes import APP_NAME_LABEL, POD_SPEC_PATHS
from ..stack_view import StackView


def _operator_config_names(view: StackView) -> list[Any]:
    """The ConfigMaps the GPU Operator's device plugin reads (values or ClusterPolicy devicePlugin.config.name)."""
    names = [o.value("devicePlugin", "config", "name") for o in view.by_owner(GPU_OPERATOR) if o.inputs_visible]
    names += [dig(r.props, "spec", "devicePlugin", "config", "name") for r in view.resources if cr_mode(r)]
    return names


def _check_unattached_config_maps(view: StackView, report: ReportViolation) -> None:
    referenced = {
        name for install in view.by_owner(DEVICE_PLUGIN) if isinstance(name := install.value("config", "name"), str)
    }
    referenced |= {name for _, pod in view.workloads() if isinstance(name := config_volume_name(pod), str)}
    referenced |= {source[0] for _, pod in view.workloads() if (source := config_file_source(pod)) is not None}
    referenced |= {name for name in _operator_config_names(view) if isinstance(name, str)}
    for resource in view.resources:
        if resource.resource_type != CONFIG_MAP_TYPE or resource.is_ledger:
            continue
        if view.installation_urn(resource) is not None:
            continue
        if owner_of_app_label(resource.label(APP_NAME_LABEL)) == DEVICE_PLUGIN:
            continue
        data = resource.props.get("data")
        if not isinstance(data, dict):
            continue
        documents, _ = load_documents(data)
        sliced = sorted(k for k, d in documents.items() if time_slicing_settings(d))
        if not sliced or one_of(resource.metadata.get("name"), referenced):
            continue
        report(
            f"{resource.describe} holds a time-slicing device-plugin config "
            f"({', '.join(sliced)}) that no device plugin references (config.name), so "
            "it changes nothing: the GPUs stay exclusive. Attach it through the device "
            f"plugin's config.name/config.default ({PROJECT}:cohorts[i].sharing), or "
            "delete it.",
            resource.urn,
        )


def time_slicing_config_attached_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Advise on a time-slicing ConfigMap that no device plugin reads: it changes nothing."""
    view = StackView.from_args(args, frozenset({*POD_SPEC_PATHS, "ConfigMap", "ClusterPolicy"}))
    if not any(r.resource_type == CONFIG_MAP_TYPE for r in view.resources):
        args.not_applicable("no ConfigMap in the stack")
        return
    _check_unattached_config_maps(view, report_violation)


TIME_SLICING_CONFIG_ATTACHED = stack_policy(
    "time-slicing-config-attached",
    (
        "A ConfigMap holding a time-slicing device-plugin config is read by a device plugin (its config.name, the "
        "mounted config volume or file, or the Operator's devicePlugin.config); an unattached one changes nothing "
        "(advisory)."
    ),
    time_slicing_config_attached_validator,
    severity=Severity.LOW,
    remediation=(
        f"Attach the config through the device plugin's config.name/config.default ({PROJECT}:cohorts[i].sharing) "
        "or the Operator's devicePlugin.config, or delete the ConfigMap."
    ),
    url=f"{DEVICE_PLUGIN_KIND.docs_url}#shared-access-to-gpus",
    tags=["workloads", "time-slicing", "review"],
    level=EnforcementLevel.ADVISORY,
)
