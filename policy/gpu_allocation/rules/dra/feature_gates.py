"""dra-feature-gates-allowlisted: DRA driver gates turned on are reviewed, known and boolean.

Seed: "Do not enable all feature gates to make a demo start". Gates reach the driver from the DRA chart's values, the
Operator's draDriver.featureGates, a GPUCluster, and the FEATURE_GATES env of the driver's own workloads, which are
recognised whatever their chart or image is called (:meth:`..resource.Resource.belongs_to`).
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from ...vocab.labels import DRA, GPU_OPERATOR, PROJECT
from ...vocab.owners import DRA_KIND, owner_of_chart
from ..charts import HELM_CHART_LABEL
from ..fail_closed import fail_closed, reads_pods_and_helm
from ..findings import report_findings
from ..operator_crs import cr_mode
from ..props import UNKNOWN, as_dict, config_strings, dig, string_list
from ..readers import effective_env
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
        return [(field, _value_gates(gates, printed=owner == DRA), version, f"{PROJECT}:dra.featureGates", owner)]
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
        return [(field, _value_gates(gates, printed=False), version, fix, GPU_OPERATOR)]
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


DRA_FEATURE_GATES_ALLOWLISTED = ResourceValidationPolicy(
    name="dra-feature-gates-allowlisted",
    description=(
        "DRA driver feature gates set to true (the rendered FEATURE_GATES env, a Release's "
        "featureGates, the Operator's draDriver.featureGates) must be allow-listed in the pack "
        "config."
    ),
    validate=fail_closed(_reads_gates)(dra_feature_gates_allowlisted_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={"allowedFeatureGates": string_list([], "Feature gates reviewed for this cluster.")}
    ),
    remediation_steps=(
        f"Keep {PROJECT}:dra.featureGates empty ({{}} as in the guide); enable a gate "
        "only after review, and add it to allowedFeatureGates in the policy-pack config."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra"],
)
