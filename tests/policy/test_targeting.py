"""no-auto-mode-targeting and gpu-discovery-affinity-kept."""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.targeting import GPU_DISCOVERY_AFFINITY_KEPT, NO_AUTO_MODE_TARGETING, pinning
from tests.support.policy_harness import (
    DP_CHART,
    DP_DAEMONSET,
    DP_SELECTOR,
    DRA_CHART,
    DRA_DAEMONSET,
    DRA_SELECTOR,
    Harness,
    real_records,
    rendered_by,
)

pytestmark = pytest.mark.policy

UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
UNKNOWN_OBJECT = "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"
COMPUTE = "eks.amazonaws.com/compute-type"
NOTE = (
    "Labels are scheduling inputs, not a security boundary: also verify that no other plugin or "
    "Operator publishes the same physical GPUs."
)


def plugin_daemonset(harness: Harness) -> dict[str, Any]:
    doc = harness.find("device-plugin-rendered.yaml", "DaemonSet", DP_DAEMONSET)
    return harness.stamp(doc, "device-plugin", "plugin", DP_SELECTOR)


def kubelet_plugin(harness: Harness) -> dict[str, Any]:
    doc = harness.find("dra-rendered.yaml", "DaemonSet", DRA_DAEMONSET)
    return harness.stamp(doc, "dra", "dra", DRA_SELECTOR, config_path="eks-hybrid-gpu:cohorts[1]")


def smoke_job(harness: Harness, name: str = "hybrid-gpu-plugin-smoke") -> dict[str, Any]:
    job = harness.find("seed-smoke-jobs.yaml", "Job", name)
    stamped = harness.stamp(job, "device-plugin", "plugin", DP_SELECTOR)
    stamped["metadata"]["labels"]["eks-hybrid-gpu.io/smoke-job"] = "true"
    return stamped


# --------------------------------------------------------------------------- Auto Mode


@pytest.mark.parametrize(
    ("file_name", "name"),
    [
        ("device-plugin-rendered.yaml", DP_DAEMONSET),
        ("device-plugin-rendered.yaml", f"{DP_DAEMONSET}-mps-control-daemon"),
        ("dra-rendered.yaml", DRA_DAEMONSET),
    ],
)
def test_rendered_daemonsets_with_seed_values_are_pinned(harness: Harness, file_name: str, name: str) -> None:
    doc = harness.stamp(harness.find(file_name, "DaemonSet", name), "device-plugin", "plugin", DP_SELECTOR)
    outcome = harness.manifest_check(NO_AUTO_MODE_TARGETING, doc)
    harness.passes(outcome)


def test_unstamped_chart_daemonset_is_still_checked(harness: Harness) -> None:
    doc = harness.find("device-plugin-rendered.yaml", "DaemonSet", DP_DAEMONSET)
    del doc["spec"]["template"]["spec"]["nodeSelector"][COMPUTE]
    outcome = harness.manifest_check(NO_AUTO_MODE_TARGETING, doc)
    assert "is not pinned to eks.amazonaws.com/compute-type=hybrid" in outcome.one()


@pytest.mark.parametrize("name", ["hybrid-gpu-plugin-smoke", "hybrid-gpu-dra-smoke"])
def test_seed_smoke_jobs_are_pinned(harness: Harness, name: str) -> None:
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, smoke_job(harness, name)))


def test_daemonset_without_compute_type(harness: Harness) -> None:
    doc = plugin_daemonset(harness)
    del doc["spec"]["template"]["spec"]["nodeSelector"][COMPUTE]
    message = harness.manifest_check(NO_AUTO_MODE_TARGETING, doc).one()
    assert message == (
        "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-plugin-nvidia-device-plugin' is not pinned to "
        "eks.amazonaws.com/compute-type=hybrid: nodeSelector without eks.amazonaws.com/compute-type and "
        'required nodeAffinity term 0 {"matchExpressions":[{"key":"feature.node.kubernetes.io/pci-10de.present",'
        '"operator":"In","values":["true"]}]} that does not require eks.amazonaws.com/compute-type=hybrid, so it '
        "can schedule on EKS Auto Mode or other non-hybrid GPU nodes, where AWS already manages the GPU device "
        "plugin and a second allocation manager double-advertises GPUs. Add eks.amazonaws.com/compute-type: "
        "hybrid to eks-hybrid-gpu:cohorts[0].nodeSelector (or a required nodeAffinity term per OR'ed term). " + NOTE
    )


