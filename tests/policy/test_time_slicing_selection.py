"""Time-slicing as the device plugin applies it, on real renders.

`config.map` holds several named configs; `config.default` covers nodes without a label and a node's
`nvidia.com/device-plugin.config=<name>` label selects another; a workload is judged against the configs of the nodes
it can land on. Plugin 0.20.0 renames only with `renameByDefault`. The GPU Operator's ClusterPolicy
`devicePlugin.config` is judged the same way, and its ConfigMap is referenced.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.plugin_configs import PLUGIN_CONFIG_LABEL
from policy.gpu_allocation.rules.sharing import SHARED_GPU_RESOURCE_NAME, TIME_SLICING_CONFIG_ATTACHED
from tests.support import charts
from tests.support.policy_harness import Harness, Outcome

from .test_foreign_stacks import TIME_SLICING, device_plugin, foreign, gpu_workload, selector
from .test_helm_truthiness import render

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives

EXCLUSIVE = "version: v1\nflags:\n  migStrategy: none\n"
SHARED = TIME_SLICING
PER_RESOURCE_RENAME = """version: v1
sharing:
  timeSlicing:
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/gpu
        rename: nvidia.com/gpu-ts
        replicas: 4
"""


def multi_config(default: str) -> list[dict[str, Any]]:
    """The device-plugin chart rendered with two named configs, `default` selecting one for unlabelled nodes."""
    return device_plugin(config__map={"exclusive": EXCLUSIVE, "shared": SHARED}, config__default=default)


def on(resource: str, label: str | None = None, count: int = 1) -> dict[str, Any]:
    node_selector = selector("device-plugin")
    if label is not None:
        node_selector[PLUGIN_CONFIG_LABEL] = label
    return gpu_workload(resource, node_selector, count)


def judge(harness: Harness, manifests: list[dict[str, Any]]) -> Outcome:
    return harness.stack(SHARED_GPU_RESOURCE_NAME, foreign(manifests))


def messages(harness: Harness, manifests: list[dict[str, Any]]) -> list[str]:
    return judge(harness, manifests).messages


def test_the_render_carries_both_configs_and_the_default() -> None:
    rendered = multi_config("exclusive")
    config_map = next(m for m in rendered if m["kind"] == "ConfigMap")
    assert sorted(config_map["data"]) == ["exclusive", "shared"]
    env = [
        e
        for m in rendered
        if m["kind"] == "DaemonSet"
        for c in m["spec"]["template"]["spec"]["initContainers"]
        for e in c.get("env", [])
    ]
    assert {"name": "DEFAULT_CONFIG", "value": "exclusive"} in env


def test_a_per_node_shared_config_is_not_refused_for_being_unselected(harness: Harness) -> None:
    harness.passes(judge(harness, [*multi_config("exclusive"), on("nvidia.com/gpu")]))


def test_a_workload_on_nodes_labelled_with_the_shared_config_asks_for_the_shared_name(harness: Harness) -> None:
    refused = messages(harness, [*multi_config("exclusive"), on("nvidia.com/gpu", "shared")])
    assert len(refused) == 1
    assert f"config 'shared' (its {PLUGIN_CONFIG_LABEL} node label) advertises nvidia.com/gpu.shared" in refused[0]
    harness.passes(judge(harness, [*multi_config("exclusive"), on("nvidia.com/gpu.shared", "shared")]))


def test_a_workload_pinned_to_the_exclusive_config_passes_when_the_default_is_shared(harness: Harness) -> None:
    harness.passes(judge(harness, [*multi_config("shared"), on("nvidia.com/gpu", "exclusive")]))
    # Unpinned, it may land on unlabelled nodes (shared) or labelled exclusive ones: the scheduler picks the latter.
    harness.passes(judge(harness, [*multi_config("shared"), on("nvidia.com/gpu")]))


def test_a_single_shared_default_still_refuses_the_exclusive_name(harness: Harness) -> None:
    rendered = device_plugin(config__map={"shared": SHARED}, config__default="shared")
    refused = messages(harness, [*rendered, on("nvidia.com/gpu")])
    assert len(refused) == 1
    assert "whose time-slicing config advertises nvidia.com/gpu.shared instead" in refused[0]
    assert "several shared replicas" not in refused[0]
    too_many = messages(harness, [*rendered, on("nvidia.com/gpu.shared", count=2)])
    assert len(too_many) == 1
    assert "failRequestsGreaterThanOne: true, so the allocation fails" in too_many[0]


def test_a_per_resource_rename_is_ignored_as_plugin_0_20_0_ignores_it(harness: Harness) -> None:
    rendered = device_plugin(config__map={"ts": PER_RESOURCE_RENAME}, config__default="ts")
    harness.passes(judge(harness, [*rendered, on("nvidia.com/gpu")]))


# --------------------------------------------------------------------------- the GPU Operator's device plugin


def operator_render(data: dict[str, str], default: str) -> list[dict[str, Any]]:
    values = {
        **Harness.values("operator-cluster-policy-values.yaml"),
        "devicePlugin": {
            "enabled": True,
            "config": {"create": True, "name": "plugin-configs", "default": default, "data": data},
        },
    }
    objects, error = render(charts.gpu_operator(), values)
    assert error == ""
    return [o for o in objects if o["kind"] in {"ClusterPolicy", "ConfigMap"}]


def test_cluster_policy_time_slicing_is_checked_against_workloads(harness: Harness) -> None:
    rendered = operator_render({"shared": SHARED}, "shared")
    policy = next(o for o in rendered if o["kind"] == "ClusterPolicy")
    assert policy["spec"]["devicePlugin"]["config"] == {"name": "plugin-configs", "default": "shared"}
    workload = gpu_workload("nvidia.com/gpu", {"eks.amazonaws.com/compute-type": "hybrid"})
    refused = messages(harness, [*rendered, workload])
    assert len(refused) == 1
    assert "the GPU Operator's device plugin (kubernetes:nvidia.com/v1:ClusterPolicy 'cluster-policy')" in refused[0]
    assert "advertises nvidia.com/gpu.shared" in refused[0]
    shared = gpu_workload("nvidia.com/gpu.shared", {"eks.amazonaws.com/compute-type": "hybrid"})
    harness.passes(judge(harness, [*rendered, shared]))


def test_cluster_policy_config_map_is_referenced(harness: Harness) -> None:
    """Its ConfigMap is read by the Operator's plugin: never 'referenced by no device plugin'."""
    rendered = operator_render({"shared": SHARED, "exclusive": EXCLUSIVE}, "exclusive")
    harness.passes(judge(harness, rendered))
    harness.passes(harness.stack(TIME_SLICING_CONFIG_ATTACHED, foreign(rendered)))
    loose = [o for o in rendered if o["kind"] == "ConfigMap"]
    outcome = harness.stack(TIME_SLICING_CONFIG_ATTACHED, foreign(loose))
    assert any("no device plugin references" in m for m in outcome.messages)


def test_operator_release_values_config_is_judged(harness: Harness) -> None:
    values = {
        **Harness.values("operator-cluster-policy-values.yaml"),
        "devicePlugin": {
            "enabled": True,
            "config": {"create": True, "name": "plugin-configs", "default": "shared", "data": {"shared": SHARED}},
        },
    }
    release = harness.helm("gpu-operator", "gpu-operator", "v26.7.0", values, resource_type=harness.release)
    workload = foreign([gpu_workload("nvidia.com/gpu", {"eks.amazonaws.com/compute-type": "hybrid"})])
    refused = harness.stack(SHARED_GPU_RESOURCE_NAME, [release, *workload]).one()
    assert "Release 'gpu-operator'" in refused
    assert "nvidia.com/gpu.shared" in refused
