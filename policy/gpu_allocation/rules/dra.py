"""DRA policies: current API shapes, reviewed feature gates, a webhook with TLS.

Seed: "These examples use resource.k8s.io/v1. Kubernetes 1.31's former alpha shape is
not a drop-in manifest", "DeviceClass has no suitableNodes field", "The request uses
requests[].exactly; Pod claims refer directly to resourceClaimTemplateName, without the
old source wrapper", "The old resourceHandles example is not the current
structured-allocation shape", "Do not enable all feature gates to make a demo start",
and the webhook "requires reachable webhook endpoints and validated TLS/cert-manager or
existing-secret configuration".
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

from ..vocab import labels as vocab
from .props import (
    UNKNOWN,
    as_dict,
    as_list,
    compact_json,
    config_strings,
    contains_unknown,
    dig,
    show,
)
from .readers import (
    effective_env,
    gate_findings,
    gate_text,
    helm_flag,
    parse_feature_gates,
    parse_go_bool,
    report_findings,
)
from .shapes import (
    DRA,
    GPU_OPERATOR,
    HELM_CHART_LABEL,
    PROJECT,
    Resource,
    chart_inputs_hidden,
    classify_chart,
    containers,
    cr_mode,
    fail_closed,
    reads_pods_and_helm,
)

DRA_GROUP: Final = "resource.k8s.io"
CURRENT_API: Final = f"{DRA_GROUP}/v1"
DRA_KINDS: Final = frozenset(
    {
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceSlice",
        "ResourceClass",
        "ResourceClaimParameters",
        "ResourceClassParameters",
        "PodSchedulingContext",
    }
)
_REMOVED_KINDS: Final = {
    "ResourceClass": "DeviceClass",
    "ResourceClaimParameters": "DeviceClass/requests selectors",
    "ResourceClassParameters": "DeviceClass config",
    "PodSchedulingContext": "structured parameters (no replacement object)",
}
_LEGACY_REQUEST_KEYS: Final = (
    "deviceClassName",
    "allocationMode",
    "count",
    "selectors",
    "adminAccess",
    "tolerations",
)
_DRA_PATH: Final = f"{PROJECT}:dra"
OPERATOR_DRA_VERSION: Final = "v0.5.0"
"""The DRA driver the GPU Operator v26.7.0 deploys when draDriver.version is not set (its values.yaml)."""


def _find_key(value: Any, key: str, path: str = "") -> str | None:
    """Return the path of the first ``key`` anywhere in plain data."""
    if isinstance(value, dict):
        for name, item in value.items():
            here = f"{path}.{name}" if path else name
            if name == key:
                return here
            found = _find_key(item, key, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_key(item, key, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _request_findings(requests: Any, where: str) -> list[str]:
    findings = []
    for index, request in enumerate(as_list(requests)):
        if not isinstance(request, dict):
            continue
        legacy = [k for k in _LEGACY_REQUEST_KEYS if k in request]
        if "exactly" not in request and "firstAvailable" not in request:
            findings.append(
                f"{where}[{index}] ({compact_json(request)}) has no 'exactly' block: in "
                f"{CURRENT_API} a request is {{name, exactly: {{deviceClassName, "
                "allocationMode, count, selectors}}"
            )
        elif legacy:
            findings.append(
                f"{where}[{index}] sets {', '.join(legacy)} directly on the request; in "
                f"{CURRENT_API} they belong under {where}[{index}].exactly"
            )
    return findings


def _object_findings(resource: Resource, allowed: tuple[str, ...]) -> list[str]:
    findings = []
    group_version = resource.api_group_version
    if group_version not in allowed:
        findings.append(
            f"uses {group_version}, not {CURRENT_API}: the former alpha/beta shapes are "
            "not drop-in manifests for current clusters"
        )
    api_version = resource.props.get("apiVersion")
    if isinstance(api_version, str) and api_version not in allowed:
        if api_version != group_version:
            findings.append(f"sets apiVersion {show(api_version)}")
    replacement = _REMOVED_KINDS.get(resource.kind)
    if replacement is not None:
        findings.append(f"kind {resource.kind} is gone; use {replacement}")
    spec = as_dict(resource.props.get("spec"))
    if resource.kind == "DeviceClass" and "suitableNodes" in spec:
        findings.append(
            f"spec.suitableNodes is {show(spec['suitableNodes'])}, but DeviceClass has "
            "no suitableNodes field in this API; constrain workloads with their node "
            "selector/affinity and let DRA match devices"
        )
    if resource.kind == "ResourceClaim":
        findings += _request_findings(dig(spec, "devices", "requests"), "spec.devices.requests")
        claim_spec = spec
        prefix = "spec"
    elif resource.kind == "ResourceClaimTemplate":
        findings += _request_findings(dig(spec, "spec", "devices", "requests"), "spec.spec.devices.requests")
        claim_spec = as_dict(spec.get("spec"))
        prefix = "spec.spec"
    else:
        claim_spec, prefix = {}, ""
    for old in ("resourceClassName", "parametersRef"):
        if old in claim_spec:
            findings.append(
                f"{prefix}.{old} is the Kubernetes 1.31 alpha claim shape; use "
                "devices.requests[].exactly.deviceClassName"
            )
    handles = _find_key(resource.props, "resourceHandles")
    if handles is not None:
        findings.append(
            f"{handles} is the old resourceHandles shape, not the current structured "
            "allocation (status.allocation.devices.results)"
        )
    return findings


def _pod_findings(pod: dict[str, Any]) -> list[str]:
    findings = []
    for index, claim in enumerate(as_list(pod.get("resourceClaims"))):
        if isinstance(claim, dict) and "source" in claim:
            findings.append(
                f"pod resourceClaims[{index}] wraps its reference in 'source' "
                f"({compact_json(claim['source'])}); Pod claims refer directly to "
                "resourceClaimTemplateName or resourceClaimName"
            )
    return findings


def dra_api_current_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse old DRA API versions and shapes in DRA objects, pods and chart values."""
    resource = Resource.from_args(args)
    allowed = config_strings(args.get_config(), "allowedApiVersions", (CURRENT_API,))
    path = resource.config_path("", _DRA_PATH)
    if resource.inputs_hidden:
        args.not_applicable(chart_inputs_hidden("the DeviceClasses and pod templates it renders are checked instead"))
        return
    if resource.is_kubernetes and resource.api_group_version.startswith(f"{DRA_GROUP}/") and resource.kind in DRA_KINDS:
        findings = _object_findings(resource, allowed)
    elif resource.chart_owner == DRA:
        version = dig(resource.values, "resourceApiVersion")
        if version is UNKNOWN:
            args.not_applicable("the chart values are unknown during preview")
            return
        findings = []
        if isinstance(version, str) and version and version not in allowed:
            findings.append(
                f"values resourceApiVersion is {show(version)}; leave it empty (the "
                f"chart detects {CURRENT_API}) or set {CURRENT_API}"
            )
    elif isinstance(resource.pod_spec, dict):
        findings = _pod_findings(resource.pod_spec)
        path = resource.config_path("", f"the manifest of {resource.describe}")
    else:
        args.not_applicable("not a DRA object, DRA chart or pod template")
        return
    for finding in findings:
        report_violation(f"{resource.describe}: {finding}. Write it for {CURRENT_API} ({path}).", None)