def test_smoke_job_targeting_auto_mode(harness: Harness) -> None:
    job = smoke_job(harness)
    job["spec"]["template"]["spec"]["nodeSelector"][COMPUTE] = "auto"
    message = harness.manifest_check(NO_AUTO_MODE_TARGETING, job).one()
    assert message.startswith(
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke' is not pinned to "
        "eks.amazonaws.com/compute-type=hybrid: nodeSelector eks.amazonaws.com/compute-type='auto', so it "
        "explicitly targets EKS Auto Mode nodes"
    )


def test_affinity_that_excludes_auto_in_every_term_pins(harness: Harness) -> None:
    doc = plugin_daemonset(harness)
    pod = doc["spec"]["template"]["spec"]
    del pod["nodeSelector"][COMPUTE]
    for term in pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
        term["matchExpressions"].append({"key": COMPUTE, "operator": "NotIn", "values": ["auto"]})
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, doc))


def test_affinity_with_one_auto_term(harness: Harness) -> None:
    doc = plugin_daemonset(harness)
    pod = doc["spec"]["template"]["spec"]
    del pod["nodeSelector"][COMPUTE]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    for term in terms:
        term["matchExpressions"].append({"key": COMPUTE, "operator": "In", "values": ["hybrid"]})
    terms[2]["matchExpressions"][-1]["values"] = ["hybrid", "auto"]
    message = harness.manifest_check(NO_AUTO_MODE_TARGETING, doc).one()
    assert "required nodeAffinity term 2" in message
    assert "explicitly targets EKS Auto Mode nodes" in message


def test_chart_values_without_hybrid(harness: Harness) -> None:
    values = harness.values("device-plugin-values.yaml")
    values["nodeSelector"] = {"workload.example.com/gpu-allocation": "device-plugin"}
    chart = harness.helm_release("plugin-chart", DP_CHART, "0.20.0", values)
    outcome = harness.resource(NO_AUTO_MODE_TARGETING, chart.resource_type, chart.props, name=chart.name)
    assert outcome.one().startswith(
        "kubernetes:helm.sh/v3:Release 'plugin-chart' values nodeSelector is not pinned to "
        "eks.amazonaws.com/compute-type=hybrid: nodeSelector without eks.amazonaws.com/compute-type and no "
        "required nodeAffinity on eks.amazonaws.com/compute-type"
    )


def test_dra_chart_values(harness: Harness) -> None:
    values = harness.values("dra-values.yaml")
    chart = harness.helm_release("dra-chart", DRA_CHART, "0.5.0", values)
    check = harness.resource(NO_AUTO_MODE_TARGETING, chart.resource_type, chart.props, name=chart.name)
    harness.passes(check)
    del values["kubeletPlugin"]["nodeSelector"]
    chart = harness.helm_release("dra-chart", DRA_CHART, "0.5.0", values)
    message = harness.resource(NO_AUTO_MODE_TARGETING, chart.resource_type, chart.props, name=chart.name).one()
    assert message.startswith("kubernetes:helm.sh/v3:Release 'dra-chart' values kubeletPlugin.nodeSelector is not")
    # Nothing stamped it: the fix names the Release's own value, not this program's stack config.
    assert "Add eks.amazonaws.com/compute-type: hybrid to kubernetes:helm.sh/v3:Release 'dra-chart' values" in message
    assert "eks-hybrid-gpu:" not in message


def test_config_overrides_the_required_value(harness: Harness) -> None:
    doc = plugin_daemonset(harness)
    config = {"requiredComputeType": "onprem"}
    assert len(harness.manifest_check(NO_AUTO_MODE_TARGETING, doc, config).violations) == 1


