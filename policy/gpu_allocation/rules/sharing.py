"""Sharing policies: time-slicing configs and MIG strategies, judged per device-plugin install.

Seed: with time-slicing ``renameByDefault: true`` "the advertised resource is nvidia.com/gpu.shared" and "an
unattached ConfigMap changes nothing"; "changing a Pod request to nvidia.com/mig-1g.5gb does not create the MIG
instance. Prepare the actual MIG geometry and the plugin's appropriate strategy first." The config and strategy
come from what the plugin's DaemonSet mounts and runs (or a Release's values), wherever it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from ..vocab import gpu_models
from ..vocab import labels as vocab
from ..vocab.grammar import parse_quantity
from .installations import (
    Installation,
    Ledger,
    Setting,
    StackView,
    is_plugin_container,
    not_applicable_unless_unreadable,
)
from .parsing import load_yaml
from .props import (
    UNKNOWN,
    as_dict,
    as_list,
    config_mapping,
    contains_unknown,
    dig,
    one_of,
    show,
    string_map,
)
from .readers import CANNOT_JUDGE, helm_truthy, report_findings
from .shapes import (
    CONFIG_MAP_TYPE,
    DEVICE_PLUGIN,
    GPU_OPERATOR,
    POD_SPEC_PATHS,
    PROJECT,
    Container,
    Resource,
    containers,
    cr_flag,
    cr_mode,
    pod_node_selector,
    selector_confines,
)

# --------------------------------------------------------------------------- MIG data

# The profile names per GPU model come from the one table the program also validates against.
MIG_PROFILES: Final[Mapping[str, frozenset[str]]] = {
    model: frozenset(profiles) for model, profiles in gpu_models.MIG_PROFILES.items()
}
ALL_MIG_PROFILES: Final = frozenset().union(*MIG_PROFILES.values())
MIG_PREFIX: Final = "nvidia.com/mig-"
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
"""GFD node label with the product name, e.g. ``NVIDIA-A100-SXM4-40GB``."""


def normalize_gpu_model(value: Any) -> str | None:
    """Map a model name or GFD product label to a :data:`MIG_PROFILES` key."""
    if not isinstance(value, str):
        return None
    text = value.upper().replace("_", "-").replace(" ", "-")
    family = re.search(r"(A100|H100|H200)", text)
    if family is None:
        return None
    memory = re.search(r"(\d+)\s*GB?\b", text[family.end() :])
    if family.group(1) == "H200":
        return "H200-141GB" if memory is None or memory.group(1) == "141" else None
    if memory is None:
        return None
    key = f"{family.group(1)}-{memory.group(1)}GB"
    return key if key in MIG_PROFILES else None


def normalize_profile(resource_name: str) -> str:
    """``nvidia.com/mig-1g.5gb.me`` -> ``1g.5gb+me`` (``+`` is not valid in names)."""
    profile = resource_name[len(MIG_PREFIX) :]
    if profile.endswith(".me"):
        profile = profile[: -len(".me")] + "+me"
    return profile


# --------------------------------------------------------------------------- cohorts


def _ledger_sharing(ledger: Ledger | None, cohorts: Sequence[str]) -> tuple[Any, Any]:
    """(sharing annotation-like value, gpuModel) recorded in the ledger."""
    if ledger is None or not ledger.known:
        return None, None
    for name in cohorts:
        sharing = as_dict(ledger.cohorts.get(name)).get("sharing")
        if isinstance(sharing, str):
            return sharing, None
        if isinstance(sharing, dict):
            mode = sharing.get("mode")
            strategy = sharing.get("migStrategy")
            if mode == "mig" and one_of(strategy, ("single", "mixed")):
                mode = f"mig-{strategy}"
            model = sharing.get("gpuModel")
            return (
                mode if isinstance(mode, str) else None,
                model if isinstance(model, str) else None,
            )
    return None, None


@dataclass
class _PluginCohort:
    install: Installation
    selector: dict[str, str] | None
    names: list[str]
    sharing: Any
    gpu_model: Any
    strategy: Setting
    """The plugin's MIG strategy: its env, else its config file's flags.migStrategy, else the default none."""

    def confines(self, workload: Resource, node_selector: dict[str, Any]) -> bool:
        if workload.cohort is not None and workload.cohort in self.names:
            return True
        return self.selector is not None and selector_confines(node_selector, self.selector)

    @property
    def title(self) -> str:
        names = ", ".join(self.names)
        return f"{self.install.resource.describe}" + (f" (cohort {names})" if names else "")


def _plugin_cohorts(view: StackView, ledger: Ledger | None) -> list[_PluginCohort]:
    result = []
    for install in view.by_owner(DEVICE_PLUGIN):
        selector = install.selector
        names = install.cohorts
        sharing, model = _ledger_sharing(ledger, names)
        result.append(
            _PluginCohort(
                install,
                selector if isinstance(selector, dict) else None,
                names,
                install.sharing or sharing,
                model,
                _strategy(install, view),
            )
        )
    return result


def _strategy(install: Installation, view: StackView) -> Setting:
    """The MIG strategy in force: ``MIG_STRATEGY`` env (or values), else ``flags.migStrategy`` of the config."""
    setting = install.mig_strategy()
    if not setting.defaulted or install.inputs_visible:
        return setting
    config = _rendered_sharing_config(install, view)
    if not isinstance(config, _SharingConfig) or config.default_key is None:
        return setting
    flag = dig(config.documents.get(config.default_key), "flags", "migStrategy")
    if not isinstance(flag, str):
        return setting
    return Setting(flag, f"{config.where}.{config.default_key} flags.migStrategy")


def _workload_requests(
    view: StackView,
) -> Iterator[tuple[Resource, dict[str, Any], Container, str, Any]]:
    """(workload, nodeSelector, container, resource name, request value)."""
    for resource, pod in view.workloads():
        node_selector = pod_node_selector(pod)
        if node_selector is UNKNOWN:
            continue
        for container in containers(pod):
            table = {**container.limits, **container.requests}
            for name, value in sorted(table.items()):
                yield resource, node_selector, container, name, value


# --------------------------------------------------------------------------- time-slicing


@dataclass
class _SharingConfig:
    documents: dict[str, Any]
    default_key: str | None
    default_text: Any
    errors: list[str]
    where: str
    """Where the config documents live, e.g. ``… Chart 'x' values config.map`` or ``… ConfigMap 'y' (…) data``."""
    selector: str
    """What selects the default, e.g. ``… Chart 'x' values: … config.default`` (subject, field)."""
    selector_field: str


_CONFIG_VOLUME: Final = "available-configs"
_CONFIG_MANAGER: Final = "config-manager"


def _load_documents(source: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Parse each named config; a config that cannot be read is an error (reported: fail closed)."""
    documents: dict[str, Any] = {}
    errors: list[str] = []
    for key, text in source.items():
        if text is UNKNOWN:
            continue
        if isinstance(text, dict):
            documents[key] = text
        elif isinstance(text, str):
            document, error = load_yaml(text)
            if error is not None:
                errors.append(f"config '{key}' {error}")
            elif document is not None and not isinstance(document, dict):
                errors.append(f"config '{key}' is not a YAML mapping (a device-plugin config)")
            else:
                documents[key] = document
        else:
            errors.append(f"config '{key}' is {show(text)}, not a YAML document")
    return documents, errors


