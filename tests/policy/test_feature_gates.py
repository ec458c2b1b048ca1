"""DRA driver feature gates judged as the driver judges them, from every place it reads them.

Renders of the real DRA chart (0.4.1 here) carry the gates in the kubelet plugin's FEATURE_GATES env; a GPUCluster
applied as a resource carries spec.draDriver.featureGates; Releases show their values. Alpha gates turned on are
refused, beta/GA and component-base logging beta gates pass, an unknown gate (for that driver release) or a value
that is no boolean is refused by name.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.dra import DRA_FEATURE_GATES_ALLOWLISTED
from policy.gpu_allocation.rules.dra.driver_gates import DRA_GATES, gate_maturity
from tests.support.policy_harness import Harness, Outcome, type_of

from .test_foreign_stacks import dra

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives


def kubelet_plugin(gates: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in dra(featureGates=gates) if m["kind"] == "DaemonSet")


def judge(harness: Harness, manifest: dict[str, Any], config: dict[str, Any] | None = None) -> Outcome:
    return harness.resource(
        DRA_FEATURE_GATES_ALLOWLISTED, type_of(manifest), manifest, name=manifest["metadata"]["name"], config=config
    )


def check(harness: Harness, manifest: dict[str, Any], config: dict[str, Any] | None = None) -> list[str]:
    return judge(harness, manifest, config).messages


def gpu_cluster(gates: Any, version: str | None = None) -> dict[str, Any]:
    driver: dict[str, Any] = {"featureGates": gates}
    if version is not None:
        driver["version"] = version
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster"},
        "spec": {"draDriver": driver},
    }


def test_maturity_table_follows_the_driver_release() -> None:
    assert gate_maturity("DynamicMIG", (0, 4)) == "alpha"
    assert gate_maturity("ComputeDomainCliques", (0, 4)) == "beta"
    assert gate_maturity("FabricManagerPartitioning", (0, 4)) is None  # added in 0.5
    assert gate_maturity("FabricManagerPartitioning", (0, 5)) == "alpha"
    assert gate_maturity("NodeLocalFabricIPC", (0, 5)) is None
    assert gate_maturity("ContextualLogging", (0, 4)) == "beta"
    assert gate_maturity("LoggingAlphaOptions", (0, 5)) == "alpha"
    assert {m for m, _ in DRA_GATES.values()} == {"alpha", "beta"}


@pytest.mark.parametrize(
    "gates",
    [
        {},
        {"DynamicMIG": False, "MPSSupport": False},
        {"IMEXDaemonsWithDNSNames": True, "ComputeDomainCliques": True, "CrashOnNVLinkFabricErrors": False},
        {"ContextualLogging": True, "LoggingBetaOptions": True, "LoggingAlphaOptions": False},
    ],
    ids=["none", "alpha-off", "beta", "logging"],
)
def test_gates_the_driver_accepts_pass(harness: Harness, gates: dict[str, Any]) -> None:
    manifest = kubelet_plugin(gates)
    rendered = {e["name"]: e.get("value") for c in manifest["spec"]["template"]["spec"]["containers"] for e in c["env"]}
    assert ("FEATURE_GATES" in rendered) is bool(gates)
    harness.passes(judge(harness, manifest))


@pytest.mark.parametrize("gate", ["DynamicMIG", "NVMLDeviceHealthCheck", "LoggingAlphaOptions", "AllAlpha"])
def test_alpha_gates_turned_on_are_refused_unless_reviewed(harness: Harness, gate: str) -> None:
    manifest = kubelet_plugin({gate: True})
    messages = check(harness, manifest)
    assert messages  # one per container that reads FEATURE_GATES
    assert all(
        f"FEATURE_GATES {gate} is 'true', which turns on an Alpha gate of DRA driver 0.4.1" in m for m in messages
    )
    harness.passes(judge(harness, manifest, {"allowedFeatureGates": [gate]}))


def test_a_gate_unknown_to_that_release_is_refused_by_name(harness: Harness) -> None:
    for gate, value in (("FabricManagerPartitioning", False), ("NoSuchGate", True)):
        messages = check(harness, kubelet_plugin({gate: value}))
        assert messages
        assert all(f"FEATURE_GATES {gate} names a gate DRA driver 0.4.1 does not know" in m for m in messages)
        assert all("DynamicMIG" in m.split("the gates it knows are")[1] for m in messages)


def test_a_value_the_driver_cannot_parse_is_refused(harness: Harness) -> None:
    messages = check(harness, kubelet_plugin({"ComputeDomainCliques": "yes"}))
    assert messages
    assert all("ComputeDomainCliques is 'yes', which the driver cannot parse as a boolean" in m for m in messages)
    harness.passes(judge(harness, kubelet_plugin({"ComputeDomainCliques": "True"})))  # ParseBool takes True


def test_a_gpu_cluster_resource_with_gates_is_judged(harness: Harness) -> None:
    harness.passes(judge(harness, gpu_cluster({"ComputeDomainCliques": True})))
    message = check(harness, gpu_cluster({"ConsumableShares": True}))
    assert len(message) == 1
    assert (
        "GPUCluster 'gpu-cluster': spec.draDriver.featureGates ConsumableShares is true, which turns on an Alpha "
        "gate of DRA driver 0.5.0" in message[0]
    )
    assert "of kubernetes:nvidia.com/v1alpha1:GPUCluster 'gpu-cluster'" in message[0]
    old = check(harness, gpu_cluster({"ConsumableShares": False}, version="v0.4.1"))
    assert len(old) == 1
    assert "names a gate DRA driver 0.4.1 does not know" in old[0]
    wrong = check(harness, gpu_cluster(["DynamicMIG=true"]))
    assert len(wrong) == 1
    assert "spec.draDriver.featureGates is not a map of gate names to booleans" in wrong[0]
    assert "fail closed" in wrong[0]


def test_operator_release_gates_are_judged_against_its_dra_driver(harness: Harness) -> None:
    values = harness.values("operator-gpu-cluster-values.yaml")
    values["draDriver"]["featureGates"] = {"IMEXDaemonsWithDNSNames": True}
    release = harness.operator("gpu-cluster", values)
    harness.passes(harness.resource(DRA_FEATURE_GATES_ALLOWLISTED, release.resource_type, release.props))
    values["draDriver"]["featureGates"] = {"HostManagedIMEXDaemon": True}
    release = harness.operator("gpu-cluster", values)
    message = harness.resource(DRA_FEATURE_GATES_ALLOWLISTED, release.resource_type, release.props).one()
    assert "values draDriver.featureGates HostManagedIMEXDaemon is true, which turns on an Alpha gate" in message