# --------------------------------------------------------------------------- gates


def _is_dra_workload(resource: Resource) -> bool:
    if resource.label(vocab.OWNER_LABEL) == DRA:
        return True
    if resource.label("app.kubernetes.io/name") == "dra-driver-nvidia-gpu":
        return True
    pod = resource.pod_spec
    return isinstance(pod, dict) and any(
        "dra-driver-nvidia-gpu" in str(c.spec.get("image", "")) for c in containers(pod)
    )


def _dra_version(resource: Resource) -> Any:
    """The DRA driver release a workload or Helm resource installs: Release version, chart stamp/label, image tag."""
    if resource.is_helm:
        return resource.props.get("version")
    stamp = resource.chart_stamp
    if isinstance(stamp, tuple) and classify_chart(stamp[0]) == DRA:
        return stamp[1]
    label = resource.label(HELM_CHART_LABEL)
    if isinstance(label, str) and classify_chart(label) == DRA:
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
    if not isinstance(pod, dict) or not _is_dra_workload(resource):
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
    if resource.inputs_hidden:
        args.not_applicable(
            chart_inputs_hidden("the FEATURE_GATES env of the DRA workloads it renders is checked instead")
        )
        return
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


# --------------------------------------------------------------------------- webhook


def _webhook_problem(webhook: dict[str, Any], issuer_types: tuple[str, ...]) -> Any:
    tls = webhook.get("tls")
    mode = dig(tls, "mode")
    if mode is UNKNOWN or tls is UNKNOWN:
        return UNKNOWN
    if mode == "cert-manager":
        cert_manager = dig(tls, "certManager")
        if cert_manager is UNKNOWN:
            return UNKNOWN
        issuer_type = dig(cert_manager, "issuerType")
        if issuer_type not in issuer_types:
            return (
                f"webhook.tls.mode is cert-manager with certManager.issuerType "
                f"{show(issuer_type)} (expected one of {', '.join(issuer_types)})"
            )
        issuer_name = dig(cert_manager, "issuerName")
        if issuer_type != "selfsigned" and not (isinstance(issuer_name, str) and issuer_name):
            return f"webhook.tls.certManager.issuerType is {show(issuer_type)} but issuerName is {show(issuer_name)}"
        return None
    if mode == "secret":
        name = dig(tls, "secret", "name")
        if name is UNKNOWN:
            return UNKNOWN
        if not (isinstance(name, str) and name):
            return f"webhook.tls.mode is secret but tls.secret.name is {show(name)}"
        return None
    return f"webhook.tls.mode is {show(mode)} (expected cert-manager or secret)"