def _default_key(documents: dict[str, Any], default: Any, fallbacks: list[Any]) -> str | None:
    if isinstance(default, str) and default:
        return default if default in documents else None
    if "named" in fallbacks and "default" in documents:
        return "default"
    if "single" in fallbacks and len(documents) == 1:
        return next(iter(documents))
    return None


def _find_config_map(view: StackView, install: Installation, name: str, namespace: Any) -> Resource | None:
    candidates = [*install.children, *view.resources]
    for resource in candidates:
        if resource.resource_type != CONFIG_MAP_TYPE or resource.metadata.get("name") != name:
            continue
        other = resource.metadata.get("namespace")
        if isinstance(namespace, str) and isinstance(other, str) and other != namespace:
            continue
        return resource
    return None


def config_volume_name(pod: dict[str, Any]) -> Any:
    """The ConfigMap a device-plugin pod mounts as its configs (``available-configs``): name, None, UNKNOWN."""
    volumes = pod.get("volumes")
    if volumes is UNKNOWN:
        return UNKNOWN
    for volume in as_list(volumes):
        if isinstance(volume, dict) and volume.get("name") == _CONFIG_VOLUME:
            name = dig(volume, "configMap", "name")
            return name if name is UNKNOWN or isinstance(name, str) else None
    return None


