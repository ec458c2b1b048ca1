"""Issue 40 item 4: the pack judges the KEP-5004 name mapping, per version and per version source.

Every stack is built from real `helm template` renders of the DRA 0.5.0 chart (the registry's pin, with
`--api-versions resource.k8s.io/v1/DeviceClass`, so its `gpu.nvidia.com` class maps `nvidia.com/gpu`) with mutated
values, the device-plugin 0.20.0 chart and NVIDIA's static manifest, pasted as another team's plain manifests. The
version reaches the pack as the engine hands it over: the stack's `eks-hybrid-gpu:cluster` in `pulumi.runtime`
config, or the policy config. Every passing case also asserts that the policy applied.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pulumi
import pytest

from policy.gpu_allocation.rules.dra import (
    DRA_EXTENDED_RESOURCE_GATE_ON,
    DRA_EXTENDED_RESOURCE_NAME_UNIQUE,
    DRA_EXTENDED_RESOURCE_ONE_PUBLISHER,
    DRA_EXTENDED_RESOURCE_REQUEST_SERVED,
)
from policy.gpu_allocation.rules.ownership import SINGLE_ALLOCATION_OWNER
from tests.support import charts
from tests.support.policy_harness import Harness, Item, Outcome

from .helm import attempt
from .test_foreign_stacks import device_plugin, foreign, gpu_workload, selector, static_plugin

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives

GPU = "nvidia.com/gpu"
CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass 'gpu.nvidia.com'"
TEAM_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass 'team-gpu'"
DRA_NODES = selector("dra")
PLUGIN_NODES = selector("device-plugin")


@functools.cache
def _dra_render(overrides: str) -> list[dict[str, Any]]:
    values = Harness.values("dra-values.yaml")
    for path, value in json.loads(overrides):
        target = values
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    objects, error = attempt(
        "hybrid-gpu-dra",
        charts.dra_driver_pinned(),
        "gpu-dra-system",
        values,
        ("resource.k8s.io/v1/DeviceClass",),
        timeout=120,
    )
    assert error == ""
    return objects


def dra(*, mapped: bool = True, **overrides: Any) -> list[dict[str, Any]]:
    """The DRA 0.5.0 chart rendered with the guide's values and dotted-path overrides (`a__b=value`).

    `mapped=False` drops `extendedResourceName` from its classes, as this program does unless
    `dra.extendedResourceName` is set (components/dra_driver.py `without_extended_resource_name`).
    """
    pairs = [(k.split("__"), v) for k, v in sorted(overrides.items())]
    objects = copy.deepcopy(_dra_render(json.dumps(pairs)))
    for manifest in objects:
        if manifest["kind"] == "DeviceClass" and not mapped:
            manifest["spec"].pop("extendedResourceName", None)
    return objects


def team_class(name: str = GPU) -> dict[str, Any]:
    """Another team's DeviceClass mapping `name` onto the NVIDIA driver's GPUs."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "team-gpu"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "extendedResourceName": name,
        },
    }


def stack_cluster(**cluster: Any) -> None:
    """The stack's `eks-hybrid-gpu:cluster`, where the engine puts it for an analyzer (PULUMI_CONFIG)."""
    pulumi.runtime.set_config("eks-hybrid-gpu:cluster", json.dumps(cluster))


def workload(resource: str = GPU, nodes: dict[str, str] | None = None, kind: str = "Deployment") -> dict[str, Any]:
    """A plain GPU request (no claim) of one workload kind, placed by nodeSelector (None: anywhere)."""
    manifest = gpu_workload(resource, DRA_NODES if nodes is None else nodes)
    if not manifest["spec"]["template"]["spec"]["nodeSelector"]:
        del manifest["spec"]["template"]["spec"]["nodeSelector"]
    if kind == "Job":
        manifest.update(apiVersion="batch/v1", kind="Job")
    elif kind == "CronJob":
        job = {"spec": manifest["spec"]}
        manifest.update(apiVersion="batch/v1", kind="CronJob", spec={"schedule": "@daily", "jobTemplate": job})
    return manifest


