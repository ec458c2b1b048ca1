"""Where a device plugin's configs come from, and which one its nodes get: values, mounts, the Operator's config.

A time-slicing or MIG config only acts through the plugin that reads it: the chart's ``config.map``/``config.name``
(a Release's values), the ConfigMap the rendered DaemonSet mounts as ``available-configs`` and the default its
config-manager selects, the one file a hand-written DaemonSet names (``CONFIG_FILE``/``--config-file``), or the GPU
Operator's ``devicePlugin.config``. A config that cannot be read is an error of the :class:`SharingConfig` (reported
by the rule: fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..vocab.parsing import load_yaml
from ..vocab.selectors import label_values
from .installations import Installation, is_plugin_container
from .props import UNKNOWN, as_dict, as_list, contains_unknown, dig, show
from .readers import helm_truthy
from .resource import CONFIG_MAP_TYPE, Resource
from .shapes import containers, pod_placement
from .stack_view import StackView


@dataclass
class SharingConfig:
    """A device plugin's named configs, where they live, and which one its nodes get by default."""

    documents: dict[str, Any]
    default_key: str | None
    default_text: Any
    errors: list[str]
    where: str
    """Where the config documents live, e.g. ``… Chart 'x' values config.map`` or ``… ConfigMap 'y' (…) data``."""
    selector: str
    """What selects the default, e.g. ``… Chart 'x' values: … config.default`` (subject, field)."""
    selector_field: str


CONFIG_VOLUME: Final = "available-configs"
"""The volume the device-plugin chart mounts its configs from."""
_CONFIG_MANAGER: Final = "config-manager"


def load_documents(source: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
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
        if isinstance(volume, dict) and volume.get("name") == CONFIG_VOLUME:
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
    documents, errors = load_documents(source)
    default = config.get("default")
    fallbacks = config.get("fallbackStrategies", ["named", "single"])
    fallbacks = fallbacks if isinstance(fallbacks, list) else []
    return SharingConfig(
        documents,
        _default_key(documents, default, fallbacks),
        default,
        errors,
        f"{install.describe} values config.map",
        f"{install.describe} values",
        "config.default",
    )


def rendered_sharing_config(install: Installation, view: StackView) -> Any:
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
        documents, errors = load_documents({k: v for k, v in as_dict(data).items() if k == named[1]})
        return SharingConfig(
            documents,
            named[1] if named[1] in documents else None,
            named[1],
            errors,
            f"{install.rendered(config_map)} data",
            install.rendered(main),
            "the plugin's config file (CONFIG_FILE env or --config-file)",
        )
    documents, errors = load_documents(as_dict(data))
    managers = [c for c in containers(pod) if _CONFIG_MANAGER in c.command_line[:1]]
    default = next((v for c in managers if (v := main.env_value(c, "DEFAULT_CONFIG")) is not None), None)
    fallback_text = next((v for c in managers if (v := main.env_value(c, "FALLBACK_STRATEGIES")) is not None), None)
    if default is UNKNOWN or fallback_text is UNKNOWN:
        return UNKNOWN
    fallbacks: list[Any] = fallback_text.split(",") if isinstance(fallback_text, str) else ["named", "single"]
    return SharingConfig(
        documents,
        _default_key(documents, default, fallbacks),
        default,
        errors,
        f"{install.rendered(config_map)} data",
        install.rendered(main),
        "the config-manager env DEFAULT_CONFIG (values config.default)",
    )


def sharing_config(install: Installation, view: StackView) -> Any:
    """Return the plugin's sharing configs: a SharingConfig, None, or UNKNOWN."""
    if install.inputs_visible:
        return _values_sharing_config(install, view)
    return rendered_sharing_config(install, view)


def time_slicing_settings(document: Any) -> dict[str, Any] | None:
    """The ``sharing.timeSlicing`` block of one config document, if it has one."""
    value = dig(document, "sharing", "timeSlicing")
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Replicated:
    """The replicated-resource block a config's plugin applies: which strategy, its block, its effective strictness."""

    strategy: str
    """``timeSlicing`` or ``mps`` (the key under ``sharing``)."""
    settings: dict[str, Any]
    fail_requests_greater_than_one: Any
    """As the plugin reads it: MPS defaults an unset value to true; time-slicing leaves it off."""

    @property
    def title(self) -> str:
        """How messages name the strategy."""
        return "MPS" if self.strategy == "mps" else "time-slicing"


def replicated_settings(document: Any) -> Replicated | None:
    """The sharing block the plugin applies for one config document, read as plugin 0.20.0 reads it.

    ``Sharing.ReplicatedResources()`` (k8s-device-plugin ``api/config/v1/sharing.go`` at v0.20.0) returns
    ``sharing.mps`` whenever it is set and ``sharing.timeSlicing`` otherwise; both are the same
    ``ReplicatedResources`` type, so ``renameByDefault`` renames under MPS too. ``api/config/v1/config.go`` sets an
    unset MPS ``failRequestsGreaterThanOne`` to true ("preserve the historical MPS behavior").
    """
    mps = dig(document, "sharing", "mps")
    if isinstance(mps, dict):
        fail = mps.get("failRequestsGreaterThanOne")
        return Replicated("mps", mps, True if fail is None else fail)
    time_slicing = time_slicing_settings(document)
    if time_slicing:
        return Replicated("timeSlicing", time_slicing, time_slicing.get("failRequestsGreaterThanOne"))
    return None


PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
"""The node label that selects one of the plugin's named configs (k8s-device-plugin "Multiple Config File")."""


def selected_configs(pod: dict[str, Any]) -> frozenset[str | None] | None:
    """The ``nvidia.com/device-plugin.config`` values the nodes a pod can land on carry; None in it: unlabelled.

    The scheduler places a pod only on nodes that match its nodeSelector *and* one term of its required node affinity
    (kube-scheduler NodeAffinity filter), so ``In`` in every term binds the pod to those configs as a nodeSelector
    does. None (any config) while the placement is unknown or a term leaves the label open.
    """
    placement = pod_placement(pod)
    return None if placement is None else label_values(placement, PLUGIN_CONFIG_LABEL)


def operator_config(view: StackView, operator: Installation | None, policy: Resource | None) -> Any:
    """The GPU Operator's device-plugin configs: a SharingConfig, None, or UNKNOWN.

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
    documents, errors = load_documents(source)
    default = config.get("default")
    return SharingConfig(
        documents,
        _default_key(documents, default or None, ["named", "single"]),
        default,
        errors,
        f"{where} ConfigMap {show(name)}",
        where,
        "default",
    )