def config_file_source(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(ConfigMap, key) of the config file the plugin container names (``CONFIG_FILE`` env or ``--config-file``).

    NVIDIA's static manifest and hand-written DaemonSets mount the plugin config from a ConfigMap of any volume
    name and point the plugin at one file of it; the chart's config-manager is not there to select a default.
    """
    plugin = next((c for c in containers(pod) if is_plugin_container(c)), None)
    if plugin is None:
        return None
    path = plugin.env_value("CONFIG_FILE")
    for word in plugin.command_line:
        if word.startswith("--config-file="):
            path = word.split("=", 1)[1]
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    volumes = {
        v["name"]: v for v in as_list(pod.get("volumes")) if isinstance(v, dict) and isinstance(v.get("name"), str)
    }
    for mount in as_list(plugin.spec.get("volumeMounts")):
        mount_path = dig(mount, "mountPath")
        mount_name = dig(mount, "name")
        volume = volumes.get(mount_name) if isinstance(mount_name, str) else None
        name = dig(volume, "configMap", "name")
        if (
            not isinstance(mount_path, str)
            or not isinstance(name, str)
            or not path.startswith(mount_path.rstrip("/") + "/")
        ):
            continue
        relative = path[len(mount_path.rstrip("/")) + 1 :]
        items = {
            path_: dig(i, "key")
            for i in as_list(dig(volume, "configMap", "items"))
            if isinstance(path_ := dig(i, "path"), str)
        }
        key = items.get(relative, relative)
        return (name, key) if isinstance(key, str) else None
    return None


def _values_sharing_config(install: Installation, view: StackView) -> Any:
    config = install.value("config")
    if config is UNKNOWN or contains_unknown(config):
        return UNKNOWN
    if config is not None and not isinstance(config, dict):
        install.resource.cannot_read("values config", "is not a map")
    if not isinstance(config, dict):
        return None
    config_map = config.get("map")
    name = config.get("name")
    source: Mapping[str, Any] = {}
    if isinstance(config_map, dict) and config_map:
        source = config_map
    elif isinstance(name, str) and name:
        for resource in view.resources:
            if resource.resource_type == CONFIG_MAP_TYPE and resource.metadata.get("name") == name:
                source = as_dict(resource.props.get("data"))
                break
    if not source:
        return None
    documents, errors = _load_documents(source)
    default = config.get("default")
    fallbacks = config.get("fallbackStrategies", ["named", "single"])
    fallbacks = fallbacks if isinstance(fallbacks, list) else []
    return _SharingConfig(
        documents,
        _default_key(documents, default, fallbacks),
        default,
        errors,
        f"{install.describe} values config.map",
        f"{install.describe} values",
        "config.default",
    )


def _rendered_sharing_config(install: Installation, view: StackView) -> Any:
    """The config the rendered plugin DaemonSet mounts, and the default its config-manager selects."""
    main = install.main_workload
    pod = main.pod_spec if main is not None else None
    if main is None or not isinstance(pod, dict):
        return UNKNOWN
    name = config_volume_name(pod)
    if name is UNKNOWN:
        return UNKNOWN
    named = config_file_source(pod) if name is None else None
    if named is not None:
        name = named[0]
    if not isinstance(name, str) or not name:
        return None
    config_map = _find_config_map(view, install, name, main.metadata.get("namespace"))
    if config_map is None:
        return None
    data = config_map.props.get("data")
    if data is UNKNOWN or contains_unknown(data):
        return UNKNOWN
    if data is not None and not isinstance(data, dict):
        config_map.cannot_read("data", "is not a map")
    if named is not None:
        # One file, named by the plugin itself: that file is the config in force.
        documents, errors = _load_documents({k: v for k, v in as_dict(data).items() if k == named[1]})
        return _SharingConfig(
            documents,
            named[1] if named[1] in documents else None,
            named[1],
            errors,
            f"{install.rendered(config_map)} data",
            install.rendered(main),
            "the plugin's config file (CONFIG_FILE env or --config-file)",
        )
    documents, errors = _load_documents(as_dict(data))
    managers = [c for c in containers(pod) if _CONFIG_MANAGER in c.command_line[:1]]
    default = next((v for c in managers if (v := main.env_value(c, "DEFAULT_CONFIG")) is not None), None)
    fallback_text = next((v for c in managers if (v := main.env_value(c, "FALLBACK_STRATEGIES")) is not None), None)
    if default is UNKNOWN or fallback_text is UNKNOWN:
        return UNKNOWN
    fallbacks: list[Any] = fallback_text.split(",") if isinstance(fallback_text, str) else ["named", "single"]
    return _SharingConfig(
        documents,
        _default_key(documents, default, fallbacks),
        default,
        errors,
        f"{install.rendered(config_map)} data",
        install.rendered(main),
        "the config-manager env DEFAULT_CONFIG (values config.default)",
    )


def _sharing_config(install: Installation, view: StackView) -> Any:
    """Return the plugin's sharing configs: a _SharingConfig, None, or UNKNOWN."""
    if install.inputs_visible:
        return _values_sharing_config(install, view)
    return _rendered_sharing_config(install, view)


def _time_slicing(document: Any) -> dict[str, Any] | None:
    value = dig(document, "sharing", "timeSlicing")
    return value if isinstance(value, dict) else None


def _advertised(time_slicing: dict[str, Any]) -> dict[str, str]:
    """Original resource name -> advertised name under a time-slicing config, as plugin 0.20.0 applies it.

    Only ``renameByDefault: true`` renames (to ``<name>.shared``); 0.20.0 ignores a per-resource ``rename``
    (``api/config/v1`` at v0.20.0), so honouring it would judge a name the plugin never advertises.
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
    configs: dict[str, tuple[dict[str, str], bool]]
    """Config name -> (renames, failRequestsGreaterThanOne) for every config of the plugin."""
    default_key: str | None
    """The config of nodes without the nvidia.com/device-plugin.config label (config.default)."""
    confines: Any
    """``confines(workload, nodeSelector) -> bool``: the workload only runs where this plugin runs."""

    def possible(self, node_selector: dict[str, Any]) -> list[tuple[str, dict[str, str], bool]]:
        """The configs of the nodes a workload can land on: the one its node label names, else every one."""
        label = node_selector.get(PLUGIN_CONFIG_LABEL)
        if isinstance(label, str):
            renames, fail = self.configs.get(label, ({}, False))
            return [(label, renames, fail)]
        keys = {self.default_key or "", *self.configs}
        return [(key, *self.configs.get(key, ({}, False))) for key in sorted(keys)]


PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
"""The node label that selects one of the plugin's named configs (k8s-device-plugin "Multiple Config File")."""


def _check_documents(
    sharing: _SharingConfig, path: str, urn: str | None, require_fail: bool, report: ReportViolation
) -> dict[str, dict[str, Any]]:
    """Report configs that cannot be read and time-slicing without failRequestsGreaterThanOne; the sliced ones."""
    for error in sharing.errors:
        report(f"{sharing.where}: {error}, {CANNOT_JUDGE}. Fix {path}.", urn)
    sliced = {k: t for k, d in sharing.documents.items() if (t := _time_slicing(d))}
    for key, time_slicing in sorted(sliced.items()):
        fail = time_slicing.get("failRequestsGreaterThanOne")
        if require_fail and fail is not True and fail is not UNKNOWN:
            report(
                f"{sharing.where}.{key}: sharing.timeSlicing."
                f"failRequestsGreaterThanOne is {show(fail)}. Without it a pod asking "
                "for several shared replicas is admitted although replicas give no "
                f"proportional compute or memory. Keep it true ({path}).",
                urn,
            )
    return sliced


def _slices(sharing: _SharingConfig, sliced: dict[str, dict[str, Any]]) -> dict[str, tuple[dict[str, str], bool]]:
    return {
        key: (_advertised(sliced[key]), sliced[key].get("failRequestsGreaterThanOne") is True)
        if key in sliced
        else ({}, False)
        for key in sharing.documents
    }


def _operator_config(view: StackView, operator: Installation | None, policy: Resource | None) -> Any:
    """The GPU Operator's device-plugin configs: a _SharingConfig, None, or UNKNOWN.

    From Release values devicePlugin.config, else a ClusterPolicy's spec.devicePlugin.config (its ConfigMap found in
    the stack).
    """
    if operator is not None and operator.inputs_visible:
        config = operator.value("devicePlugin", "config")
        owner, where = operator.resource, f"{operator.describe} values devicePlugin.config"
    elif policy is not None:
        config = dig(policy.props, "spec", "devicePlugin", "config")
        owner, where = policy, f"{policy.describe} spec.devicePlugin.config"
    else:
        return None
    if config is UNKNOWN or contains_unknown(config):
        return UNKNOWN
    if config is None:
        return None
    if not isinstance(config, dict):
        owner.cannot_read(where, "is not a map")
        return None
    name, data = config.get("name"), config.get("data")
    source: Mapping[str, Any] = {}
    if isinstance(data, dict) and data and helm_truthy(config.get("create")) is True:
        source = data
    elif isinstance(name, str) and name:
        found = next(iter(view.named("ConfigMap", name)), None)
        source = as_dict(found.props.get("data")) if found is not None else {}
    if not source:
        return None
    documents, errors = _load_documents(source)
    default = config.get("default")
    return _SharingConfig(
        documents,
        _default_key(documents, default or None, ["named", "single"]),
        default,
        errors,
        f"{where} ConfigMap {show(name)}",
        where,
        "default",
    )


def _operator_slicings(
    view: StackView, cohorts: list[_PluginCohort], require_fail: bool, report: ReportViolation
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

    def off_standalone(workload: Resource, node_selector: dict[str, Any]) -> bool:
        return not any(c.confines(workload, node_selector) for c in cohorts)

    result = []
    for install, policy in found:
        sharing = _operator_config(view, install, policy)
        subject = install.resource if install is not None else policy
        if not isinstance(sharing, _SharingConfig) or subject is None:
            continue
        sliced = _check_documents(sharing, sharing.selector, subject.urn, require_fail, report)
        title = f"the GPU Operator's device plugin ({subject.describe})"
        result.append(_Slicing(title, _slices(sharing, sliced), sharing.default_key, off_standalone))
    return result


def _check_plugin_sharing(
    cohort: _PluginCohort,
    sharing: Any,
    require_fail: bool,
    report: ReportViolation,
) -> dict[str, tuple[dict[str, str], bool]] | None:
    """Check one plugin's time-slicing configs; return (renames, fails >1 requests) per named config."""
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
                else f"its rendered plugin DaemonSet mounts no device-plugin ConfigMap ({_CONFIG_VOLUME})"
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
    selector: dict[str, Any],
    container: str,
    name: str,
    value: Any,
    report: ReportViolation,
) -> None:
    """Judge one request against the configs of the nodes the workload can land on (all of them must agree)."""
    possible = slicing.possible(selector)
    path = resource.config_path("", f"the manifest of {resource.describe}")
    if isinstance(selector.get(PLUGIN_CONFIG_LABEL), str):
        where = f"config '{possible[0][0]}' (its {PLUGIN_CONFIG_LABEL} node label) advertises"
    elif len(possible) == 1:
        where = "config advertises"
    else:
        where = f"configs {', '.join(k or '<none>' for k, _, _ in possible)} (every one its nodes can get) advertise"
    if possible and all(name in renames for _, renames, _ in possible):
        advertised = possible[0][1][name]
        report(
            f"{resource.describe}: container '{container}' requests "
            f"{name} but it only runs on {slicing.title}, whose time-slicing "
            f"{where} {advertised} instead (renameByDefault: "
            f"true), so the pod stays Pending. Ask for {advertised} ({path}); "
            "a shared replica is not an exclusive GPU.",
            resource.urn,
        )
    quantity = parse_quantity(value)
    failing = [key for key, renames, fail in possible if fail and name in renames.values()]
    if quantity is not None and quantity > 1 and failing and len(failing) == len(possible):
        report(
            f"{resource.describe}: container '{container}' requests "
            f"{show(value)} {name} on {slicing.title}, whose time-slicing config "
            "sets failRequestsGreaterThanOne: true, so the allocation fails. "
            f"Request 1 replica ({path}).",
            resource.urn,
        )


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
        if resource.label("app.kubernetes.io/name") == "nvidia-device-plugin":
            continue
        data = resource.props.get("data")
        if not isinstance(data, dict):
            continue
        documents, _ = _load_documents(data)
        sliced = sorted(k for k, d in documents.items() if _time_slicing(d))
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


def shared_gpu_resource_name_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Check time-slicing configs are attached and workloads ask for shared names."""
    view = StackView.from_args(args)
    config = args.get_config()
    require_fail = config.get("requireFailRequestsGreaterThanOne", True) is not False
    ledger = view.ledger()
    cohorts = _plugin_cohorts(view, ledger)
    config_maps = [r for r in view.resources if r.resource_type == CONFIG_MAP_TYPE]
    operators = bool(view.by_owner(GPU_OPERATOR)) or any(cr_mode(r) == "cluster-policy" for r in view.resources)
    if not cohorts and not config_maps and not operators:
        not_applicable_unless_unreadable(
            args, view, "no device plugin, GPU Operator or ConfigMap in the stack", report_violation, _reads_sharing
        )
        return
    slicings: list[_Slicing] = []
    for cohort in cohorts:
        if cohort.install.values is UNKNOWN:
            continue
        sharing = _sharing_config(cohort.install, view)
        configs = _check_plugin_sharing(cohort, sharing, require_fail, report_violation)
        if configs and isinstance(sharing, _SharingConfig):
            slicings.append(_Slicing(cohort.title, configs, sharing.default_key, cohort.confines))
    slicings += _operator_slicings(view, cohorts, require_fail, report_violation)
    for resource, selector, container, name, value in _workload_requests(view):
        for slicing in slicings:
            if not slicing.confines(resource, selector):
                continue
            _check_request(slicing, resource, selector, container.name, name, value, report_violation)
    report_findings(view.problems(_reads_sharing), report_violation)


def time_slicing_config_attached_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Advise on a time-slicing ConfigMap that no device plugin reads: it changes nothing."""
    view = StackView.from_args(args, frozenset({*POD_SPEC_PATHS, "ConfigMap", "ClusterPolicy"}))
    if not any(r.resource_type == CONFIG_MAP_TYPE for r in view.resources):
        args.not_applicable("no ConfigMap in the stack")
        return
    _check_unattached_config_maps(view, report_violation)


# --------------------------------------------------------------------------- MIG


def _maybe_mixed(cohort: _PluginCohort) -> bool:
    """The cohort's plugin may advertise MIG profiles (unknown during preview counts as may)."""
    strategy = cohort.strategy.value
    return strategy == "mixed" or strategy is UNKNOWN or cohort.sharing == "mig-mixed"


def _operator_cohorts(view: StackView, ledger: Ledger | None) -> list[tuple[str, dict[str, str] | None, bool, Any]]:
    """(cohort, selector, mixed, gpuModel) for operator-owned cohorts."""
    operators = view.by_owner(GPU_OPERATOR)
    if not operators or ledger is None or not ledger.known:
        return []
    strategy = operators[0].setting("mig", "strategy")
    result = []
    for name, entry in ledger.cohorts.items():
        if entry.get("owner") != GPU_OPERATOR:
            continue
        sharing, model = _ledger_sharing(ledger, [name])
        mixed = strategy == "mixed" or sharing == "mig-mixed"
        result.append((name, string_map(entry.get("nodeSelector")), mixed, model))
    return result


def _check_plugin_strategies(cohorts: list[_PluginCohort], report: ReportViolation) -> None:
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


def mig_strategy_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Check MIG requests against the plugin strategy and the GPU's profile table."""
    view = StackView.from_args(args)
    config = args.get_config()
    models = config_mapping(config, "gpuModels")
    default_model = config.get("defaultGpuModel")
    ledger = view.ledger()
    cohorts = _plugin_cohorts(view, ledger)
    operator_cohorts = _operator_cohorts(view, ledger)
    requests = [r for r in _workload_requests(view) if r[3].startswith(MIG_PREFIX)]
    if not cohorts and not requests:
        not_applicable_unless_unreadable(
            args, view, "no device plugin and no nvidia.com/mig-* request", report_violation, _reads_sharing
        )
        return
    _check_plugin_strategies(cohorts, report_violation)
    # An unknown strategy (preview) may be mixed: it never causes a refusal.
    any_mixed = any(_maybe_mixed(c) for c in cohorts) or any(mixed for _, _, mixed, _ in operator_cohorts)
    for resource, selector, container, name, _ in requests:
        subject = f"{resource.describe}: container '{container.name}' requests {name}"
        path = resource.config_path("", f"the manifest of {resource.describe}")
        confining = [c for c in cohorts if c.confines(resource, selector)]
        confining_ops = [
            o for o in operator_cohorts if resource.cohort == o[0] or (o[1] and selector_confines(selector, o[1]))
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
            + [selector.get(GPU_PRODUCT_LABEL)]
            + [c.gpu_model for c in confining]
            + [o[3] for o in confining_ops]
            + [default_model]
        )
        model = next((m for m in map(normalize_gpu_model, model_source) if m is not None), None)
        profile = normalize_profile(name)
        valid = MIG_PROFILES[model] if model is not None else ALL_MIG_PROFILES
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
    report_findings(view.problems(_reads_sharing), report_violation)


def _reads_sharing(resource: Resource) -> bool:
    """The objects the sharing checks read: workloads, ConfigMaps (the configs, the ledger), Helm resources."""
    return resource.is_helm or resource.kind in POD_SPEC_PATHS or resource.resource_type == CONFIG_MAP_TYPE


# --------------------------------------------------------------------------- policies

SHARED_GPU_RESOURCE_NAME = StackValidationPolicy(
    name="shared-gpu-resource-name",
    description=(
        "A time-slicing device-plugin config is attached through config.default, keeps "
        "failRequestsGreaterThanOne, and workloads on a renamed cohort request "
        "nvidia.com/gpu.shared rather than nvidia.com/gpu."
    ),
    validate=shared_gpu_resource_name_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "requireFailRequestsGreaterThanOne": {
                "type": "boolean",
                "default": True,
                "description": "Refuse time-slicing configs that admit >1 replica.",
            }
        }
    ),
    remediation_steps=(
        f"Configure time-slicing through {PROJECT}:cohorts[i].sharing.mode "
        "(time-slicing) and .sharing.replicas so the program renders config.map with "
        "config.default selecting it; request nvidia.com/gpu.shared (1 replica) on that "
        "cohort."
    ),
    url="https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus",
    tags=["workloads", "time-slicing"],
)