def test_unlabelled_workload_is_not_applicable(harness: Harness) -> None:
    job = harness.find("seed-smoke-jobs.yaml", "Job", "hybrid-gpu-plugin-smoke")
    job["metadata"]["name"] = "train-resnet"
    outcome = harness.manifest_check(NO_AUTO_MODE_TARGETING, job)
    assert harness.not_applicable(outcome) == "not an allocation-owner workload or smoke Job"


def test_seed_smoke_job_pasted_without_labels_is_judged_by_its_name_and_gpu_request(harness: Harness) -> None:
    job = harness.find("seed-smoke-jobs.yaml", "Job", "hybrid-gpu-plugin-smoke")
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, job))
    job["spec"]["template"]["spec"]["nodeSelector"].pop("eks.amazonaws.com/compute-type")
    message = harness.manifest_check(NO_AUTO_MODE_TARGETING, job).one()
    assert message.startswith("kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke' is not pinned")
    assert (
        "to spec.template.spec.nodeSelector of kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke'"
        in message
    )


def test_unknown_selector_does_not_crash(harness: Harness) -> None:
    doc = plugin_daemonset(harness)
    doc["spec"]["template"]["spec"]["nodeSelector"][COMPUTE] = UNKNOWN_STRING
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, doc))
    doc["spec"]["template"]["spec"]["nodeSelector"] = UNKNOWN_OBJECT
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, doc))
    values = {"nodeSelector": UNKNOWN_OBJECT}
    chart = harness.helm_release("plugin-chart", DP_CHART, "0.20.0", values)
    outcome = harness.resource(NO_AUTO_MODE_TARGETING, chart.resource_type, chart.props)
    harness.passes(outcome)
    chart.props["values"] = UNKNOWN_OBJECT
    outcome = harness.resource(NO_AUTO_MODE_TARGETING, chart.resource_type, chart.props)
    assert harness.not_applicable(outcome) == "the chart values are unknown during preview"


@pytest.mark.parametrize(
    ("selector", "affinity", "verdict"),
    [
        ({COMPUTE: "hybrid"}, None, "pinned"),
        ({COMPUTE: "auto"}, None, "auto"),
        ({COMPUTE: "ec2"}, None, "unpinned"),
        ({}, None, "unpinned"),
        (
            {},
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": COMPUTE, "operator": "In", "values": ["hybrid"]}]},
                            {"matchExpressions": [{"key": COMPUTE, "operator": "NotIn", "values": ["auto"]}]},
                        ]
                    }
                }
            },
            "pinned",
        ),
        (
            {},
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": COMPUTE, "operator": "DoesNotExist"}]},
                        ]
                    }
                }
            },
            "unpinned",
        ),
    ],
)
def test_pinning_rules(selector: dict[str, str], affinity: Any, verdict: str) -> None:
    assert pinning(selector, affinity)[0] == verdict


# --------------------------------------------------------------------------- affinity


def test_rendered_daemonsets_keep_the_affinity(harness: Harness) -> None:
    for doc in (plugin_daemonset(harness), kubelet_plugin(harness)):
        outcome = harness.manifest_check(GPU_DISCOVERY_AFFINITY_KEPT, doc)
        harness.passes(outcome)


def test_seed_values_keep_the_affinity(harness: Harness) -> None:
    for chart in (
        harness.helm_release("plugin-chart", DP_CHART, "0.20.0", harness.values("device-plugin-values.yaml")),
        harness.helm_release("dra-chart", DRA_CHART, "0.5.0", harness.values("dra-values.yaml")),
    ):
        outcome = harness.resource(GPU_DISCOVERY_AFFINITY_KEPT, chart.resource_type, chart.props, name=chart.name)
        harness.passes(outcome)


