"""No crash can hide a violation: a hostile value is "cannot tell" for its object, and the rest is still judged.

Each stack carries one real violation next to one object with a value built to exhaust a recursive reader:
JSON nested far deeper than the interpreter's recursion limit, YAML nested as deep, and a self-referencing
YAML anchor (which `yaml.safe_load` turns into a cyclic structure).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from policy.gpu_allocation.rules.ownership import OWNERSHIP_LEDGER_CONSISTENT, SINGLE_ALLOCATION_OWNER
from policy.gpu_allocation.rules.sharing import MIG_STRATEGY_CONSISTENT, SHARED_GPU_RESOURCE_NAME
from policy.gpu_allocation.vocab import labels as vocab
from policy.gpu_allocation.vocab.parsing import MAX_DEPTH, TOO_DEEP, bounded, load_json, load_yaml
from tests.support.policy_harness import DP_SELECTOR, Harness, Item

from .test_foreign_stacks import device_plugin, dra, foreign, gpu_workload, selector, static_plugin

pytestmark = pytest.mark.policy

DEEP = sys.getrecursionlimit() * 2
DEEP_JSON = "[" * DEEP + "]" * DEEP
DEEP_YAML = "a:\n" + "".join(f"{'  ' * (i + 1)}a:\n" for i in range(DEEP // 4)) + "  " * (DEEP // 4 + 1) + "b: 1\n"
SELF_ANCHOR = "sharing: &loop\n  timeSlicing: *loop\n"


def test_readers_bound_depth_and_refuse_cycles() -> None:
    assert load_json(DEEP_JSON) == (None, TOO_DEEP)
    assert load_yaml(DEEP_YAML) == (None, TOO_DEEP)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert not bounded(cyclic)
    nested: Any = 1
    for _ in range(MAX_DEPTH):
        nested = [nested]
    assert bounded(nested)
    assert not bounded([nested])
    shared = [1]
    assert bounded([shared, shared, [shared]])
    assert load_json('{"a": [1]}') == ({"a": [1]}, None)
    assert load_yaml("a: [1]") == ({"a": [1]}, None)


def _overlap_stack() -> list[Item]:
    """A real single-allocation-owner violation: NVIDIA's static plugin next to the DRA driver."""
    return foreign([static_plugin(), *dra()])


@pytest.mark.charts
def test_deep_json_in_the_ledger_is_reported_and_the_overlap_still_is(harness: Harness) -> None:
    ledger = harness.ledger({})
    ledger["data"][vocab.LEDGER_KEY] = DEEP_JSON
    stamped = harness.stamp(static_plugin(DP_SELECTOR), "device-plugin", "plugin", DP_SELECTOR)
    items = [*_overlap_stack(), harness.item(stamped, "stamped"), harness.item(ledger)]
    assert any("can select the same nodes" in m for m in harness.stack(SINGLE_ALLOCATION_OWNER, items).messages)
    message = harness.stack(OWNERSHIP_LEDGER_CONSISTENT, items).one()
    assert TOO_DEEP in message
    assert vocab.LEDGER_NAME in message


@pytest.mark.charts
def test_deep_json_in_a_selector_annotation_is_cannot_tell(harness: Harness) -> None:
    manifest = harness.stamp(static_plugin(DP_SELECTOR), "device-plugin", "plugin", DP_SELECTOR)
    manifest["metadata"]["annotations"][vocab.SELECTOR_ANNOTATION] = DEEP_JSON
    messages = harness.stack(SINGLE_ALLOCATION_OWNER, [*_overlap_stack(), harness.item(manifest, "stamped")]).messages
    assert any("can select the same nodes" in m for m in messages)


@pytest.mark.charts
@pytest.mark.parametrize("text", [DEEP_YAML, SELF_ANCHOR], ids=["deep-yaml", "self-anchor"])
def test_hostile_time_slicing_config_map_still_lets_the_rename_be_found(harness: Harness, text: str) -> None:
    rendered = device_plugin("device-plugin-time-slicing-values.yaml")
    hostile = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "team-configs", "namespace": "gpu-system"},
        "data": {"time-slicing": text},
    }
    workload = gpu_workload("nvidia.com/gpu", selector("device-plugin"))
    outcome = harness.stack(SHARED_GPU_RESOURCE_NAME, foreign([*rendered, hostile, workload]))
    assert any("nvidia.com/gpu.shared" in m for m in outcome.messages)


@pytest.mark.charts
@pytest.mark.parametrize("text", [DEEP_YAML, SELF_ANCHOR], ids=["deep-yaml", "self-anchor"])
def test_hostile_release_values_config_is_refused_and_the_rest_still_judged(harness: Harness, text: str) -> None:
    values = harness.values("device-plugin-time-slicing-values.yaml")
    values["config"]["map"]["time-slicing"] = text
    release = harness.helm(
        "team-plugin", "nvidia-device-plugin", "0.20.0", values, resource_type="kubernetes:helm.sh/v3:Release"
    )
    mig = foreign([*device_plugin(), gpu_workload("nvidia.com/mig-1g.5gb", selector("device-plugin"))])
    refused = harness.stack(SHARED_GPU_RESOURCE_NAME, [release]).one()
    assert "values config.map: config 'time-slicing'" in refused
    assert TOO_DEEP in refused
    assert "fail closed" in refused
    messages = harness.stack(MIG_STRATEGY_CONSISTENT, [release, *mig]).messages
    assert messages
    assert all("'ai-workloads/inference': container 'server' requests nvidia.com/mig-1g.5gb" in m for m in messages)


@pytest.mark.charts
def test_deeply_nested_props_are_cannot_tell_for_that_object(harness: Harness) -> None:
    nested: dict[str, Any] = {"leaf": "x"}
    for _ in range(90):
        nested = {"n": nested}
    hostile = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": {}, "extra": nested}
    messages = harness.stack(SINGLE_ALLOCATION_OWNER, [*_overlap_stack(), harness.item(hostile)]).messages
    assert len(messages) == 2
    assert any("can select the same nodes" in m for m in messages)
    # The ConfigMap may be the ledger: it cannot be judged, and says so (fail closed).
    unreadable = next(m for m in messages if "fail closed" in m)
    assert "kubernetes:core/v1:ConfigMap" in unreadable
    assert "its inputs" in unreadable
    assert TOO_DEEP in unreadable
    assert json.dumps(messages)  # plain strings
