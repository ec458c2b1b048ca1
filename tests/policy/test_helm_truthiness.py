"""Values flags read as Helm reads them: `{{ if }}` truthiness, dependency conditions, flags printed into a CR.

Each case is proven on the real chart first (`helm template` of the archive from the chart-source chain,
tests/support/charts.py), then the pack is run on the same values as a Release, with a clean twin one value apart.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.drivers import OPERATOR_HOOKS_KEPT
from policy.gpu_allocation.rules.ownership import (
    NFD_ONE_OWNER,
    OPERATOR_CR_EXCLUSIVE,
    OPERATOR_DEVICE_PLUGIN_DISABLED,
)
from policy.gpu_allocation.rules.props import UNKNOWN
from policy.gpu_allocation.rules.readers import helm_condition, helm_flag, helm_rendered_bool, helm_truthy
from tests.support import charts
from tests.support.policy_harness import Harness, Item

from .helm import attempt
from .test_foreign_stacks import device_plugin, foreign

pytestmark = [pytest.mark.policy, pytest.mark.charts]


def render(archive: Any, values: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """`helm template` of an archive as release `release` in gpu-operator, on a cluster serving DRA v1."""
    return attempt("release", archive, "gpu-operator", values, ("resource.k8s.io/v1/DeviceClass",), timeout=120)


def operator_release(harness: Harness, values: dict[str, Any]) -> Item:
    return harness.helm("gpu-operator", "gpu-operator", "v26.7.0", values, resource_type=harness.release)


@pytest.mark.parametrize(
    ("value", "truthy"),
    [
        (False, False),
        (0, False),
        (0.0, False),
        ("", False),
        (None, False),
        ([], False),
        ({}, False),
        (True, True),
        ("false", True),
        ("0", True),
        (1, True),
        (["x"], True),
        ({"a": 1}, True),
    ],
)
def test_helm_truthiness_is_go_template_truthiness(value: Any, truthy: bool) -> None:
    assert helm_truthy(value) is truthy


def test_flag_readers_take_the_chart_default_and_keep_unknown() -> None:
    assert helm_flag({}, "gpu-operator", "clusterPolicy.deployCR") is True
    assert helm_flag({}, "gpu-operator", "gpuCluster.deployCR") is False
    assert helm_flag({"gpuCluster": {"deployCR": "no"}}, "gpu-operator", "gpuCluster.deployCR") is True
    assert helm_flag(UNKNOWN, "gpu-operator", "gpuCluster.deployCR") is UNKNOWN
    assert helm_flag({"gpuCluster": UNKNOWN}, "gpu-operator", "gpuCluster.deployCR") is UNKNOWN
    assert helm_condition(
        {"nfd": {"enabled": "false"}, "gfd": {"enabled": True}}, "device-plugin", "nfd.enabled,gfd.enabled"
    )
    assert not helm_condition(
        {"nfd": {"enabled": False}, "gfd": {"enabled": True}},
        "device-plugin",
        "nfd.enabled,gfd.enabled",
    )
    assert helm_condition({}, "device-plugin", "nfd.enabled,gfd.enabled") is False  # gfd.enabled defaults to false
    assert helm_condition({}, "gpu-operator", "nfd.enabled") is True
    assert helm_rendered_bool({"devicePlugin": {"enabled": "false"}}, "gpu-operator", "devicePlugin.enabled") is False
    assert helm_rendered_bool({"devicePlugin": {"enabled": 0}}, "gpu-operator", "devicePlugin.enabled") is None
    assert helm_rendered_bool({}, "gpu-operator", "devicePlugin.enabled") is True


def test_deploy_cr_string_false_renders_both_crs_and_is_refused(harness: Harness) -> None:
    values = {"clusterPolicy": {"deployCR": "false"}, "gpuCluster": {"deployCR": True}, "driver": {"enabled": False}}
    objects, error = render(charts.gpu_operator(), values)
    assert objects == []
    assert "cannot both be true" in error  # Helm reads the string "false" as true
    message = harness.stack(OPERATOR_CR_EXCLUSIVE, [operator_release(harness, values)]).one()
    assert "clusterPolicy.deployCR='false'" in message
    assert "cannot coexist" in message


def test_deploy_cr_boolean_false_is_one_cr_and_passes(harness: Harness) -> None:
    values = {"clusterPolicy": {"deployCR": False}, "gpuCluster": {"deployCR": True}, "driver": {"enabled": False}}
    objects, error = render(charts.gpu_operator(), values)
    assert error == ""
    assert [o["kind"] for o in objects if o["apiVersion"].startswith("nvidia.com/")] == ["GPUCluster"]
    harness.passes(harness.stack(OPERATOR_CR_EXCLUSIVE, [operator_release(harness, values)]))


@pytest.mark.parametrize(("value", "refused"), [("false", False), (False, False), ("true", True), (True, True)])
def test_device_plugin_enabled_is_read_as_the_cluster_policy_reads_it(
    harness: Harness, value: Any, refused: bool
) -> None:
    values = {**Harness.values("operator-cluster-policy-values.yaml"), "devicePlugin": {"enabled": value}}
    objects, error = render(charts.gpu_operator(), values)
    assert error == ""
    policy = next(o for o in objects if o["kind"] == "ClusterPolicy")
    assert policy["spec"]["devicePlugin"]["enabled"] is refused  # the chart prints the flag, YAML reads it back
    outcome = harness.stack(
        OPERATOR_DEVICE_PLUGIN_DISABLED, [operator_release(harness, values), *foreign(device_plugin())]
    )
    if refused:
        assert outcome.violations
    else:
        harness.passes(outcome)


def test_device_plugin_enabled_that_no_cr_can_take_is_refused(harness: Harness) -> None:
    values = {**Harness.values("operator-cluster-policy-values.yaml"), "devicePlugin": {"enabled": 0}}
    outcome = harness.stack(
        OPERATOR_DEVICE_PLUGIN_DISABLED, [operator_release(harness, values), *foreign(device_plugin())]
    )
    assert any("values devicePlugin.enabled" in m and "fail closed" in m for m in outcome.messages)


def test_nfd_enabled_string_false_does_not_disable_the_subchart(harness: Harness) -> None:
    values = {**Harness.values("device-plugin-values.yaml"), "gfd": {"enabled": True}, "nfd": {"enabled": "false"}}
    objects, error = render(charts.device_plugin(), values)
    assert error == ""
    assert any(
        o.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/name") == "node-feature-discovery"
        for o in objects
    )
    plugin = harness.helm("team-plugin", "nvidia-device-plugin", "0.20.0", values, resource_type=harness.release)
    operator = operator_release(harness, {"driver": {"enabled": False}})
    message = harness.stack(NFD_ONE_OWNER, [plugin, operator]).one()
    assert "Release 'team-plugin'" in message
    values["nfd"]["enabled"] = False
    objects, _ = render(charts.device_plugin(), values)
    assert not any(
        o.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/name") == "node-feature-discovery"
        for o in objects
    )
    plugin = harness.helm("team-plugin", "nvidia-device-plugin", "0.20.0", values, resource_type=harness.release)
    harness.passes(harness.stack(NFD_ONE_OWNER, [plugin, operator]))


@pytest.mark.parametrize(("value", "refused"), [("false", False), (False, True)])
def test_upgrade_crd_is_read_with_helm_truthiness(harness: Harness, value: Any, refused: bool) -> None:
    objects, error = render(charts.gpu_operator(), {"operator": {"upgradeCRD": value}, "driver": {"enabled": False}})
    assert error == ""
    hooked = any("upgrade-crd" in (o.get("metadata", {}).get("name") or "") for o in objects)
    assert hooked is not refused
    release = operator_release(harness, {"operator": {"upgradeCRD": value}})
    outcome = harness.resource(OPERATOR_HOOKS_KEPT, release.resource_type, release.props, name="gpu-operator")
    if refused:
        assert outcome.violations
    else:
        harness.passes(outcome)