def cohorts(*, mapped: bool = True, extra: list[dict[str, Any]] | None = None, **dra_overrides: Any) -> list[Item]:
    """The device plugin on its cohort, the DRA driver on its own (its class mapping `nvidia.com/gpu` unless not)."""
    return foreign([*device_plugin(), *dra(mapped=mapped, **dra_overrides), *(extra or [])])


def refused(outcome: Outcome, *parts: str) -> str:
    message = outcome.one()
    for part in parts:
        assert part in message, (part, message)
    return message


# --------------------------------------------------------------------------- the render itself


def test_the_pinned_chart_maps_nvidia_gpu_through_its_gpu_class() -> None:
    classes = {m["metadata"]["name"]: m["spec"] for m in dra() if m["kind"] == "DeviceClass"}
    assert classes["gpu.nvidia.com"]["extendedResourceName"] == GPU
    assert [n for n, spec in classes.items() if "extendedResourceName" in spec] == ["gpu.nvidia.com"]
    stripped = [m for m in dra(mapped=False) if m["kind"] == "DeviceClass"]
    assert all("extendedResourceName" not in m["spec"] for m in stripped)
    # On an API that is not v1 the chart prints no mapping at all.
    beta = [m for m in dra(resourceApiVersion="resource.k8s.io/v1beta2") if m["kind"] == "DeviceClass"]
    assert beta
    assert all("extendedResourceName" not in m["spec"] for m in beta)


# --------------------------------------------------------------------------- two classes, one name


@pytest.mark.parametrize(
    ("extra", "mapped", "verdict"),
    [
        ([team_class()], True, "refused"),
        ([team_class("example.com/gpu")], True, "passes"),
        ([team_class()], False, "passes"),
        ([], True, "passes"),
    ],
    ids=["chart-and-team-class-map-gpu", "team-class-maps-another-name", "chart-mapping-dropped", "one-class"],
)
def test_two_classes_mapping_one_name_are_refused_naming_both(
    harness: Harness, extra: list[dict[str, Any]], mapped: bool, verdict: str
) -> None:
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_NAME_UNIQUE, foreign([*dra(mapped=mapped), *extra]))
    if verdict == "passes":
        harness.passes(outcome)
        return
    message = refused(outcome, CLASS, TEAM_CLASS, "spec.extendedResourceName 'nvidia.com/gpu'", "created last")
    assert "Keep spec.extendedResourceName on exactly one of them" in message
    assert "pulumi preview --policy-pack policy" in message


# --------------------------------------------------------------------------- a mapped name a plugin also publishes


@pytest.mark.parametrize(
    ("stack", "verdict"),
    [
        (lambda: cohorts(), "passes"),
        (lambda: foreign([*device_plugin(nodeSelector=DRA_NODES), *dra()]), "refused"),
        (lambda: foreign([*device_plugin(), *dra(kubeletPlugin__nodeSelector=PLUGIN_NODES)]), "refused"),
        (lambda: foreign([static_plugin(), *dra()]), "refused"),
        (lambda: foreign([*device_plugin(nodeSelector=DRA_NODES), *dra(), team_class("example.com/gpu")]), "refused"),
        (lambda: foreign([*device_plugin(nodeSelector=DRA_NODES), *dra(mapped=False)]), "not-applicable"),
        (lambda: foreign([*device_plugin(), team_class()]), "not-applicable"),
    ],
    ids=[
        "disjoint-cohorts",
        "plugin-moved-onto-dra-nodes",
        "driver-moved-onto-plugin-nodes",
        "static-plugin-everywhere",
        "foreign-name-ignored-chart-name-refused",
        "no-mapping",
        "no-dra-driver",
    ],
)
def test_a_mapped_name_a_device_plugin_publishes_on_dra_nodes_is_refused(
    harness: Harness, stack: Any, verdict: str
) -> None:
    items = stack()
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_ONE_PUBLISHER, items)
    if verdict == "passes":
        harness.passes(outcome)
        return
    if verdict == "not-applicable":
        harness.not_applicable(outcome)
        return
    message = refused(outcome, CLASS, "maps spec.extendedResourceName 'nvidia.com/gpu'", "two owners")
    assert "DaemonSet" in message
    assert "kubelet-plugin" in message
    assert "allocatable of the name is above 0" in message
    assert "eks-hybrid-gpu move-host" in message
    # The overlap itself is single-allocation-owner's as well: the mapping rule adds what the scheduler does.
    assert harness.stack(SINGLE_ALLOCATION_OWNER, items).violations