def test_values_affinity_null(harness: Harness) -> None:
    # The program installs the device plugin as a Chart v4: a device-plugin Release is another team's, and the fix
    # names its own value.
    values = harness.values("device-plugin-values.yaml")
    values["affinity"] = None
    chart = harness.helm_release("plugin-chart", DP_CHART, "0.20.0", values)
    message = harness.resource(GPU_DISCOVERY_AFFINITY_KEPT, chart.resource_type, chart.props, name=chart.name).one()
    assert message == (
        "kubernetes:helm.sh/v3:Release 'plugin-chart' values affinity: affinity: null removes the chart's "
        "GPU-discovery affinity. Without those OR'ed terms (feature.node.kubernetes.io/pci-10de.present, "
        "feature.node.kubernetes.io/cpu-model.vendor_id, nvidia.com/gpu.present) the GPU allocator also lands on "
        "nodes without an NVIDIA GPU. Keep the chart's default affinity (remove the override from "
        "kubernetes:helm.sh/v3:Release 'plugin-chart' values affinity); if no node matches, label the hosts "
        "through the approved NFD/GFD or inventory process (e.g. nvidia.com/gpu.present=true) instead of removing "
        "the affinity."
    )


def test_values_empty_affinity_and_foreign_terms(harness: Harness) -> None:
    values = harness.values("dra-values.yaml")
    values["kubeletPlugin"]["affinity"] = {}
    chart = harness.helm_release("dra-chart", DRA_CHART, "0.5.0", values)
    message = harness.resource(GPU_DISCOVERY_AFFINITY_KEPT, chart.resource_type, chart.props, name=chart.name).one()
    assert message.startswith(
        "kubernetes:helm.sh/v3:Release 'dra-chart' values kubeletPlugin.affinity: affinity {} is empty."
    )
    values["kubeletPlugin"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
                ]
            }
        }
    }
    chart = harness.helm_release("dra-chart", DRA_CHART, "0.5.0", values)
    message = harness.resource(GPU_DISCOVERY_AFFINITY_KEPT, chart.resource_type, chart.props, name=chart.name).one()
    assert (
        'required nodeAffinity term 0 {"matchExpressions":[{"key":"kubernetes.io/os","operator":"In",'
        '"values":["linux"]}]} has none of the GPU-discovery labels'
    ) in message