_WEBHOOK_FIX: Final = (
    "The webhook uses failurePolicy: Fail, so without reachable endpoints and validated TLS every DRA "
    f"admission fails. Set {PROJECT}:dra.webhook to tls.mode cert-manager with certManager.issuerType (and "
    "issuerName for clusterissuer/issuer; cert-manager CRDs installed) or tls.mode secret with tls.secret.name "
    "and tls.secret.caBundle, or keep the webhook disabled."
)
_INJECT_CA: Final = "cert-manager.io/inject-ca-from"
_ISSUER_TYPES: Final = ("selfsigned", "clusterissuer", "issuer")
_SELF_SIGNED_SUFFIX: Final = "-webhook-issuer"
"""The chart names its own self-signed Issuer ``<fullname>-webhook-issuer`` (webhook-cert-issuer.yaml)."""


def _is_dra_object(resource: Resource) -> bool:
    if resource.owner == DRA or resource.label("app.kubernetes.io/name") == "dra-driver-nvidia-gpu":
        return True
    if resource.identity is not None and resource.identity[0] == DRA:
        return True
    return resource.rendered_chart_owner == DRA


def _values_webhook_findings(resource: Resource, issuer_types: tuple[str, ...]) -> Any:
    """Findings for a Helm resource whose values are visible (a Release); UNKNOWN during preview."""
    webhook = dig(resource.values, "webhook")
    # `{{ if .Values.webhook.enabled }}`: Helm truthiness.
    enabled = helm_flag(resource.values, DRA, "webhook.enabled")
    if webhook is UNKNOWN or enabled is UNKNOWN:
        return UNKNOWN
    if enabled is not True:
        return []
    problem = _webhook_problem(as_dict(webhook), issuer_types)
    if not isinstance(problem, str):
        return []
    return [f"values webhook.enabled is true but {problem}"]


