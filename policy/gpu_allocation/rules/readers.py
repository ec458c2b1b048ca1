"""Values read the way the tool that consumes them reads them: Helm's truthiness and chart defaults, a container's env.

A rule that reads a value differently from its consumer misses violations or refuses clean stacks: Helm treats the
string ``"false"`` as true and coalesces the chart's defaults before a template runs, and a container's env also
comes from ``envFrom`` and ``valueFrom``. (The DRA driver's own reading of its feature gates lives with the rule
that judges them, :mod:`.dra.feature_gates`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR
from .props import UNKNOWN, show

# --------------------------------------------------------------------------- Helm truthiness


def helm_truthy(value: Any) -> Any:
    """What ``{{ if .Values.x }}`` sees: False only for false, 0, "", null and empty lists/maps; UNKNOWN stays.

    A string is true whatever it says: ``deployCR: "false"`` renders the CR.
    """
    if value is UNKNOWN:
        return UNKNOWN
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


CHART_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    GPU_OPERATOR: {
        "clusterPolicy.deployCR": True,
        "gpuCluster.deployCR": False,
        "devicePlugin.enabled": True,
        "driver.enabled": True,
        "nfd.enabled": True,
        "gfd.enabled": True,
        "operator.upgradeCRD": True,
        "sandboxWorkloads.enabled": False,
        "sandboxWorkloads.defaultWorkload": "container",
    },
    DEVICE_PLUGIN: {"gfd.enabled": False},
    DRA: {"webhook.enabled": False, "resources.gpus.enabled": True, "resources.computeDomains.enabled": True},
}
"""The charts' own defaults for the flags the rules read (values.yaml of gpu-operator v26.7.0,
nvidia-device-plugin 0.20.0 and dra-driver-nvidia-gpu 0.4.1/0.5.0)."""


def helm_flag(values: Any, owner: str, path: str) -> Any:
    """A values flag as the chart's template reads it: the chart default when unset; True/False or UNKNOWN.

    ``owner`` is ``gpu-operator``, ``device-plugin`` or ``dra``; ``path`` is dotted (``clusterPolicy.deployCR``).
    An unset flag takes the chart default (coalesced by Helm before the template runs).
    """
    value = _lookup(values, owner, path)
    return UNKNOWN if value is UNKNOWN else helm_truthy(value)


def _lookup(values: Any, owner: str, path: str) -> Any:
    """A value after Helm coalesces the chart defaults: the set value, else the default, else None; UNKNOWN."""
    if values is UNKNOWN:
        return UNKNOWN
    current = values
    for key in path.split("."):
        if current is UNKNOWN:
            return UNKNOWN
        current = current.get(key) if isinstance(current, dict) else None
        if current is None:
            return CHART_DEFAULTS.get(owner, {}).get(path)
    return current


def helm_condition(values: Any, owner: str, condition: str) -> Any:
    """A Chart.yaml dependency ``condition`` as Helm evaluates it: the first path holding a boolean decides.

    Helm skips a path that is unset or holds a non-boolean (a string ``"false"`` only logs a warning) and enables
    the subchart when no path decides. True/False, or UNKNOWN.
    """
    for path in condition.split(","):
        value = _lookup(values, owner, path.strip())
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(value, bool):
            return value
    return True


_YAML_TRUE: Final = frozenset({"true", "yes", "on", "y"})
_YAML_FALSE: Final = frozenset({"false", "no", "off", "n"})


def helm_rendered_bool(values: Any, owner: str, path: str) -> Any:
    """A flag the chart prints into a CR field (``enabled: {{ .Values.x.enabled }}``), read as the CR reads it.

    The printed text is parsed as YAML: ``"false"`` becomes false. True/False, UNKNOWN, or None when the text is no
    boolean (the API server refuses the CR: cannot tell).
    """
    value = _lookup(values, owner, path)
    if value is UNKNOWN or isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _YAML_TRUE:
            return True
        if text in _YAML_FALSE:
            return False
    return None


# --------------------------------------------------------------------------- container env


@dataclass(frozen=True)
class EnvEntry:
    """One variable of a container's effective env, and where it comes from."""

    name: str
    value: Any
    """The literal value, UNKNOWN, or None when it comes from a reference (shown by ``source``)."""
    source: str
    """``env``, ``env valueFrom configMapKeyRef 'cm' key 'k'``, ``envFrom[0] ConfigMap 'cm' key 'k'``..."""