def test_values_map_without_terms_is_merged_by_helm(harness: Harness) -> None:
    values = harness.values("device-plugin-values.yaml")
    values["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    chart = harness.helm_release("plugin-chart", DP_CHART, "0.20.0", values)
    harness.passes(harness.resource(GPU_DISCOVERY_AFFINITY_KEPT, chart.resource_type, chart.props))


def test_rendered_daemonset_without_affinity(harness: Harness) -> None:
    doc = kubelet_plugin(harness)
    del doc["spec"]["template"]["spec"]["affinity"]
    message = harness.manifest_check(GPU_DISCOVERY_AFFINITY_KEPT, doc).one()
    assert message.startswith(
        "kubernetes:apps/v1:DaemonSet 'gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin': the pod template has "
        "no affinity, so the chart's GPU-discovery affinity was removed."
    )
    assert "remove the override from eks-hybrid-gpu:cohorts[1] chart values" in message


def test_affinity_config_labels(harness: Harness) -> None:
    doc = plugin_daemonset(harness)
    config = {"discoveryLabels": ["nvidia.com/gpu.present"]}
    message = harness.manifest_check(GPU_DISCOVERY_AFFINITY_KEPT, doc, config).one()
    assert "required nodeAffinity term 0" in message


def test_affinity_not_applicable_and_unknown(harness: Harness) -> None:
    job = smoke_job(harness)
    assert harness.not_applicable(harness.manifest_check(GPU_DISCOVERY_AFFINITY_KEPT, job)) == (
        "not a device-plugin/DRA Chart or DaemonSet"
    )
    doc = plugin_daemonset(harness)
    doc["spec"]["template"]["spec"]["affinity"] = UNKNOWN_OBJECT
    harness.passes(harness.manifest_check(GPU_DISCOVERY_AFFINITY_KEPT, doc))
    chart = harness.helm_release("plugin-chart", DP_CHART, "0.20.0", {"affinity": UNKNOWN_OBJECT})
    harness.passes(harness.resource(GPU_DISCOVERY_AFFINITY_KEPT, chart.resource_type, chart.props))


# --------------------------------------------------------------------------- what the analyzer really gets


def test_chart_v4_with_empty_props_is_not_applicable(harness: Harness) -> None:
    charts = [r for r in real_records("local", "resource") if r["type"] == harness.chart]
    assert [c["props"] for c in charts] == [{}, {}]
    for record in charts:
        for policy in (NO_AUTO_MODE_TARGETING, GPU_DISCOVERY_AFFINITY_KEPT):
            outcome = harness.real_resource(policy, record)
            assert harness.not_applicable(outcome).startswith("Chart v4 inputs are not sent to policy analyzers")


def test_real_daemonsets_of_the_local_stack_pass(harness: Harness) -> None:
    records = [r for r in real_records("local", "resource") if r["type"] == "kubernetes:apps/v1:DaemonSet"]
    assert len(records) == 3
    for record in records:
        for policy in (NO_AUTO_MODE_TARGETING, GPU_DISCOVERY_AFFINITY_KEPT):
            outcome = harness.real_resource(policy, record)
            harness.passes(outcome)


def test_real_daemonsets_rendered_without_the_gpu_affinity(harness: Harness) -> None:
    """`affinity: null` in Chart v4 values: the analyzer only sees DaemonSets without affinity."""
    outcomes = {
        r["name"].split("/", 1)[1]: harness.real_resource(GPU_DISCOVERY_AFFINITY_KEPT, r)
        for r in rendered_by("plugin-variants", "gfd-chart", "resource")
        if r["type"] == "kubernetes:apps/v1:DaemonSet"
    }
    refused = sorted(name for name, outcome in outcomes.items() if outcome.violations)
    assert refused == [
        "hybrid-gpu-gfd-nvidia-device-plugin",
        "hybrid-gpu-gfd-nvidia-device-plugin-gpu-feature-discovery",
        "hybrid-gpu-gfd-nvidia-device-plugin-mps-control-daemon",
    ]
    assert harness.not_applicable(outcomes["hybrid-gpu-gfd-node-feature-discovery-worker"]) == (
        "the NFD worker runs on every node by design"
    )
    assert (
        outcomes["hybrid-gpu-gfd-nvidia-device-plugin"]
        .one()
        .startswith(
            "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-gfd-nvidia-device-plugin': the pod template has no "
            "affinity, so the chart's GPU-discovery affinity was removed."
        )
    )
    assert (
        "remove the override from eks-hybrid-gpu:cohorts[2] chart values"
        in outcomes["hybrid-gpu-gfd-nvidia-device-plugin"].one()
    )


def test_real_kubelet_plugin_with_a_foreign_affinity(harness: Harness) -> None:
    record = next(
        r
        for r in rendered_by("dra-variants", "root-chart", "resource")
        if r["name"].endswith("/dra-driver-nvidia-gpu-kubelet-plugin")
    )
    message = harness.real_resource(GPU_DISCOVERY_AFFINITY_KEPT, record).one()
    assert message.startswith(
        "kubernetes:apps/v1:DaemonSet 'dra-b/dra-driver-nvidia-gpu-kubelet-plugin': required nodeAffinity term 0 "
        '{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]} has none of the '
        "GPU-discovery labels."
    )
    harness.passes(harness.real_resource(NO_AUTO_MODE_TARGETING, record))


def test_real_nfd_workloads_are_no_allocators(harness: Harness) -> None:
    nfd = [r for r in rendered_by("plugin-variants", "gfd-chart", "resource") if "node-feature-discovery-" in r["name"]]
    workloads = [r for r in nfd if r["type"] in {"kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:Deployment"}]
    assert len(workloads) == 3
    for record in workloads:
        outcome = harness.real_resource(NO_AUTO_MODE_TARGETING, record)
        assert harness.not_applicable(outcome).startswith("Node Feature Discovery labels nodes")