def _webhook_configuration_findings(resource: Resource) -> Any:
    """A rendered ValidatingWebhookConfiguration: every webhook needs a CA to verify the server's TLS."""
    injected = resource.annotation(_INJECT_CA)
    if injected is UNKNOWN:
        return UNKNOWN
    if isinstance(injected, str) and injected:
        return []
    webhooks = resource.props.get("webhooks")
    if webhooks is UNKNOWN:
        return UNKNOWN
    findings = []
    for index, webhook in enumerate(as_list(webhooks)):
        if not isinstance(webhook, dict):
            continue
        bundle = dig(webhook, "clientConfig", "caBundle")
        if bundle is UNKNOWN or (isinstance(bundle, str) and bundle):
            continue
        findings.append(
            f"webhooks[{index}] '{webhook.get('name')}' (failurePolicy {show(webhook.get('failurePolicy'))}) "
            f"has no clientConfig.caBundle and the object has no {_INJECT_CA} annotation, so the API server "
            "cannot verify the webhook's certificate (webhook.tls.mode secret without tls.secret.caBundle)"
        )
    return findings


def _certificate_findings(resource: Resource, issuer_types: tuple[str, ...]) -> Any:
    """A rendered cert-manager Certificate: an allowed issuer type, named."""
    issuer = dig(resource.props, "spec", "issuerRef")
    if issuer is UNKNOWN or contains_unknown(issuer):
        return UNKNOWN
    kind = dig(issuer, "kind")
    name = dig(issuer, "name")
    if not (isinstance(name, str) and name):
        return [f"spec.issuerRef.name is {show(name)} (webhook.tls.certManager.issuerName is not set)"]
    if kind == "ClusterIssuer":
        issuer_type = "clusterissuer"
    elif kind in (None, "Issuer"):
        issuer_type = "selfsigned" if name.endswith(_SELF_SIGNED_SUFFIX) else "issuer"
    else:
        return [f"spec.issuerRef.kind is {show(kind)} (expected Issuer or ClusterIssuer)"]
    if issuer_type not in issuer_types:
        return [
            f"spec.issuerRef {compact_json(issuer)} is a {issuer_type} issuer, not one of "
            f"{', '.join(issuer_types)} (webhook.tls.certManager.issuerType)"
        ]
    return []


def _webhook_deployment_findings(resource: Resource) -> Any:
    """The rendered webhook Deployment: its serving-certificate volume names a Secret."""
    pod = resource.pod_spec
    if pod is UNKNOWN:
        return UNKNOWN
    if not isinstance(pod, dict):
        return None
    serving = [c for c in containers(pod) if any(part.startswith("--tls-cert-file") for part in c.command_line)]
    if not serving:
        return None
    findings = []
    volumes = as_list(pod.get("volumes"))
    for volume in volumes:
        if not isinstance(volume, dict) or "secret" not in volume:
            continue
        secret_name = dig(volume, "secret", "secretName")
        if secret_name is UNKNOWN:
            return UNKNOWN
        if not (isinstance(secret_name, str) and secret_name):
            findings.append(
                f"volume '{volume.get('name')}' of the TLS-serving container '{serving[0].name}' names no Secret "
                f"(secret.secretName {show(secret_name)}; webhook.tls.secret.name is not set)"
            )
    return findings


