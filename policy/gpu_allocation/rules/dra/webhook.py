"""dra-webhook-needs-tls: an enabled DRA admission webhook has reachable endpoints and validated TLS.

Seed: the webhook "requires reachable webhook endpoints and validated TLS/cert-manager or existing-secret
configuration". A Release's values are judged as the chart reads them; a Chart's rendered webhook configuration,
Certificate and Deployment are judged as the API server and cert-manager read them.
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab.labels import DRA, PROJECT
from ...vocab.owners import DRA_KIND
from ..declare import resource_policy
from ..fail_closed import fail_closed
from ..props import UNKNOWN, as_dict, as_list, compact_json, config_strings, contains_unknown, dig, show, string_list
from ..readers import helm_flag
from ..resource import Resource
from ..shapes import containers


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
    resource.not_applicable_if_inputs_hidden(
        args, "the webhook configuration, Certificate and Deployment it renders are checked instead"
    )
    issuer_types = config_strings(args.get_config(), "allowedIssuerTypes", _ISSUER_TYPES)
    findings: Any = None
    if resource.chart_owner == DRA:
        findings = _values_webhook_findings(resource, issuer_types)
        if findings is UNKNOWN:
            args.not_applicable("the webhook values are unknown during preview")
            return
    elif resource.is_kubernetes and resource.belongs_to(DRA):
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


def _reads_webhook(resource: Resource) -> bool:
    return resource.is_helm or resource.kind in {"ValidatingWebhookConfiguration", "Certificate", "Deployment"}


DRA_WEBHOOK_NEEDS_TLS = resource_policy(
    "dra-webhook-needs-tls",
    (
        "An enabled DRA admission webhook has validated TLS: a CA bundle or cert-manager CA "
        "injection on its rendered webhook configuration, an allowed named issuer and a serving "
        "Secret (in Release values: tls.mode cert-manager or secret with its settings)."
    ),
    fail_closed(_reads_webhook)(dra_webhook_needs_tls_validator),
    severity=Severity.MEDIUM,
    remediation=(
        f"Keep webhook.enabled false, or set {PROJECT}:dra.webhook with tls.mode "
        "cert-manager + certManager.issuerType (+ issuerName) or tls.mode secret + "
        "tls.secret.name + tls.secret.caBundle."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra", "webhook"],
    config={
        "allowedIssuerTypes": string_list(
            ["selfsigned", "clusterissuer", "issuer"], "cert-manager issuer types accepted for the webhook."
        )
    },
)
