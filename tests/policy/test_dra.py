"""dra-api-current, dra-feature-gates-allowlisted and dra-webhook-needs-tls."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy.gpu_allocation.rules.dra import DRA_API_CURRENT, DRA_FEATURE_GATES_ALLOWLISTED, DRA_WEBHOOK_NEEDS_TLS
from tests.support.policy_harness import (
    DRA_CHART,
    DRA_DAEMONSET,
    DRA_SELECTOR,
    Harness,
    Item,
    real_records,
    rendered_by,
)

pytestmark = pytest.mark.policy

UNKNOWN_OBJECT = "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"
UNKNOWN_BOOL = "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7"
NOT_THEIRS = {
    DRA_API_CURRENT.name: "not a DRA object, DRA chart or pod template",
    DRA_FEATURE_GATES_ALLOWLISTED.name: "not a DRA chart, Operator chart, GPUCluster or DRA driver workload",
    DRA_WEBHOOK_NEEDS_TLS.name: "not a DRA driver chart or a rendered DRA webhook object",
}


def seed_objects(harness: Harness) -> list[dict[str, Any]]:
    return harness.docs("seed-dra-objects.yaml")


def template(harness: Harness) -> dict[str, Any]:
    return harness.find("seed-dra-objects.yaml", "ResourceClaimTemplate", "single-large-gpu")


def dra_chart(harness: Harness, **changes: Any) -> Item:
    values = harness.values("dra-values.yaml")
    values.update(changes)
    return harness.helm_release("dra-chart", DRA_CHART, "0.5.0", values, namespace="gpu-dra-system")


def check_chart(harness: Harness, policy: Any, chart: Item, config: dict[str, Any] | None = None) -> Any:
    return harness.resource(policy, chart.resource_type, chart.props, name=chart.name, config=config)


# --------------------------------------------------------------------------- API shapes


def test_seed_dra_objects_are_current(harness: Harness) -> None:
    for manifest in seed_objects(harness):
        outcome = harness.manifest_check(DRA_API_CURRENT, manifest)
        harness.passes(outcome)


def test_rendered_chart_device_class_is_current(harness: Harness) -> None:
    manifest = harness.find("dra-rendered.yaml", "DeviceClass", "gpu.nvidia.com")
    harness.passes(harness.manifest_check(DRA_API_CURRENT, manifest))


def test_old_api_version(harness: Harness) -> None:
    manifest = harness.find("seed-dra-objects.yaml", "DeviceClass", "hybrid-full-gpu")
    manifest["apiVersion"] = "resource.k8s.io/v1beta1"
    assert harness.manifest_check(DRA_API_CURRENT, manifest).one() == (
        "kubernetes:resource.k8s.io/v1beta1:DeviceClass 'hybrid-full-gpu': uses resource.k8s.io/v1beta1, not "
        "resource.k8s.io/v1: the former alpha/beta shapes are not drop-in manifests for current clusters. Write "
        "it for resource.k8s.io/v1 (eks-hybrid-gpu:dra)."
    )


def test_suitable_nodes(harness: Harness) -> None:
    manifest = harness.find("seed-dra-objects.yaml", "DeviceClass", "hybrid-large-gpu")
    manifest["spec"]["suitableNodes"] = {"nodeSelectorTerms": []}
    message = harness.manifest_check(DRA_API_CURRENT, manifest).one()
    assert message.startswith(
        "kubernetes:resource.k8s.io/v1:DeviceClass 'hybrid-large-gpu': spec.suitableNodes is "
        '{"nodeSelectorTerms":[]}, but DeviceClass has no suitableNodes field in this API'
    )


def test_request_without_exactly(harness: Harness) -> None:
    manifest = template(harness)
    request = manifest["spec"]["spec"]["devices"]["requests"][0]
    request.update(request.pop("exactly"))
    message = harness.manifest_check(DRA_API_CURRENT, manifest).one()
    assert message.startswith(
        "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate 'ai-workloads/single-large-gpu': "
        'spec.spec.devices.requests[0] ({"allocationMode":"ExactCount","count":1,'
        '"deviceClassName":"hybrid-large-gpu","name":"gpu"}) has no \'exactly\' block'
    )


def test_legacy_fields_beside_exactly_and_alpha_claim(harness: Harness) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "ai-workloads"},
        "spec": {
            "resourceClassName": "gpu.nvidia.com",
            "devices": {"requests": [{"name": "gpu", "count": 1, "exactly": {"deviceClassName": "x"}}]},
        },
        "status": {"allocation": {"resourceHandles": [{"driverName": "gpu.nvidia.com"}]}},
    }
    messages = harness.manifest_check(DRA_API_CURRENT, claim).messages
    assert any("spec.devices.requests[0] sets count directly on the request" in m for m in messages)
    assert any("spec.resourceClassName is the Kubernetes 1.31 alpha claim shape" in m for m in messages)
    assert any("status.allocation.resourceHandles is the old resourceHandles shape" in m for m in messages)


def test_pod_claim_source_wrapper(harness: Harness) -> None:
    job = harness.find("seed-smoke-jobs.yaml", "Job", "hybrid-gpu-dra-smoke")
    spec = job["spec"]["template"]["spec"]
    harness.passes(harness.manifest_check(DRA_API_CURRENT, job))
    spec["resourceClaims"] = [{"name": "gpu-resource", "source": {"resourceClaimTemplateName": "single-large-gpu"}}]
    assert harness.manifest_check(DRA_API_CURRENT, job).one() == (
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-dra-smoke': pod resourceClaims[0] wraps its reference in "
        '\'source\' ({"resourceClaimTemplateName":"single-large-gpu"}); Pod claims refer directly to '
        "resourceClaimTemplateName or resourceClaimName. Write it for resource.k8s.io/v1 (the manifest of "
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-dra-smoke')."
    )


def test_chart_resource_api_version(harness: Harness) -> None:
    harness.passes(check_chart(harness, DRA_API_CURRENT, dra_chart(harness)))
    chart = dra_chart(harness, resourceApiVersion="resource.k8s.io/v1beta1")
    message = check_chart(harness, DRA_API_CURRENT, chart).one()
    assert message.startswith(
        "kubernetes:helm.sh/v3:Release 'dra-chart': values resourceApiVersion is 'resource.k8s.io/v1beta1'"
    )


def test_api_unknowns_do_not_crash(harness: Harness) -> None:
    manifest = template(harness)
    manifest["spec"] = UNKNOWN_OBJECT
    harness.passes(harness.manifest_check(DRA_API_CURRENT, manifest))
    chart = dra_chart(harness)
    chart.props["values"] = UNKNOWN_OBJECT
    assert (
        harness.not_applicable(check_chart(harness, DRA_API_CURRENT, chart))
        == "the chart values are unknown during preview"
    )
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-system"}}
    assert (
        harness.not_applicable(harness.manifest_check(DRA_API_CURRENT, namespace)) == NOT_THEIRS[DRA_API_CURRENT.name]
    )


# --------------------------------------------------------------------------- feature gates


def test_seed_feature_gates_pass(harness: Harness) -> None:
    outcome = check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, dra_chart(harness))
    harness.passes(outcome)


def test_enabled_gate_is_refused_unless_allow_listed(harness: Harness) -> None:
    chart = dra_chart(harness, featureGates={"DynamicMIG": True, "MPSSupport": False})
    assert check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, chart).one() == (
        "kubernetes:helm.sh/v3:Release 'dra-chart': values featureGates DynamicMIG is true, which turns on an Alpha "
        "gate of DRA driver 0.5.0 (off by default); the guide says not to enable gates to make a demo start, and "
        "Alpha features change or disappear between releases. Remove DynamicMIG (eks-hybrid-gpu:dra.featureGates), "
        "or add 'DynamicMIG' to this policy's allowedFeatureGates after a review."
    )
    config = {"allowedFeatureGates": ["DynamicMIG"]}
    harness.passes(check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, chart, config))


def test_operator_dra_driver_gates(harness: Harness) -> None:
    values = harness.values("operator-gpu-cluster-values.yaml")
    values["draDriver"]["featureGates"] = {"NVMLDeviceHealthCheck": "true"}
    release = harness.operator("gpu-cluster", values)
    message = check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, release).one()
    # The Operator renders the map with toYaml into a field typed map[string]bool: a string is refused there.
    assert message.startswith(
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release': values draDriver.featureGates NVMLDeviceHealthCheck "
        "is 'true', which the GPUCluster's spec.draDriver.featureGates (a map of booleans) refuses."
    )
    values["draDriver"]["featureGates"] = {"NVMLDeviceHealthCheck": True}
    message = check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, harness.operator("gpu-cluster", values)).one()
    assert "NVMLDeviceHealthCheck is true, which turns on an Alpha gate of DRA driver 0.5.0" in message


def test_rendered_feature_gates_env(harness: Harness) -> None:
    daemonset = harness.stamp(harness.find("dra-rendered.yaml", "DaemonSet", DRA_DAEMONSET), "dra", "dra", DRA_SELECTOR)
    harness.passes(harness.manifest_check(DRA_FEATURE_GATES_ALLOWLISTED, daemonset))
    gated = copy.deepcopy(daemonset)
    env = gated["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "FEATURE_GATES", "value": "MPSSupport=true,TimeSlicingSettings=false,"})
    message = harness.manifest_check(DRA_FEATURE_GATES_ALLOWLISTED, gated).one()
    assert message.startswith(
        "kubernetes:apps/v1:DaemonSet 'gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin': container 'gpus' env "
        "FEATURE_GATES MPSSupport is 'true', which turns on an Alpha gate of DRA driver"
    )


def test_gate_unknowns(harness: Harness) -> None:
    chart = dra_chart(harness, featureGates=UNKNOWN_OBJECT)
    outcome = check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, chart)
    assert harness.not_applicable(outcome) == "the feature gates are unknown during preview"
    chart = dra_chart(harness, featureGates={"DynamicMIG": UNKNOWN_BOOL})
    harness.passes(check_chart(harness, DRA_FEATURE_GATES_ALLOWLISTED, chart))


# --------------------------------------------------------------------------- webhook


def test_seed_webhook_disabled_passes(harness: Harness) -> None:
    harness.passes(check_chart(harness, DRA_WEBHOOK_NEEDS_TLS, dra_chart(harness)))


def test_webhook_without_tls(harness: Harness) -> None:
    chart = dra_chart(harness, webhook={"enabled": True})
    assert check_chart(harness, DRA_WEBHOOK_NEEDS_TLS, chart).one() == (
        "kubernetes:helm.sh/v3:Release 'dra-chart': values webhook.enabled is true but webhook.tls.mode is null "
        "(expected cert-manager or secret). The webhook uses failurePolicy: Fail, so without reachable endpoints "
        "and validated TLS every DRA admission fails. Set eks-hybrid-gpu:dra.webhook to tls.mode cert-manager with "
        "certManager.issuerType (and issuerName for clusterissuer/issuer; cert-manager CRDs installed) or tls.mode "
        "secret with tls.secret.name and tls.secret.caBundle, or keep the webhook disabled."
    )


@pytest.mark.parametrize(
    ("tls", "fragment"),
    [
        ({"mode": "cert-manager", "certManager": {"issuerType": "selfsigned"}}, None),
        ({"mode": "cert-manager", "certManager": {"issuerType": "clusterissuer", "issuerName": "ca"}}, None),
        ({"mode": "secret", "secret": {"name": "dra-webhook-tls", "caBundle": "LS0t"}}, None),
        ({"mode": "cert-manager"}, "webhook.tls.mode is cert-manager with certManager.issuerType null"),
        (
            {"mode": "cert-manager", "certManager": {"issuerType": "issuer"}},
            "webhook.tls.certManager.issuerType is 'issuer' but issuerName is null",
        ),
        ({"mode": "secret", "secret": {}}, "webhook.tls.mode is secret but tls.secret.name is null"),
        ({"mode": "none"}, "webhook.tls.mode is 'none' (expected cert-manager or secret)"),
    ],
)
def test_webhook_tls_modes(harness: Harness, tls: dict[str, Any], fragment: str | None) -> None:
    chart = dra_chart(harness, webhook={"enabled": True, "tls": tls})
    outcome = check_chart(harness, DRA_WEBHOOK_NEEDS_TLS, chart)
    if fragment is None:
        harness.passes(outcome)
    else:
        assert fragment in outcome.one()


def test_webhook_unknowns_and_other_charts(harness: Harness) -> None:
    chart = dra_chart(harness, webhook={"enabled": UNKNOWN_BOOL})
    assert harness.not_applicable(check_chart(harness, DRA_WEBHOOK_NEEDS_TLS, chart)) == (
        "the webhook values are unknown during preview"
    )
    chart = dra_chart(harness, webhook={"enabled": True, "tls": UNKNOWN_OBJECT})
    harness.passes(check_chart(harness, DRA_WEBHOOK_NEEDS_TLS, chart))
    release = harness.operator("gpu-cluster")
    outcome = check_chart(harness, DRA_WEBHOOK_NEEDS_TLS, release)
    assert harness.not_applicable(outcome) == NOT_THEIRS[DRA_WEBHOOK_NEEDS_TLS.name]


# --------------------------------------------------------------------------- what the analyzer really gets


def _rendered(scenario: str, chart: str, suffix: str) -> dict[str, Any]:
    return next(r for r in rendered_by(scenario, chart, "resource") if r["name"].endswith(suffix))


def test_chart_v4_with_empty_props_is_not_applicable(harness: Harness) -> None:
    chart = next(r for r in real_records("local", "resource") if r["name"] == "gpu-dra-chart")
    assert chart["props"] == {}
    for policy in (DRA_API_CURRENT, DRA_FEATURE_GATES_ALLOWLISTED, DRA_WEBHOOK_NEEDS_TLS):
        outcome = harness.real_resource(policy, chart)
        assert harness.not_applicable(outcome).startswith(
            "Chart v4 inputs are not sent to policy analyzers (a remote component arrives with empty props); "
        )


def test_real_dra_objects_of_the_local_stack_pass(harness: Harness) -> None:
    records = [r for r in real_records("local", "resource") if r["type"].startswith("kubernetes:resource.k8s.io/")]
    assert sorted(r["props"]["metadata"]["name"] for r in records) == [
        "gpu.nvidia.com",
        "hybrid-full-gpu",
        "hybrid-large-gpu",
        "mig.nvidia.com",
        "single-large-gpu",
        "vfio.gpu.nvidia.com",
    ]
    plugin = f"gpu-dra-chart:gpu-dra-system/{DRA_DAEMONSET}"
    # What each policy judges in the local stack (its webhook is off); every other object is not its business.
    judges = {
        DRA_API_CURRENT: {*(r["name"] for r in records), plugin},
        DRA_FEATURE_GATES_ALLOWLISTED: {plugin},
        DRA_WEBHOOK_NEEDS_TLS: set(),
    }
    for record in [*records, *rendered_by("local", "gpu-dra-chart", "resource")]:
        for policy, judged in judges.items():
            outcome = harness.real_resource(policy, record)
            if record["name"] in judged:
                harness.passes(outcome, record["name"])
            else:
                assert harness.not_applicable(outcome, record["name"]) == NOT_THEIRS[policy.name]


def test_real_feature_gates_env_of_the_kubelet_plugin(harness: Harness) -> None:
    """dra.featureGates reach the analyzer only as the rendered FEATURE_GATES env."""
    record = _rendered("dra-variants", "gates-chart", "/dra-driver-nvidia-gpu-kubelet-plugin")
    assert harness.real_resource(DRA_FEATURE_GATES_ALLOWLISTED, record).one() == (
        "kubernetes:apps/v1:DaemonSet 'gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin': container 'gpus' env "
        "FEATURE_GATES MPSSupport is 'true', which turns on an Alpha gate of DRA driver 0.4.1 (off by default); the "
        "guide says not to enable gates to make a demo start, and Alpha features change or disappear between "
        "releases. Remove MPSSupport (eks-hybrid-gpu:dra.featureGates), or add 'MPSSupport' to this policy's "
        "allowedFeatureGates after a review."
    )
    config = {"allowedFeatureGates": ["MPSSupport"]}
    harness.passes(harness.real_resource(DRA_FEATURE_GATES_ALLOWLISTED, record, config))


def test_real_webhook_in_secret_mode_without_a_ca_bundle(harness: Harness) -> None:
    record = _rendered("dra-variants", "root-chart", "dra-driver-nvidia-gpu-webhook-config")
    assert harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, record).one() == (
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration "
        "'dra-driver-nvidia-gpu-webhook-config': webhooks[0] 'gpu.nvidia.com' (failurePolicy 'Fail') has no "
        "clientConfig.caBundle and the object has no cert-manager.io/inject-ca-from annotation, so the API server "
        "cannot verify the webhook's certificate (webhook.tls.mode secret without tls.secret.caBundle) "
        "(eks-hybrid-gpu:cohorts[1]). The webhook uses failurePolicy: Fail, so without reachable endpoints and "
        "validated TLS every DRA admission fails. Set eks-hybrid-gpu:dra.webhook to tls.mode cert-manager with "
        "certManager.issuerType (and issuerName for clusterissuer/issuer; cert-manager CRDs installed) or tls.mode "
        "secret with tls.secret.name and tls.secret.caBundle, or keep the webhook disabled."
    )
    record["props"]["webhooks"][0]["clientConfig"]["caBundle"] = "LS0tLS1CRUdJTg=="
    harness.passes(harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, record))
    deployment = _rendered("dra-variants", "root-chart", "/dra-driver-nvidia-gpu-webhook")
    outcome = harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, deployment)
    harness.passes(outcome)
    deployment["props"]["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] = ""
    assert "volume 'cert' of the TLS-serving container 'webhook' names no Secret" in (
        harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, deployment).one()
    )


def test_real_webhook_with_cert_manager(harness: Harness) -> None:
    records = rendered_by("dra-cert-manager", "cm-chart", "resource")
    webhook_objects = [r for r in records if "webhook" in r["name"]]
    assert sorted(r["type"].rsplit(":", 1)[1] for r in webhook_objects) == [
        "Certificate",
        "Deployment",
        "Issuer",
        "Service",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
    ]
    for record in webhook_objects:
        outcome = harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, record)
        if record["type"].rsplit(":", 1)[1] in {"Certificate", "Deployment", "ValidatingWebhookConfiguration"}:
            harness.passes(outcome, record["name"])
        else:  # the Issuer, Service and ServiceAccount carry no TLS setting of the webhook's own
            assert harness.not_applicable(outcome, record["name"]) == NOT_THEIRS[DRA_WEBHOOK_NEEDS_TLS.name]
    certificate = next(r for r in webhook_objects if r["type"].endswith(":Certificate"))
    message = harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, certificate, {"allowedIssuerTypes": ["clusterissuer"]}).one()
    assert message.startswith(
        "kubernetes:cert-manager.io/v1:Certificate 'dra-c/dra-driver-nvidia-gpu-webhook-cert': spec.issuerRef "
        '{"kind":"Issuer","name":"hybrid-gpu-cm-dra-driver-nvidia-gpu-webhook-issuer"} is a selfsigned issuer, '
        "not one of clusterissuer (webhook.tls.certManager.issuerType)"
    )
    certificate["props"]["spec"]["issuerRef"] = {"kind": "ClusterIssuer", "name": ""}
    assert "spec.issuerRef.name is '' (webhook.tls.certManager.issuerName is not set)" in (
        harness.real_resource(DRA_WEBHOOK_NEEDS_TLS, certificate).one()
    )