def test_the_operators_device_plugin_reaches_the_dra_nodes(harness: Harness) -> None:
    values = Harness.values("operator-cluster-policy-values.yaml")
    values["devicePlugin"]["enabled"] = True
    operator = harness.helm("gpu-operator", "gpu-operator", "v26.7.0", values, resource_type=harness.release)
    refused(
        harness.stack(DRA_EXTENDED_RESOURCE_ONE_PUBLISHER, [operator, *foreign(dra())]),
        "the device plugin of kubernetes:helm.sh/v3:Release 'gpu-operator', on every GPU node",
    )
    values["devicePlugin"]["enabled"] = False
    harness.not_applicable(harness.stack(DRA_EXTENDED_RESOURCE_ONE_PUBLISHER, [operator, *foreign(dra(mapped=False))]))
    harness.passes(harness.stack(DRA_EXTENDED_RESOURCE_ONE_PUBLISHER, [operator, *foreign(dra())]))


# --------------------------------------------------------------------------- a plain request on DRA nodes


SERVED = "passes"
GATE_OFF = "gate-off"
UNKNOWN = "cannot-know"
NO_MAPPING = "no-mapping"


@pytest.mark.parametrize(
    ("cluster", "policy_config", "mapped", "verdict", "version"),
    [
        ({"kubernetesVersion": "1.37.2"}, None, True, SERVED, None),
        ({"kubernetesVersion": "1.36.0"}, None, True, SERVED, None),
        ({"kubernetesVersion": "1.35.3"}, None, True, GATE_OFF, "1.35"),
        ({"kubernetesVersion": "1.34.4"}, None, True, GATE_OFF, "1.34"),
        ({"kubernetesVersion": "1.34.4", "featureGates": {"DRAExtendedResource": True}}, None, True, SERVED, None),
        ({"kubernetesVersion": "1.37.2", "featureGates": {"DRAExtendedResource": False}}, None, True, SERVED, None),
        (None, {"kubernetesVersion": "1.37.2"}, True, SERVED, None),
        (None, {"kubernetesVersion": "1.35.0"}, True, GATE_OFF, "1.35"),
        (None, {"kubernetesVersion": "1.35.0", "featureGates": {"DRAExtendedResource": True}}, True, SERVED, None),
        (None, {"kubernetesVersion": "1.37.2", "oldestKubeletVersion": "1.34.4"}, True, GATE_OFF, "1.34"),
        ({"source": "eks", "name": "c", "region": "us-west-2"}, {"kubernetesVersion": "1.36.1"}, True, SERVED, None),
        ({"kubernetesVersion": "1.34.4"}, {"kubernetesVersion": "1.37.2"}, True, GATE_OFF, "1.34"),
        (None, None, True, UNKNOWN, None),
        ({"source": "eks", "name": "c", "region": "us-west-2"}, None, True, UNKNOWN, None),
        ({"kubernetesVersion": "latest"}, None, True, UNKNOWN, None),
        (None, {"kubernetesVersion": "1.37.2", "featureGates": ["DRAExtendedResource"]}, True, UNKNOWN, None),
        ({"kubernetesVersion": "1.37.2"}, None, False, NO_MAPPING, None),
        (None, None, False, NO_MAPPING, None),
    ],
    ids=[
        "stack-1.37",
        "stack-1.36",
        "stack-1.35",
        "stack-1.34",
        "stack-1.34-gate-set",
        "stack-1.37-gate-locked",
        "policy-1.37",
        "policy-1.35",
        "policy-1.35-gate-set",
        "policy-1.37-kubelets-1.34",
        "eks-source-policy-1.36",
        "stack-wins-over-policy",
        "no-version",
        "eks-source-no-version",
        "stack-version-unreadable",
        "policy-gates-unreadable",
        "stack-1.37-no-mapping",
        "no-version-no-mapping",
    ],
)
def test_a_plain_request_that_can_only_land_on_dra_nodes(
    harness: Harness,
    cluster: dict[str, Any] | None,
    policy_config: dict[str, Any] | None,
    mapped: bool,
    verdict: str,
    version: str | None,
) -> None:
    if cluster is not None:
        stack_cluster(**cluster)
    items = cohorts(mapped=mapped, extra=[workload()])
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, items, policy_config)
    if verdict == SERVED:
        harness.passes(outcome)
        return
    message = refused(
        outcome,
        "kubernetes:apps/v1:Deployment 'ai-workloads/inference' (container 'server') asks nvidia.com/gpu with no "
        "ResourceClaim and can only land on nodes of the DRA driver",
        "pulumi preview --policy-pack policy",
    )
    if verdict == NO_MAPPING:
        assert "no DeviceClass maps it" in message
        assert "eks-hybrid-gpu:dra.extendedResourceName: nvidia.com/gpu" in message
        assert "Insufficient nvidia.com/gpu" in message
        assert "version" not in message.split("Either")[0]  # no version is needed to refuse it
    elif verdict == GATE_OFF:
        assert f"DRAExtendedResource is off in Kubernetes {version} (alpha, off by default;" in message
        assert CLASS in message
        assert "Upgrade the cluster to 1.36+" in message
        assert "eks-hybrid-gpu:cluster.featureGates.DRAExtendedResource: true" in message
        assert "ResourceClaim" in message
    else:
        assert "cannot judge the object and refuses it (fail closed)" in message
        assert "pulumi config set --path eks-hybrid-gpu:cluster.kubernetesVersion" in message
        assert '{"dra-extended-resource-request-served": {"kubernetesVersion": "1.37.2"}}' in message