MIG_STRATEGY_CONSISTENT = StackValidationPolicy(
    name="mig-strategy-consistent",
    description=(
        "nvidia.com/mig-* requests need a device plugin with the mixed MIG strategy, "
        "and the profile exists for the cohort's GPU model."
    ),
    validate=mig_strategy_consistent_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
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
        }
    ),
    remediation_steps=(
        "Prepare the MIG geometry first, then set "
        f"{PROJECT}:cohorts[i].sharing.mode: mig with .sharing.migStrategy: mixed, "
        ".sharing.gpuModel and .sharing.migProfile; request a profile that exists on "
        "that GPU (A100 40GB: 1g.5gb ... 7g.40gb; A100/H100 80GB: 1g.10gb ... 7g.80gb; "
        "H200: 1g.18gb ... 7g.141gb)."
    ),
    url="https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html",
    tags=["workloads", "mig"],
)


TIME_SLICING_CONFIG_ATTACHED = StackValidationPolicy(
    name="time-slicing-config-attached",
    description=(
        "A ConfigMap holding a time-slicing device-plugin config is read by a device plugin (its config.name, the "
        "mounted config volume or file, or the Operator's devicePlugin.config); an unattached one changes nothing "
        "(advisory)."
    ),
    validate=time_slicing_config_attached_validator,
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.LOW,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        f"Attach the config through the device plugin's config.name/config.default ({PROJECT}:cohorts[i].sharing) "
        "or the Operator's devicePlugin.config, or delete the ConfigMap."
    ),
    url="https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus",
    tags=["workloads", "time-slicing", "review"],
)

POLICIES: Final = (SHARED_GPU_RESOURCE_NAME, TIME_SLICING_CONFIG_ATTACHED, MIG_STRATEGY_CONSISTENT)