def dra_webhook_needs_tls_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse an enabled DRA admission webhook without validated TLS settings."""
    resource = Resource.from_args(args)
    if resource.inputs_hidden:
        args.not_applicable(
            chart_inputs_hidden("the webhook configuration, Certificate and Deployment it renders are checked instead")
        )
        return
    issuer_types = config_strings(args.get_config(), "allowedIssuerTypes", _ISSUER_TYPES)
    findings: Any = None
    if resource.chart_owner == DRA:
        findings = _values_webhook_findings(resource, issuer_types)
        if findings is UNKNOWN:
            args.not_applicable("the webhook values are unknown during preview")
            return
    elif resource.is_kubernetes and _is_dra_object(resource):
        if resource.kind == "ValidatingWebhookConfiguration":
            findings = _webhook_configuration_findings(resource)
        elif resource.kind == "Certificate" and resource.api_group_version.startswith("cert-manager.io/"):
            findings = _certificate_findings(resource, issuer_types)
        elif resource.kind == "Deployment":
            findings = _webhook_deployment_findings(resource)
    if findings is None:
        args.not_applicable("not a DRA driver chart or a rendered DRA webhook object")
        return
    if findings is UNKNOWN:
        args.not_applicable("the webhook objects are unknown during preview")
        return
    path = resource.config_path("", f"{PROJECT}:dra.webhook")
    for finding in findings:
        where = "" if resource.is_helm else f" ({path})"
        report_violation(f"{resource.describe}: {finding}{where}. {_WEBHOOK_FIX}", None)


def _reads_dra_objects(resource: Resource) -> bool:
    return reads_pods_and_helm(resource) or resource.api_group_version.startswith(f"{DRA_GROUP}/")


def _reads_gates(resource: Resource) -> bool:
    return reads_pods_and_helm(resource) or cr_mode(resource) == "gpu-cluster"


def _reads_webhook(resource: Resource) -> bool:
    return resource.is_helm or resource.kind in {"ValidatingWebhookConfiguration", "Certificate", "Deployment"}


DRA_API_CURRENT = ResourceValidationPolicy(
    name="dra-api-current",
    description=(
        "DeviceClasses, ResourceClaims and ResourceClaimTemplates use "
        "resource.k8s.io/v1 with requests[].exactly, and no object uses suitableNodes, "
        "a pod-claim source wrapper or resourceHandles."
    ),
    validate=fail_closed(_reads_dra_objects)(dra_api_current_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "allowedApiVersions": {
                "type": "array",
                "items": {"type": "string"},
                "default": [CURRENT_API],
                "description": "DRA API versions accepted for DRA objects.",
            }
        }
    ),
    remediation_steps=(
        f"Write DRA objects for {CURRENT_API}: DeviceClass without suitableNodes, "
        "claims with devices.requests[].exactly, Pod resourceClaims with "
        f"resourceClaimTemplateName directly ({PROJECT}:dra.*)."
    ),
    url=("https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/"),
    tags=["dra"],
)

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
        properties={
            "allowedFeatureGates": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Feature gates reviewed for this cluster.",
            }
        }
    ),
    remediation_steps=(
        f"Keep {PROJECT}:dra.featureGates empty ({{}} as in the guide); enable a gate "
        "only after review, and add it to allowedFeatureGates in the policy-pack config."
    ),
    url="https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu",
    tags=["dra"],
)

DRA_WEBHOOK_NEEDS_TLS = ResourceValidationPolicy(
    name="dra-webhook-needs-tls",
    description=(
        "An enabled DRA admission webhook has validated TLS: a CA bundle or cert-manager CA "
        "injection on its rendered webhook configuration, an allowed named issuer and a serving "
        "Secret (in Release values: tls.mode cert-manager or secret with its settings)."
    ),
    validate=fail_closed(_reads_webhook)(dra_webhook_needs_tls_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "allowedIssuerTypes": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["selfsigned", "clusterissuer", "issuer"],
                "description": "cert-manager issuer types accepted for the webhook.",
            }
        }
    ),
    remediation_steps=(
        f"Keep webhook.enabled false, or set {PROJECT}:dra.webhook with tls.mode "
        "cert-manager + certManager.issuerType (+ issuerName) or tls.mode secret + "
        "tls.secret.name + tls.secret.caBundle."
    ),
    url="https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu",
    tags=["dra", "webhook"],
)

POLICIES: Final = (DRA_API_CURRENT, DRA_FEATURE_GATES_ALLOWLISTED, DRA_WEBHOOK_NEEDS_TLS)
