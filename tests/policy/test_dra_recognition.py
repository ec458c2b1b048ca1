"""The DRA driver is recognised by every name it has had, so an old-named driver's gates and webhook are judged.

Before the owner registry, the gate and webhook rules recognised the driver by its current image and app label
only, while the ownership rules also knew the old names: a driver installed as `nvidia-dra-driver-gpu` (image
`k8s-dra-driver-gpu`) could turn on Alpha gates unseen. Each route of recognition is proven on its own: the image,
the chart label, the app label; an object carrying none of them is not the driver's.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.dra import DRA_FEATURE_GATES_ALLOWLISTED, DRA_WEBHOOK_NEEDS_TLS
from tests.support.policy_harness import Harness, type_of

pytestmark = pytest.mark.policy

OLD_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"
OLD_CHART_LABEL = "nvidia-dra-driver-gpu-25.3.0"
OLD_APP_LABEL = "nvidia-dra-driver-gpu"
ALPHA_GATE = "MPSSupport"


def kubelet_plugin(*, image: str, labels: dict[str, str]) -> dict[str, Any]:
    """A hand-written DRA kubelet-plugin DaemonSet that turns on an Alpha gate through FEATURE_GATES."""
    container = {
        "name": "plugin",
        "image": image,
        "env": [{"name": "FEATURE_GATES", "value": f"{ALPHA_GATE}=true"}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "old-dra-kubelet-plugin", "namespace": "nvidia-dra-driver-gpu", "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": "old-dra"}},
            "template": {"metadata": {"labels": {"app": "old-dra"}}, "spec": {"containers": [container]}},
        },
    }


def gates(harness: Harness, manifest: dict[str, Any]) -> Any:
    return harness.resource(DRA_FEATURE_GATES_ALLOWLISTED, type_of(manifest), manifest, name="old-dra")


ROUTES = {
    "old image": {"image": OLD_IMAGE, "labels": {}},
    "old chart label": {"image": "registry.example.com/team/plugin:1.0", "labels": {"helm.sh/chart": OLD_CHART_LABEL}},
    "old app label": {
        "image": "registry.example.com/team/plugin:1.0",
        "labels": {"app.kubernetes.io/name": OLD_APP_LABEL},
    },
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_an_old_named_drivers_alpha_gate_is_refused(harness: Harness, route: str) -> None:
    outcome = gates(harness, kubelet_plugin(**ROUTES[route]))
    assert outcome.not_applicable is None
    message = outcome.one()
    assert message.startswith(
        "kubernetes:apps/v1:DaemonSet 'nvidia-dra-driver-gpu/old-dra-kubelet-plugin': container 'plugin' env "
        f"FEATURE_GATES {ALPHA_GATE} is 'true', which turns on an Alpha gate of DRA driver "
    )
    assert f"add '{ALPHA_GATE}' to this policy's allowedFeatureGates after a review" in message


def test_a_reviewed_gate_of_an_old_named_driver_passes(harness: Harness) -> None:
    manifest = kubelet_plugin(**ROUTES["old image"])
    outcome = harness.resource(
        DRA_FEATURE_GATES_ALLOWLISTED,
        type_of(manifest),
        manifest,
        name="old-dra",
        config={"allowedFeatureGates": [ALPHA_GATE]},
    )
    assert outcome.violations == []
    assert outcome.not_applicable is None


def test_a_workload_that_is_no_dra_driver_is_not_judged(harness: Harness) -> None:
    outcome = gates(harness, kubelet_plugin(image="registry.example.com/team/plugin:1.0", labels={}))
    assert outcome.violations == []
    assert outcome.not_applicable == "not a DRA chart, Operator chart, GPUCluster or DRA driver workload"


def webhook_configuration(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "old-dra-webhook", "labels": labels},
        "webhooks": [{"name": "validate.resource.nvidia.com", "failurePolicy": "Fail", "clientConfig": {}}],
    }


def test_an_old_named_drivers_webhook_without_a_ca_is_refused(harness: Harness) -> None:
    manifest = webhook_configuration({"app.kubernetes.io/name": OLD_APP_LABEL})
    outcome = harness.resource(DRA_WEBHOOK_NEEDS_TLS, type_of(manifest), manifest, name="old-dra-webhook")
    assert outcome.not_applicable is None
    assert "webhooks[0] 'validate.resource.nvidia.com' (failurePolicy 'Fail') has no clientConfig.caBundle" in (
        outcome.one()
    )
    other = webhook_configuration({"app.kubernetes.io/name": "team-webhook"})
    outcome = harness.resource(DRA_WEBHOOK_NEEDS_TLS, type_of(other), other, name="team-webhook")
    assert outcome.violations == []
    assert outcome.not_applicable == "not a DRA driver chart or a rendered DRA webhook object"