@dataclass
class EffectiveEnv:
    """A container's env as the kubelet builds it: ``envFrom`` sources in order, then ``env`` over them."""

    entries: dict[str, EnvEntry]
    unknown: bool
    """Some source is unknown during preview (judged at ``up``)."""
    cannot_tell: list[str]
    """Sources whose names cannot be told (an ``envFrom`` object that is not in the stack, a wrong type)."""


EnvLookup = Any
"""``lookup(kind, name) -> props | None | UNKNOWN``: a ConfigMap or Secret of the workload's namespace in the stack."""


_REF_KINDS: Final = (("configMapRef", "ConfigMap"), ("secretRef", "Secret"))
_KEY_REF_KINDS: Final = (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret"))


def _env_keys(props: Any) -> Any:
    """The keys a ConfigMap/Secret gives ``envFrom`` (``data`` and, for a Secret, ``stringData``); UNKNOWN."""
    keys: list[str] = []
    for table in ("data", "stringData"):
        value = props.get(table) if isinstance(props, dict) else None
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(value, dict):
            keys += [str(k) for k in value]
    return keys


def effective_env(spec: Mapping[str, Any], lookup: EnvLookup) -> EffectiveEnv:
    """Read a container's env the way the kubelet does: ``envFrom`` (with ``prefix``), then ``env``.

    A value from ``valueFrom`` is named by its reference; a Secret's value is never read. An ``envFrom`` source
    that is not in the stack cannot be told: the caller fails closed on it where the names matter.
    """
    entries: dict[str, EnvEntry] = {}
    unknown = False
    cannot_tell: list[str] = []
    sources = spec.get("envFrom")
    if sources is UNKNOWN:
        unknown = True
    for index, source in enumerate(sources if isinstance(sources, list) else []):
        if not isinstance(source, dict):
            unknown = unknown or source is UNKNOWN
            continue
        prefix = source.get("prefix") or ""
        found = next(((field, kind) for field, kind in _REF_KINDS if field in source), None)
        if found is None:
            continue
        ref = source.get(found[0])
        name = ref.get("name") if isinstance(ref, dict) else None
        if ref is UNKNOWN or name is UNKNOWN or prefix is UNKNOWN:
            unknown = True
            continue
        if not isinstance(name, str) or not isinstance(prefix, str):
            cannot_tell.append(f"envFrom[{index}] names no {found[1]}")
            continue
        props = lookup(found[1], name)
        keys = UNKNOWN if props is UNKNOWN else (None if props is None else _env_keys(props))
        if keys is UNKNOWN:
            unknown = True
            continue
        if keys is None:
            cannot_tell.append(
                f"envFrom[{index}] {found[1]} '{name}' is not in this stack, so the variables it sets cannot be told"
            )
            continue
        for key in keys:
            entries[prefix + key] = EnvEntry(prefix + key, None, f"envFrom[{index}] {found[1]} '{name}' key '{key}'")
    env = spec.get("env")
    if env is UNKNOWN:
        unknown = True
    for entry in env if isinstance(env, list) else []:
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        if name is UNKNOWN:
            unknown = True
            continue
        if not isinstance(name, str):
            continue
        value_from = entry.get("valueFrom")
        if isinstance(value_from, dict):
            entries[name] = EnvEntry(name, None, _value_from_source(value_from))
        else:
            entries[name] = EnvEntry(name, entry.get("value"), "env")
    return EffectiveEnv(entries, unknown, cannot_tell)


def _value_from_source(value_from: Mapping[str, Any]) -> str:
    for field, kind in _KEY_REF_KINDS:
        ref = value_from.get(field)
        if isinstance(ref, dict):
            return f"env valueFrom {field} ({kind} {show(ref.get('name'))} key {show(ref.get('key'))})"
    for field in ("fieldRef", "resourceFieldRef"):
        if field in value_from:
            return f"env valueFrom {field}"
    return "env valueFrom"
