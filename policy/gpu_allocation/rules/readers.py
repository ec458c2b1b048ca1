"""Readers shared by the rule families: each value read the way the tool that consumes it reads it.

A rule that reads a value differently from its consumer misses violations or refuses clean stacks: Helm treats the
string ``"false"`` as true, a container's env also comes from ``envFrom`` and ``valueFrom``, and the DRA driver
judges gates by its own maturity table. And a rule that cannot read a value must say so: a :class:`Finding` records
the object, the field, the value, why and the fix, and a check that cannot judge an object reports one as a
violation at its policy's level (fail closed), never nothing. Values unknown during preview are not findings: they
are judged at ``up``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .props import UNKNOWN, show

# --------------------------------------------------------------------------- findings


@dataclass(frozen=True)
class Finding:
    """One offence as a record: turned into text only when it is reported."""

    subject: str
    """The object, e.g. ``kubernetes:apps/v1:DaemonSet 'gpu-system/x'``."""
    field: str
    """The field read, e.g. ``spec.template.spec.nodeSelector``."""
    problem: str
    """What is wrong, said after the field and its value."""
    fix: str
    """What to change."""
    value: Any = None
    shown: bool = False
    """Show ``value`` after the field."""
    urn: str | None = None

    def text(self) -> str:
        """The violation message: object, field (and value), problem, fix."""
        value = f" is {show(self.value)}," if self.shown else ""
        return f"{self.subject}: {self.field}{value} {self.problem}. {self.fix}."


CANNOT_JUDGE: Final = "so this policy cannot judge the object and refuses it (fail closed)"
"""Said by every finding of a value a check cannot read."""

READ_FIX: Final = (
    "Give the field a value of the type Kubernetes and the chart expect (plain, at most 64 levels deep), or remove "
    "it; then preview again"
)


def cannot_judge(subject: str, field: str, why: str, urn: str | None = None, fix: str = READ_FIX) -> Finding:
    """A finding for a value that a check cannot read: the object, the field and why."""
    return Finding(subject, field, f"{why}, {CANNOT_JUDGE}", fix, urn=urn)


def report_findings(findings: Iterable[Finding], report: Any, *, with_urn: bool = True) -> None:
    """Report each finding once, in a stable order (resource policies pass ``with_urn=False``)."""
    seen: set[str] = set()
    for finding in findings:
        message = finding.text()
        if message in seen:
            continue
        seen.add(message)
        report(message, finding.urn if with_urn else None)


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
    "gpu-operator": {
        "clusterPolicy.deployCR": True,
        "gpuCluster.deployCR": False,
        "devicePlugin.enabled": True,
        "driver.enabled": True,
        "nfd.enabled": True,
        "gfd.enabled": True,
        "operator.upgradeCRD": True,
    },
    "device-plugin": {"gfd.enabled": False},
    "dra": {"webhook.enabled": False},
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


def helm_flag_set(values: Any, path: str) -> bool:
    """Tell whether a values flag is set at all (so a message can say "default")."""
    current = values
    for key in path.split("."):
        current = current.get(key) if isinstance(current, dict) else None
        if current is None:
            return False
    return True


def kube_bool(value: Any) -> Any:
    """A field of a Kubernetes object typed boolean (a CR's spec): True/False, None when unset, UNKNOWN.

    The API server refuses any other type for such a field; a string is returned as itself so the caller can
    report the wrong type (it cannot be judged).
    """
    if value is UNKNOWN or value is None or isinstance(value, bool):
        return value
    return value if isinstance(value, str) else repr(value)


# --------------------------------------------------------------------------- Go strconv.ParseBool

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool | None:
    """``strconv.ParseBool`` (how component-base reads ``FEATURE_GATES``): True/False, None if not a boolean."""
    if text in _TRUE:
        return True
    if text in _FALSE:
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


# --------------------------------------------------------------------------- DRA driver feature gates

DRA_GATES: Final[Mapping[str, tuple[str, tuple[int, int]]]] = {
    "TimeSlicingSettings": ("alpha", (0, 2)),
    "MPSSupport": ("alpha", (0, 2)),
    "IMEXDaemonsWithDNSNames": ("beta", (0, 2)),
    "PassthroughSupport": ("alpha", (0, 3)),
    "DynamicMIG": ("alpha", (0, 3)),
    "NVMLDeviceHealthCheck": ("alpha", (0, 3)),
    "ComputeDomainCliques": ("beta", (0, 3)),
    "CrashOnNVLinkFabricErrors": ("beta", (0, 3)),
    "DeviceMetadata": ("alpha", (0, 4)),
    "DRAListTypeAttributes": ("alpha", (0, 4)),
    "FabricManagerPartitioning": ("alpha", (0, 5)),
    "HostManagedIMEXDaemon": ("alpha", (0, 5)),
    "ConsumableShares": ("alpha", (0, 5)),
    "NodeLocalFabricIPC": ("alpha", (0, 6)),
}
"""The driver's own gates: maturity and the driver minor that added them.

From ``pkg/featuregates`` of kubernetes-sigs/dra-driver-nvidia-gpu (docs/reference/feature-gates.md); a gate exists
in a release from its minor on.
"""

LOGGING_GATES: Final[Mapping[str, str]] = {
    "ContextualLogging": "beta",
    "LoggingBetaOptions": "beta",
    "LoggingAlphaOptions": "alpha",
    "AllAlpha": "alpha",
    "AllBeta": "beta",
}
"""Gates every component-base feature gate knows (``logsapi.AddFeatureGates`` and the AllAlpha/AllBeta switches)."""

SUPPORTED_DRA_VERSIONS: Final = ("0.4.1", "0.5.0")
"""The DRA driver releases this program installs (the mirror's 0.4.1, the reviewed 0.5.0)."""
_NEWEST: Final = SUPPORTED_DRA_VERSIONS[-1]


def dra_minor(version: Any) -> tuple[tuple[int, int], str]:
    """The driver's (major, minor) and how it is named; an unknown version is judged as the newest supported."""
    if isinstance(version, str):
        text = version.strip().lstrip("v")
        parts = text.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return (int(parts[0]), int(parts[1])), f"DRA driver {text}"
    major, minor, _ = _NEWEST.split(".")
    return (int(major), int(minor)), f"DRA driver {_NEWEST} (the version is not told; judged as the newest supported)"


def gate_maturity(gate: str, minor: tuple[int, int]) -> str | None:
    """``alpha``/``beta`` (logging gates too), or None when that driver release does not know the gate."""
    if gate in LOGGING_GATES:
        return LOGGING_GATES[gate]
    known = DRA_GATES.get(gate)
    if known is None or known[1] > minor:
        return None
    return known[0]


def gate_text(value: Any) -> str:
    """How the chart prints a gate value into ``FEATURE_GATES`` (``{{ $key }}={{ $value }}``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_feature_gates(text: str) -> list[tuple[str, str]]:
    """``A=true,B=false,`` as component-base splits it: (name, value text) pairs."""
    pairs = []
    for item in text.split(","):
        name, _, value = item.strip().partition("=")
        if name.strip():
            pairs.append((name.strip(), value.strip()))
    return pairs


def gate_findings(
    subject: str,
    field: str,
    gates: Iterable[tuple[str, Any, bool | None]],
    version: Any,
    allowed: Iterable[str],
    fix_path: str,
    urn: str | None = None,
    not_boolean: str = "which the driver cannot parse as a boolean (strconv.ParseBool), so it fails to start",
) -> list[Finding]:
    """Judge gates as the driver does: an unknown gate or a non-boolean value stops it; alpha gates on are refused.

    An alpha gate reviewed into ``allowed`` passes; beta, GA and logging beta gates pass.

    ``gates``: (name, value as written, enabled: True/False/None when it is no boolean).
    """
    minor, named = dra_minor(version)
    reviewed = set(allowed)
    findings = []
    for gate, raw, enabled in gates:
        maturity = gate_maturity(gate, minor)
        where = f"{field} {gate}"
        if maturity is None:
            known = sorted([*(g for g, (_, since) in DRA_GATES.items() if since <= minor), *LOGGING_GATES])
            findings.append(
                Finding(
                    subject,
                    where,
                    f"names a gate {named} does not know: it refuses to start on an unrecognized feature gate",
                    f"Remove {gate} ({fix_path}); the gates it knows are {', '.join(known)}",
                    urn=urn,
                )
            )
        elif enabled is None:
            findings.append(
                Finding(
                    subject,
                    where,
                    not_boolean,
                    f"Set {gate} to true or false ({fix_path})",
                    value=raw,
                    shown=True,
                    urn=urn,
                )
            )
        elif enabled and maturity == "alpha" and gate not in reviewed:
            findings.append(
                Finding(
                    subject,
                    where,
                    f"which turns on an Alpha gate of {named} (off by default); the guide says not to enable gates "
                    "to make a demo start, and Alpha features change or disappear between releases",
                    f"Remove {gate} ({fix_path}), or add '{gate}' to this policy's allowedFeatureGates after a review",
                    value=raw,
                    shown=True,
                    urn=urn,
                )
            )
    return findings