def test_where_the_version_came_from_is_named(harness: Harness) -> None:
    stack_cluster(kubernetesVersion="1.35.3")
    message = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, cohorts(extra=[workload()])).one()
    assert "eks-hybrid-gpu:cluster.kubernetesVersion '1.35.3' in the stack config" in message
    pulumi.runtime.set_all_config({})
    config = {"kubernetesVersion": "1.37.2", "oldestKubeletVersion": "1.34.4"}
    message = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, cohorts(extra=[workload()]), config).one()
    assert "in the policy config of dra-extended-resource-request-served" in message
    assert "oldestKubeletVersion '1.34.4'" in message


@pytest.mark.parametrize(
    ("request_of", "verdict"),
    [
        (lambda: workload(nodes=PLUGIN_NODES), SERVED),
        (lambda: workload(nodes={}), SERVED),
        (lambda: workload(kind="Job"), GATE_OFF),
        (lambda: workload(kind="CronJob"), GATE_OFF),
        (lambda: workload("nvidia.com/gpu.shared"), NO_MAPPING),
        (lambda: workload("nvidia.com/mig-1g.10gb"), NO_MAPPING),
    ],
    ids=["on-plugin-nodes", "anywhere-reaches-the-plugin", "job", "cronjob", "shared-name-unmapped", "mig-unmapped"],
)
def test_each_workload_is_judged_by_where_it_may_land(harness: Harness, request_of: Any, verdict: str) -> None:
    stack_cluster(kubernetesVersion="1.34.4")
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, cohorts(extra=[request_of()]))
    if verdict == SERVED:
        harness.passes(outcome)
    elif verdict == GATE_OFF:
        assert "DRAExtendedResource is off in Kubernetes 1.34" in outcome.one()
    else:
        assert "no DeviceClass maps it" in outcome.one()


