"""The simulated kubelet's device manager publishes what the allocator pods on a node publish, not the config.

Pods are made from the real charts' rendered DaemonSets (tests/fixtures/policy/*-rendered.yaml) as the daemonset
controller makes them; the plugin's sharing comes from the rendered ConfigMap the pod mounts.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from eks_hybrid_gpu.simulate.devicemanager import Publication, plugin_sharing, publication, status_patch
from eks_hybrid_gpu.simulate.model import SimNode
from eks_hybrid_gpu.simulate.objects import PluginSharing, plugin_resources
from tests.support import seeds

pytestmark = pytest.mark.unit

READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def rendered(name: str) -> list[dict[str, Any]]:
    return seeds.documents(name)


def pod_of(documents: list[dict[str, Any]], daemonset: str, node: str, status: dict[str, Any]) -> dict[str, Any]:
    ds = next(d for d in documents if d["kind"] == "DaemonSet" and d["metadata"]["name"] == daemonset)
    template = copy.deepcopy(ds["spec"]["template"])
    return {
        "metadata": {**template.get("metadata", {}), "name": f"{daemonset}-x", "namespace": "gpu-system"},
        "spec": {**template["spec"], "nodeName": node},
        "status": status,
    }


def configmaps(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"gpu-system/{d['metadata']['name']}": d for d in documents if d["kind"] == "ConfigMap"}


H100X4 = SimNode.model_validate({"name": "n", "gpus": [{"model": "H100", "count": 4}]})
A10G = SimNode.model_validate({"name": "n", "gpus": [{"model": "A10G"}]})
MIG = SimNode.model_validate({"name": "n", "gpus": [{"model": "A100-40GB", "mig": ["3g.20gb", "1g.5gb", "1g.5gb"]}]})


def test_no_allocator_pod_publishes_nothing() -> None:
    assert publication(H100X4, {}, [], {}) == Publication({}, False)


def test_a_ready_device_plugin_pod_publishes_the_hosts_gpus() -> None:
    docs = rendered("device-plugin-rendered.yaml")
    pod = pod_of(docs, "hybrid-gpu-plugin-nvidia-device-plugin", "n", READY)
    assert publication(H100X4, {}, [pod], configmaps(docs)) == Publication({"nvidia.com/gpu": "4"}, False)


def test_a_pod_that_is_not_ready_or_terminating_publishes_nothing() -> None:
    docs = rendered("device-plugin-rendered.yaml")
    starting = pod_of(docs, "hybrid-gpu-plugin-nvidia-device-plugin", "n", {"phase": "Pending"})
    leaving = pod_of(docs, "hybrid-gpu-plugin-nvidia-device-plugin", "n", READY)
    leaving["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    assert publication(H100X4, {}, [starting, leaving], configmaps(docs)).resources == {}


def test_time_slicing_comes_from_the_config_the_pod_mounts() -> None:
    docs = rendered("device-plugin-time-slicing-rendered.yaml")
    ds = next(d for d in docs if d["kind"] == "DaemonSet" and "mps" not in d["metadata"]["name"])
    pod = pod_of(docs, ds["metadata"]["name"], "n", READY)
    sharing = plugin_sharing(pod, {}, configmaps(docs))
    assert sharing.replicas == 4
    published = publication(A10G, {}, [pod], configmaps(docs)).resources
    expected = "nvidia.com/gpu.shared" if sharing.rename_by_default else "nvidia.com/gpu"
    assert published == {expected: "4"}


def test_without_its_configmap_the_plugin_shares_nothing() -> None:
    docs = rendered("device-plugin-time-slicing-rendered.yaml")
    ds = next(d for d in docs if d["kind"] == "DaemonSet" and "mps" not in d["metadata"]["name"])
    pod = pod_of(docs, ds["metadata"]["name"], "n", READY)
    assert publication(A10G, {}, [pod], {}).resources == {"nvidia.com/gpu": "1"}


def test_a_node_label_selects_another_named_config() -> None:
    docs = rendered("device-plugin-time-slicing-rendered.yaml")
    ds = next(d for d in docs if d["kind"] == "DaemonSet" and "mps" not in d["metadata"]["name"])
    pod = pod_of(docs, ds["metadata"]["name"], "n", READY)
    maps = configmaps(docs)
    (name,) = [k for k, v in maps.items() if k.endswith("-configs")]
    maps[name] = copy.deepcopy(maps[name])
    maps[name]["data"]["exclusive"] = "version: v1\nflags: {migStrategy: none}\n"
    assert plugin_sharing(pod, {"nvidia.com/device-plugin.config": "exclusive"}, maps).replicas is None


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("none", {"nvidia.com/gpu": "1"}),
        ("single", {"nvidia.com/gpu": "3"}),
        ("mixed", {"nvidia.com/mig-1g.5gb": "2", "nvidia.com/mig-3g.20gb": "1"}),
    ],
)
def test_mig_strategy_decides_the_resources(strategy: str, expected: dict[str, str]) -> None:
    assert plugin_resources(MIG, PluginSharing(mig_strategy=strategy)) == expected  # type: ignore[arg-type]


def test_a_ready_dra_kubelet_plugin_pod_publishes_a_slice() -> None:
    docs = rendered("dra-rendered.yaml")
    ds = next(d for d in docs if d["kind"] == "DaemonSet" and "kubelet-plugin" in d["metadata"]["name"])
    pod = pod_of(docs, ds["metadata"]["name"], "n", READY)
    assert publication(H100X4, {}, [pod], {}) == Publication({}, True)


def test_a_host_level_plugin_publishes_with_no_pod() -> None:
    auto = SimNode.model_validate({"name": "a", "computeType": "auto", "gpus": [{"model": "L4"}]})
    assert publication(auto, {}, [], {}).resources == {"nvidia.com/gpu": "1"}


def test_when_the_plugin_leaves_allocatable_drops_to_zero_and_capacity_stays() -> None:
    node = {"status": {"capacity": {"cpu": "64", "nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}}
    assert status_patch(node, Publication({}, False)) == {
        "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "0"}}
    }
    assert status_patch(node, Publication({"nvidia.com/gpu": "4"}, False)) is None


def test_a_new_plugin_adds_its_resource_beside_the_old_ones_capacity() -> None:
    node = {"status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "0"}}}
    assert status_patch(node, Publication({"nvidia.com/gpu.shared": "16"}, False)) == {
        "status": {
            "capacity": {"nvidia.com/gpu": "4", "nvidia.com/gpu.shared": "16"},
            "allocatable": {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "16"},
        }
    }
