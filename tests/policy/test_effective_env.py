"""A container's env as the kubelet builds it: `envFrom` (ConfigMap or Secret, with a prefix), then `env` with
`valueFrom`. NVIDIA_VISIBLE_DEVICES/CUDA_VISIBLE_DEVICES reach a GPU container through any of them; a source the
stack does not hold cannot be told, and is refused."""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.findings import CANNOT_JUDGE
from policy.gpu_allocation.rules.props import UNKNOWN
from policy.gpu_allocation.rules.readers import effective_env
from policy.gpu_allocation.rules.sharing import MIG_STRATEGY_CONSISTENT
from policy.gpu_allocation.rules.workloads import NO_VISIBLE_DEVICES_OVERRIDE
from tests.support.policy_harness import Harness, Outcome

from .test_foreign_stacks import device_plugin, dra, foreign, gpu_workload, selector

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives


def config_map(name: str, data: dict[str, str], kind: str = "ConfigMap") -> dict[str, Any]:
    table = "stringData" if kind == "Secret" else "data"
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "ai-workloads"}, table: data}


def workload_with(**container: Any) -> dict[str, Any]:
    manifest = gpu_workload("nvidia.com/gpu", selector("device-plugin"))
    manifest["spec"]["template"]["spec"]["containers"][0].update(container)
    return manifest


def judge(harness: Harness, *manifests: dict[str, Any]) -> Outcome:
    return harness.stack(NO_VISIBLE_DEVICES_OVERRIDE, foreign([*device_plugin(), *manifests]))


def run(harness: Harness, *manifests: dict[str, Any]) -> list[str]:
    return judge(harness, *manifests).messages