def test_a_request_the_plugin_may_serve_needs_no_version(harness: Harness) -> None:
    """The version is read only where a verdict depends on it: a stack that does not need it is not refused for it."""
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, cohorts(extra=[workload(nodes=PLUGIN_NODES)]))
    harness.passes(outcome)


def test_a_claim_or_no_dra_driver_is_not_this_policys(harness: Harness) -> None:
    claim = workload()
    pod = claim["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    harness.not_applicable(harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, cohorts(extra=[claim])))
    no_gpus = foreign([*dra(resources__gpus__enabled=False), workload()])
    harness.not_applicable(harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, no_gpus))


# --------------------------------------------------------------------------- a mapping where the gate is off


@pytest.mark.parametrize(
    ("cluster", "policy_config", "verdict"),
    [
        ({"kubernetesVersion": "1.34.4"}, None, GATE_OFF),
        ({"kubernetesVersion": "1.35.3"}, None, GATE_OFF),
        ({"kubernetesVersion": "1.36.0"}, None, SERVED),
        ({"kubernetesVersion": "1.37.2"}, None, SERVED),
        ({"kubernetesVersion": "1.35.3", "featureGates": {"DRAExtendedResource": True}}, None, SERVED),
        (None, {"kubernetesVersion": "1.34.4"}, GATE_OFF),
        (None, None, UNKNOWN),
    ],
    ids=["1.34", "1.35", "1.36", "1.37", "1.35-gate-set", "policy-1.34", "no-version"],
)
def test_a_mapping_where_the_gate_is_off_is_a_warning(
    harness: Harness, cluster: dict[str, Any] | None, policy_config: dict[str, Any] | None, verdict: str
) -> None:
    if cluster is not None:
        stack_cluster(**cluster)
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_GATE_ON, foreign(dra()), policy_config)
    if verdict == SERVED:
        harness.passes(outcome)
        return
    message = refused(outcome, CLASS, "maps spec.extendedResourceName 'nvidia.com/gpu'", "pulumi preview")
    if verdict == GATE_OFF:
        assert "DRAExtendedResource is off in Kubernetes 1.3" in message
        assert "this class maps nothing" in message
    else:
        assert "the pack cannot know the cluster's Kubernetes version" in message


def test_the_gate_warning_is_an_advisory_and_the_mapping_refusals_are_mandatory() -> None:
    from pulumi_policy import EnforcementLevel

    assert DRA_EXTENDED_RESOURCE_GATE_ON.enforcement_level == EnforcementLevel.ADVISORY
    for policy in (
        DRA_EXTENDED_RESOURCE_NAME_UNIQUE,
        DRA_EXTENDED_RESOURCE_ONE_PUBLISHER,
        DRA_EXTENDED_RESOURCE_REQUEST_SERVED,
    ):
        assert policy.enforcement_level == EnforcementLevel.MANDATORY


def test_no_mapping_class_is_not_applicable_to_the_gate_warning(harness: Harness) -> None:
    harness.not_applicable(harness.stack(DRA_EXTENDED_RESOURCE_GATE_ON, foreign(dra(mapped=False))))


def test_a_mapping_of_the_wrong_type_is_refused_not_skipped(harness: Harness) -> None:
    bad = team_class()
    bad["spec"]["extendedResourceName"] = ["nvidia.com/gpu"]
    for policy in (DRA_EXTENDED_RESOURCE_NAME_UNIQUE, DRA_EXTENDED_RESOURCE_GATE_ON):
        message = harness.stack(policy, foreign([bad])).one()
        assert "spec.extendedResourceName" in message
        assert "fail closed" in message
