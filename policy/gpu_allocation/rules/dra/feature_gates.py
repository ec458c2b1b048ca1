"""dra-feature-gates-allowlisted: DRA driver gates turned on are reviewed, known and boolean.

Seed: "Do not enable all feature gates to make a demo start". Gates reach the driver from the DRA chart's values, the
Operator's draDriver.featureGates, a GPUCluster, and the FEATURE_GATES env of the driver's own workloads, which are
recognised whatever their chart or image is called (:meth:`..resource.Resource.belongs_to`).
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab.labels import DRA, GPU_OPERATOR, PROJECT
from ...vocab.owners import DRA_KIND, owner_of_chart
from ..charts import HELM_CHART_LABEL
from ..declare import resource_policy
from ..fail_closed import fail_closed, reads_pods_and_helm
from ..findings import report_findings
from ..operator_crs import cr_mode
from ..props import UNKNOWN, as_dict, config_strings, dig, string_list
from ..readers import effective_env, helm_flag
from ..resource import Resource
from ..shapes import containers
from .driver_gates import gate_findings, gate_text, parse_feature_gates, parse_go_bool

OPERATOR_DRA_VERSION: Final = "v0.5.0"
"""The DRA driver the GPU Operator v26.7.0 deploys when draDriver.version is not set (its values.yaml)."""


def _dra_version(resource: Resource) -> Any:
    """The DRA driver release a workload or Helm resource installs: Release version, chart stamp/label, image tag."""
    if resource.is_helm:
        return resource.props.get("version")
    stamp = resource.chart_stamp
    if isinstance(stamp, tuple) and owner_of_chart(stamp[0]) == DRA:
        return stamp[1]
    label = resource.label(HELM_CHART_LABEL)
    if isinstance(label, str) and owner_of_chart(label) == DRA:
        return label.rsplit("-", 1)[-1]
    return None


def _value_gates(gates: Any, *, printed: bool) -> list[tuple[str, Any, bool | None]]:
    """Gates from a values map: printed into FEATURE_GATES (the DRA chart), or typed (the Operator's CR field).

    The Operator renders them with toYaml into spec.draDriver.featureGates, typed map[string]bool.
    """
    result: list[tuple[str, Any, bool | None]] = []
    for gate, value in sorted(as_dict(gates).items()):
        if value is UNKNOWN:
            continue
        enabled = parse_go_bool(gate_text(value)) if printed else (value if isinstance(value, bool) else None)
        result.append((gate, value, enabled))
    return result


GATES_ENV: Final = "FEATURE_GATES"

DRA_ENV_LISTS: Final = (
    (("kubeletPlugin", "containers", "gpus", "env"), "resources.gpus.enabled"),
    (("kubeletPlugin", "containers", "computeDomains", "env"), "resources.computeDomains.enabled"),
    (("controller", "containers", "computeDomain", "env"), "resources.computeDomains.enabled"),
)
"""The DRA chart's env lists and the switch that renders their container.

dra-driver-nvidia-gpu ``templates/kubeletplugin.yaml`` and ``controller.yaml`` (0.4.1, 0.5.0) copy each list with
``toYaml`` after the chart's own ``FEATURE_GATES`` (which is rendered only when ``featureGates`` is not empty)."""

OPERATOR_ENV_LISTS: Final = (
    ("gpus", "kubeletPlugin", "env"),
    ("computeDomains", "kubeletPlugin", "env"),
    ("computeDomains", "controller", "env"),
)
"""The Operator's DRA env lists under ``draDriver`` (values) / ``spec.draDriver`` (GPUCluster).

NVIDIA/gpu-operator ``manifests/state-dra-driver/0500_daemonset.yaml`` and ``0600_controller-deployment.yaml``
append each entry as ``name``/``value`` (``{{ .Value | quote }}``: a ``valueFrom`` becomes ``""``) after the
Operator's own ``FEATURE_GATES``."""


def _env_list_gates(
    resource: Resource,
    env: Any,
    field: str,
    *,
    verbatim: bool,
) -> Any:
    """The gates an env list sets through ``FEATURE_GATES``: [(name, value, enabled)], None when it sets none.

    The list comes after the chart's or Operator's own ``FEATURE_GATES``, and the kubelet keeps the last entry of a
    name (``makeEnvironmentVariables``, kubernetes ``pkg/kubelet/kubelet_pods.go``), so the list's last
    ``FEATURE_GATES`` is what the driver parses. ``verbatim``: the entry is copied as written (the DRA chart's
    ``toYaml``), so a ``valueFrom`` cannot be read here (fail closed); else only its ``value`` is printed.
    """
    if env is None or env is UNKNOWN:
        return None
    if not isinstance(env, list):
        resource.cannot_read(field, "is not a list of env entries")
        return None
    entries = [e for e in env if isinstance(e, dict) and e.get("name") == GATES_ENV]
    if not entries:
        return None
    entry = entries[-1]
    value = entry.get("value")
    if value is UNKNOWN:
        return None
    if verbatim and entry.get("valueFrom") is not None:
        resource.cannot_read(f"{field} {GATES_ENV}", "comes from valueFrom, which this check cannot read")
        return None
    if value is None:
        value = ""
    if not isinstance(value, str):
        resource.cannot_read(f"{field} {GATES_ENV}", "is not a string (an env value is text)")
        return None
    return [(n, v, parse_go_bool(v)) for n, v in parse_feature_gates(value)]


def _env_sources(resource: Resource, base: Any, prefix: str, version: Any, reader: str) -> list[Any]:
    """(field, gates, version, fix, reader) for every env list of a DRA Release, Operator values or GPUCluster.

    The fix names the env entry itself: that list, not ``featureGates``, is what sets the gate.
    """
    sources = []
    lists: list[tuple[tuple[str, ...], Any]]
    if reader == DRA:
        lists = [(path, helm_flag(base, DRA, switch)) for path, switch in DRA_ENV_LISTS]
    else:
        lists = [(path, True) for path in OPERATOR_ENV_LISTS]
    for path, rendered in lists:
        if rendered is False:
            continue
        field = f"{prefix}{'.'.join(path)}"
        gates = _env_list_gates(resource, dig(base, *path), field, verbatim=reader == DRA)
        if gates is not None:
            where = f"{field} {GATES_ENV}"
            sources.append((where, gates, version, f"the {GATES_ENV} entry of {field}", DRA))
    return sources


def _gate_sources(resource: Resource) -> Any:
    """(field, gates, version, fix) for this resource; UNKNOWN during preview; None if n/a.

    Gates reach the driver from DRA chart values (printed into FEATURE_GATES), the Operator's
    draDriver.featureGates (rendered into the GPUCluster), a GPUCluster's spec.draDriver.featureGates, and the
    FEATURE_GATES env of the driver's containers.
    """
    owner = resource.chart_owner
    if owner in {DRA, GPU_OPERATOR}:
        key = ("featureGates",) if owner == DRA else ("draDriver", "featureGates")
        gates = dig(resource.values, *key)
        if gates is UNKNOWN:
            return UNKNOWN
        field = f"values {'.'.join(key)}"
        if gates is not None and not isinstance(gates, dict):
            resource.cannot_read(field, "is not a map of gate names to booleans")
            return []
        version = _dra_version(resource) if owner == DRA else dig(resource.values, "draDriver", "version")
        if owner == GPU_OPERATOR and version is None:
            version = OPERATOR_DRA_VERSION
        fix = f"{PROJECT}:dra.featureGates"
        found = [(field, _value_gates(gates, printed=owner == DRA), version, fix, owner)]
        if owner == DRA:
            return found + _env_sources(resource, resource.values, "values ", version, DRA)
        operator = dig(resource.values, "draDriver")
        return found + _env_sources(resource, operator, "values draDriver.", version, GPU_OPERATOR)
    if cr_mode(resource) == "gpu-cluster":
        gates = dig(resource.props, "spec", "draDriver", "featureGates")
        if gates is UNKNOWN:
            return UNKNOWN
        field = "spec.draDriver.featureGates"
        if gates is not None and not isinstance(gates, dict):
            resource.cannot_read(field, "is not a map of gate names to booleans")
            return []
        version = dig(resource.props, "spec", "draDriver", "version") or OPERATOR_DRA_VERSION
        fix = f"{field} of {resource.describe}"
        found = [(field, _value_gates(gates, printed=False), version, fix, GPU_OPERATOR)]
        driver = dig(resource.props, "spec", "draDriver")
        return found + _env_sources(resource, driver, "spec.draDriver.", version, GPU_OPERATOR)
    pod = resource.pod_spec
    if not isinstance(pod, dict) or not resource.belongs_to(DRA):
        return None
    sources = []
    for container in containers(pod):
        env = effective_env(container.spec, lambda kind, name: None)
        where = f"container '{container.name}' env FEATURE_GATES"
        entry = env.entries.get("FEATURE_GATES")
        if entry is not None and entry.source != "env":
            resource.cannot_read(where, f"comes from {entry.source}, which this check cannot read")
        elif entry is not None and isinstance(entry.value, str):
            gates = [(n, v, parse_go_bool(v)) for n, v in parse_feature_gates(entry.value)]
            sources.append((where, gates, _dra_version(resource), f"{PROJECT}:dra.featureGates", DRA))
        for why in env.cannot_tell:
            source = why.split(" is not in this stack", 1)[0]
            resource.cannot_read(
                f"container '{container.name}' {source}", "may set FEATURE_GATES, which this check cannot read"
            )
    return sources


def dra_feature_gates_allowlisted_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse alpha DRA driver gates turned on (unless reviewed), unknown gates and gate values that are no boolean."""
    resource = Resource.from_args(args)
    resource.not_applicable_if_inputs_hidden(
        args, "the FEATURE_GATES env of the DRA workloads it renders is checked instead"
    )
    sources = _gate_sources(resource)
    if sources is None:
        args.not_applicable("not a DRA chart, Operator chart, GPUCluster or DRA driver workload")
        return
    if sources is UNKNOWN:
        args.not_applicable("the feature gates are unknown during preview")
        return
    allowed = config_strings(args.get_config(), "allowedFeatureGates", ())
    for field, gates, version, fix, reader in sources:
        typed = (
            "which the GPUCluster's spec.draDriver.featureGates (a map of booleans) refuses"
            if reader == GPU_OPERATOR
            else None
        )
        findings = gate_findings(resource.describe, field, gates, version, allowed, fix, **_not_boolean(typed))
        report_findings(findings, report_violation, with_urn=False)


def _not_boolean(text: str | None) -> dict[str, str]:
    return {} if text is None else {"not_boolean": text}


def _reads_gates(resource: Resource) -> bool:
    return reads_pods_and_helm(resource) or cr_mode(resource) == "gpu-cluster"


DRA_FEATURE_GATES_ALLOWLISTED = resource_policy(
    "dra-feature-gates-allowlisted",
    (
        "DRA driver feature gates set to true (the rendered FEATURE_GATES env, a Release's "
        "featureGates, the Operator's draDriver.featureGates) must be allow-listed in the pack "
        "config."
    ),
    fail_closed(_reads_gates)(dra_feature_gates_allowlisted_validator),
    severity=Severity.MEDIUM,
    remediation=(
        f"Keep {PROJECT}:dra.featureGates empty ({{}} as in the guide); enable a gate "
        "only after review, and add it to allowedFeatureGates in the policy-pack config."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra"],
    config={"allowedFeatureGates": string_list([], "Feature gates reviewed for this cluster.")},
)