def test_reader_applies_env_from_in_order_then_env() -> None:
    objects = {("ConfigMap", "a"): {"data": {"X": "1", "Y": "2"}}, ("Secret", "s"): {"stringData": {"Z": "3"}}}
    spec = {
        "envFrom": [{"configMapRef": {"name": "a"}, "prefix": "P_"}, {"secretRef": {"name": "s"}}],
        "env": [{"name": "P_X", "value": "override"}, {"name": "W", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
    }
    env = effective_env(spec, lambda kind, name: objects.get((kind, name)))
    assert env.entries["P_X"].value == "override"
    assert env.entries["P_Y"].source == "envFrom[0] ConfigMap 'a' key 'Y'"
    assert env.entries["Z"].source == "envFrom[1] Secret 's' key 'Z'"
    assert env.entries["W"].source == "env valueFrom fieldRef"
    assert env.cannot_tell == []
    missing = effective_env({"envFrom": [{"configMapRef": {"name": "gone"}}]}, lambda kind, name: None)
    assert missing.cannot_tell == [
        "envFrom[0] ConfigMap 'gone' is not in this stack, so the variables it sets cannot be told"
    ]
    unknown = effective_env({"envFrom": [{"configMapRef": {"name": "a"}}]}, lambda kind, name: {"data": UNKNOWN})
    assert unknown.unknown
    assert unknown.cannot_tell == []


def test_clean_twin_with_an_unrelated_config_map_passes(harness: Harness) -> None:
    workload = workload_with(envFrom=[{"configMapRef": {"name": "app-env"}}])
    harness.passes(judge(harness, workload, config_map("app-env", {"LOG_LEVEL": "info"})))


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_visible_devices_through_env_from_is_refused(harness: Harness, kind: str) -> None:
    ref = "configMapRef" if kind == "ConfigMap" else "secretRef"
    workload = workload_with(envFrom=[{ref: {"name": "app-env"}}])
    message = harness.stack(
        NO_VISIBLE_DEVICES_OVERRIDE,
        foreign([*device_plugin(), workload, config_map("app-env", {"NVIDIA_VISIBLE_DEVICES": "all"}, kind)]),
    ).one()
    assert f"sets env NVIDIA_VISIBLE_DEVICES (envFrom[0] {kind} 'app-env' key 'NVIDIA_VISIBLE_DEVICES')" in message
    assert "Deployment 'ai-workloads/inference'" in message
    assert "all" not in message.split("sets env")[1].split(".")[0]  # a Secret's value is never shown


def test_a_prefix_that_forms_the_name_is_refused(harness: Harness) -> None:
    workload = workload_with(envFrom=[{"configMapRef": {"name": "app-env"}, "prefix": "CUDA_"}])
    messages = run(harness, workload, config_map("app-env", {"VISIBLE_DEVICES": "0"}))
    assert len(messages) == 1
    assert "CUDA_VISIBLE_DEVICES (envFrom[0] ConfigMap 'app-env' key 'VISIBLE_DEVICES')" in messages[0]


def test_visible_devices_through_value_from_is_refused(harness: Harness) -> None:
    ref = {"configMapKeyRef": {"name": "app-env", "key": "devices"}}
    workload = workload_with(env=[{"name": "CUDA_VISIBLE_DEVICES", "valueFrom": ref}])
    message = harness.stack(NO_VISIBLE_DEVICES_OVERRIDE, foreign([*device_plugin(), workload])).one()
    assert "CUDA_VISIBLE_DEVICES (env valueFrom configMapKeyRef (ConfigMap 'app-env' key 'devices'))" in message


def test_env_from_an_object_outside_the_stack_cannot_be_judged(harness: Harness) -> None:
    workload = workload_with(envFrom=[{"configMapRef": {"name": "elsewhere"}}])
    message = harness.stack(NO_VISIBLE_DEVICES_OVERRIDE, foreign([*device_plugin(), workload])).one()
    assert "envFrom[0] ConfigMap 'elsewhere' is not in this stack" in message
    assert CANNOT_JUDGE in message


def test_a_config_map_of_another_namespace_is_not_the_source(harness: Harness) -> None:
    workload = workload_with(envFrom=[{"configMapRef": {"name": "app-env"}}])
    other = config_map("app-env", {"NVIDIA_VISIBLE_DEVICES": "all"})
    other["metadata"]["namespace"] = "elsewhere"
    message = harness.stack(NO_VISIBLE_DEVICES_OVERRIDE, foreign([*device_plugin(), workload, other])).one()
    assert CANNOT_JUDGE in message


def test_chart_renders_that_use_value_from_without_gpus_pass(harness: Harness) -> None:
    rendered = dra()
    assert any("valueFrom" in str(m) for m in rendered)
    harness.passes(harness.stack(NO_VISIBLE_DEVICES_OVERRIDE, foreign(rendered)))


def test_an_allocator_setting_taken_from_value_from_cannot_be_judged(harness: Harness) -> None:
    """The plugin's MIG_STRATEGY through valueFrom is not read as the default 'none': it is refused."""
    rendered = device_plugin()
    plugin = next(m for m in rendered if m["kind"] == "DaemonSet")
    container = plugin["spec"]["template"]["spec"]["containers"][0]
    assert any(e["name"] == "MIG_STRATEGY" for e in container["env"])
    workload = gpu_workload("nvidia.com/mig-1g.5gb", selector("device-plugin"))
    clean = harness.stack(MIG_STRATEGY_CONSISTENT, foreign([*rendered, workload])).messages
    assert clean  # migStrategy none: the request is refused plainly
    assert all(CANNOT_JUDGE not in m for m in clean)
    for entry in container["env"]:
        if entry["name"] == "MIG_STRATEGY":
            entry.pop("value")
            entry["valueFrom"] = {"configMapKeyRef": {"name": "plugin-settings", "key": "mig"}}
    messages = harness.stack(MIG_STRATEGY_CONSISTENT, foreign([*rendered, workload])).messages
    refused = [m for m in messages if CANNOT_JUDGE in m]
    assert len(refused) == 1
    assert "env MIG_STRATEGY comes from env valueFrom configMapKeyRef" in refused[0]
