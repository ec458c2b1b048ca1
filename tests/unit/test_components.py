"""Components under fresh Pulumi mocks: the guide's values and manifests key by key, plus structure and switches.

The guide's seed documents are read from tests/fixtures/policy/ (tests/support/seeds.py), the same files the
policy tests feed the pack, and compared with what the program registers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.config import ChartPin, CohortConfig, OperatorConfig
from components.device_plugin import DevicePlugin
from components.gpu_operator import GpuOperator
from components.node_guard import allocator_expression, allocator_refusal_message
from components.runtime_class import NvidiaRuntimeClass
from components.stamping import Ownership, stamp
from eks_hybrid_gpu.mocks import ROOT, Registration, exported_outputs
from payloads import probe_script_path
from policy.gpu_allocation.vocab.labels import APPROVED_ANNOTATION
from tests.support import charts, seeds
from tests.support.configs import (
    DIGEST_IMAGE,
    DRA_COHORT,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    Construct,
    Recorder,
    RunProgram,
    _base_config,
    cohort,
    selector_for,
)

pytestmark = pytest.mark.unit

PLACEHOLDER_IMAGE = "registry.example.invalid/approved/gpu-smoke@sha256:" + "0" * 64
PROVIDER = "urn:pulumi:test::eks-hybrid-gpu::pulumi:pulumi:Stack$pulumi:providers:kubernetes::cluster::cluster-id"
CHART = "kubernetes:helm.sh/v4:Chart"
RELEASE = "kubernetes:helm.sh/v3:Release"
JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RUNTIME_CLASS = "kubernetes:node.k8s.io/v1:RuntimeClass"
DEVICE_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass"
CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"


def _both_cohorts(**overrides: Any) -> dict[str, Any]:
    """The guide's layout: a device-plugin cohort and a DRA cohort on disjoint labels, RuntimeClass created."""
    config = _base_config(cohorts=[PLUGIN_COHORT, DRA_COHORT], runtimeClass={"hostsHaveNvidiaHandler": True})
    config.update(overrides)
    return config


def _operator(mode: str, **operator: Any) -> dict[str, Any]:
    return _base_config(cohorts=[OPERATOR_COHORT], operator={"mode": mode, **operator})


def _values(recorder: Recorder, name: str) -> dict[str, Any]:
    values: dict[str, Any] = recorder.named(name).inputs["values"]
    return values


def _pod(job: Registration) -> dict[str, Any]:
    pod: dict[str, Any] = job.inputs["spec"]["template"]["spec"]
    return pod


def _container(job: Registration) -> dict[str, Any]:
    container: dict[str, Any] = _pod(job)["containers"][0]
    return container


def _assert_key_by_key(registered: dict[str, Any], seed: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    """Every seed key has the guide's value, and the registered mapping has no key the guide lacks."""
    for key, value in seed.items():
        if key in skip:
            continue
        assert key in registered, f"missing {key}"
        assert registered[key] == value, f"{key}: {registered[key]!r} != {value!r}"
    assert set(registered) == set(seed), f"extra keys {set(registered) - set(seed)}"


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


# ---------------------------------------------------------------- seed values, key by key


def test_device_plugin_chart_values_are_the_seed_values(run: RunProgram) -> None:
    recorder = run(_both_cohorts())
    values = _values(recorder, "gpu-plugin-chart")

    _assert_key_by_key(values, seeds.document(seeds.DEVICE_PLUGIN_VALUES))
    assert "affinity" not in values  # the chart's GPU-discovery affinity is kept, ANDed with nodeSelector
    assert values["failOnInitError"] is True  # the chart tests typeIs bool
    assert values["migStrategy"] == "none"


def test_dra_chart_values_are_the_seed_values(run: RunProgram) -> None:
    recorder = run(_both_cohorts())
    values = _values(recorder, "gpu-dra-chart")

    _assert_key_by_key(values, seeds.document(seeds.DRA_VALUES))
    assert values["kubeletPlugin"]["containers"]["gpus"]["resources"]["limits"]["cpu"] == "1"
    assert values["featureGates"] == {}
    assert values["webhook"] == {"enabled": False}
    assert values["resources"]["computeDomains"] == {"enabled": False}


def test_dra_feature_gates_are_passed_only_when_configured(run: RunProgram) -> None:
    recorder = run(_both_cohorts(dra={"featureGates": {"MPSSupport": False, "DynamicMIG": True}}))

    assert _values(recorder, "gpu-dra-chart")["featureGates"] == {"MPSSupport": False, "DynamicMIG": True}


OPERAND_TOLERATIONS = {
    "tolerations": [
        {
            "key": "workload.example.com/gpu-allocation",
            "operator": "Equal",
            "value": "gpu-operator",
            "effect": "NoSchedule",
        }
    ]
}
"""`daemonsets`: the Operator cohort's taint only, replacing the chart's nvidia.com/gpu toleration, so that nodes
tainted nvidia.com/gpu (EKS Auto Mode GPU NodePools) repel every operand (components.gpu_operator's docstring)."""


def test_gpu_cluster_release_values_are_the_seed_fragment_and_the_operand_boundary(run: RunProgram) -> None:
    recorder = run(_operator("gpu-cluster"))
    values = dict(recorder.named("gpu-operator-release").inputs["values"])

    # The seed's fragment, key by key, plus one deliberate key beyond it: the operands' tolerations.
    assert values.pop("daemonsets") == OPERAND_TOLERATIONS
    _assert_key_by_key(values, seeds.document(seeds.GPU_CLUSTER_VALUES))


def test_operand_tolerations_follow_the_cohort_label(run: RunProgram) -> None:
    config = _operator("cluster-policy")
    config["cohortLabelKey"] = "example.org/gpu-owner"

    tolerations = _values(run(config), "gpu-operator-release")["daemonsets"]["tolerations"]

    assert tolerations == [{**OPERAND_TOLERATIONS["tolerations"][0], "key": "example.org/gpu-owner"}]


def test_cluster_policy_release_values(run: RunProgram) -> None:
    recorder = run(_operator("cluster-policy"))

    assert _values(recorder, "gpu-operator-release") == {
        "clusterPolicy": {"deployCR": True},
        "gpuCluster": {"deployCR": False},
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "nfd": {"enabled": False},
        "devicePlugin": {"enabled": True},
        "migManager": {"enabled": False},
        "mig": {"strategy": "none"},
        "daemonsets": OPERAND_TOLERATIONS,
    }


def test_cluster_policy_release_values_follow_the_operator_config(run: RunProgram) -> None:
    config = _operator(
        "cluster-policy",
        driverEnabled=True,
        toolkitEnabled=True,
        nfdEnabled=True,
        migManagerEnabled=True,
        devicePluginEnabled=False,
    )
    config["cohorts"] = [
        cohort(OPERATOR_COHORT, sharing={"mode": "mig", "migStrategy": "mixed", "migProfile": "1g.10gb"})
    ]

    recorder = run(config)

    assert _values(recorder, "gpu-operator-release") == {
        "clusterPolicy": {"deployCR": True},
        "gpuCluster": {"deployCR": False},
        "driver": {"enabled": True},
        "toolkit": {"enabled": True},
        "nfd": {"enabled": True},
        "devicePlugin": {"enabled": False},
        "migManager": {"enabled": True},
        "mig": {"strategy": "mixed"},
        "daemonsets": OPERAND_TOLERATIONS,
    }
    assert _container(recorder.named("gpu-operator-smoke-job"))["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == 1


def test_device_classes_and_claim_template_are_the_seed_manifests(run: RunProgram) -> None:
    recorder = run(_both_cohorts())
    full, large, template = seeds.documents(seeds.DRA_OBJECTS)

    for seed, name in [(full, "gpu-dra-objects-hybrid-full-gpu"), (large, "gpu-dra-objects-hybrid-large-gpu")]:
        registered = recorder.named(name)
        assert registered.type_ == DEVICE_CLASS
        assert registered.inputs["apiVersion"] == seed["apiVersion"] == "resource.k8s.io/v1"
        assert registered.inputs["kind"] == "DeviceClass"
        assert registered.inputs["metadata"]["name"] == seed["metadata"]["name"]
        assert registered.inputs["spec"] == seed["spec"]
        assert "suitableNodes" not in registered.inputs["spec"]
    assert recorder.named("gpu-dra-objects-hybrid-full-gpu").inputs["spec"]["selectors"][0]["cel"]["expression"] == (
        'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'
    )
    assert recorder.named("gpu-dra-objects-hybrid-large-gpu").inputs["spec"]["selectors"][0]["cel"]["expression"] == (
        'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu" && '
        'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))'
    )

    claim = recorder.named("gpu-dra-objects-single-large-gpu")
    assert claim.type_ == CLAIM_TEMPLATE
    assert claim.inputs["apiVersion"] == template["apiVersion"]
    assert claim.inputs["kind"] == "ResourceClaimTemplate"
    assert claim.inputs["metadata"]["name"] == "single-large-gpu"
    assert claim.inputs["metadata"]["namespace"] == template["metadata"]["namespace"] == "ai-workloads"
    assert claim.inputs["spec"] == template["spec"]
    assert claim.inputs["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    for registered in (recorder.named("gpu-dra-objects-hybrid-full-gpu"), claim):
        assert registered.inputs["metadata"]["labels"] == {"eks-hybrid-gpu.io/component": "dra-objects"}


def test_large_gpu_class_follows_the_memory_floor_and_extra_selector(run: RunProgram) -> None:
    extra = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200"'
    recorder = run(_both_cohorts(dra={"largeGpuMemory": "80Gi", "extraSelector": extra}))

    assert recorder.named("gpu-dra-objects-hybrid-large-gpu").inputs["spec"]["selectors"] == [
        {
            "cel": {
                "expression": 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == '
                '"gpu" && device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80Gi")) && '
                f"({extra})"
            }
        }
    ]


@pytest.mark.parametrize(("seed_index", "name"), [(0, "gpu-plugin-smoke-job"), (1, "gpu-dra-smoke-job")])
def test_smoke_jobs_are_the_seed_jobs(run: RunProgram, seed_index: int, name: str) -> None:
    recorder = run(_both_cohorts())
    seed = seeds.documents(seeds.SMOKE_JOBS)[seed_index]
    job = recorder.named(name)

    assert job.type_ == JOB
    assert job.inputs["apiVersion"] == seed["apiVersion"]
    assert job.inputs["kind"] == seed["kind"]
    assert job.inputs["metadata"]["name"] == seed["metadata"]["name"]
    assert job.inputs["metadata"]["namespace"] == seed["metadata"]["namespace"]
    _assert_key_by_key(job.inputs["spec"], seed["spec"], skip=("template",))
    assert set(job.inputs["spec"]["template"]) == {"spec"}
    seed_pod = seed["spec"]["template"]["spec"]
    _assert_key_by_key(_pod(job), seed_pod, skip=("containers",))
    assert len(_pod(job)["containers"]) == 1
    _assert_key_by_key(_container(job), seed_pod["containers"][0], skip=("image",))
    # The image differs on purpose: a deliberately unusable placeholder, pinned by digest.
    seed_image = seed_pod["containers"][0]["image"]
    assert _container(job)["image"] == PLACEHOLDER_IMAGE
    assert _container(job)["image"].split("@")[0] == seed_image.split(":")[0]


def test_smoke_job_fields_one_by_one(run: RunProgram) -> None:
    recorder = run(_both_cohorts())
    plugin, dra = recorder.named("gpu-plugin-smoke-job"), recorder.named("gpu-dra-smoke-job")

    for job in (plugin, dra):
        spec = job.inputs["spec"]
        assert spec["suspend"] is True
        assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 0)
        assert (spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (120, 600)
        pod = _pod(job)
        assert pod["restartPolicy"] == "Never"
        assert pod["automountServiceAccountToken"] is False
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert _container(job)["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        assert _container(job)["command"] == ["nvidia-smi", "-L"]

    assert _pod(plugin)["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in _pod(dra)
    assert _pod(plugin)["nodeSelector"] == selector_for("device-plugin")
    assert _pod(dra)["nodeSelector"] == selector_for("dra")
    assert _container(plugin)["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": 1},
        "limits": {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": 1},
    }
    assert "resourceClaims" not in _pod(plugin)
    assert _container(dra)["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
        "claims": [{"name": "gpu-resource"}],
    }
    assert _pod(dra)["resourceClaims"] == [{"name": "gpu-resource", "resourceClaimTemplateName": "single-large-gpu"}]


def test_smoke_job_limits_follow_the_smoke_config(run: RunProgram) -> None:
    recorder = run(
        _base_config(smokeJobs={"activeDeadlineSeconds": 300, "ttlSecondsAfterFinished": 3600, "runAsUser": 1000})
    )
    job = recorder.named("gpu-plugin-smoke-job")

    assert job.inputs["spec"]["activeDeadlineSeconds"] == 300
    assert job.inputs["spec"]["ttlSecondsAfterFinished"] == 3600
    assert _pod(job)["securityContext"]["runAsUser"] == 1000


def test_smoke_job_labels_and_annotations(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    plugin, dra = recorder.named("gpu-plugin-smoke-job"), recorder.named("gpu-dra-smoke-job")
    assert plugin.inputs["metadata"]["labels"] == {
        "eks-hybrid-gpu.io/owner": "device-plugin",
        "eks-hybrid-gpu.io/cohort": "plugin",
        "eks-hybrid-gpu.io/smoke-job": "true",
    }
    assert plugin.inputs["metadata"]["annotations"] == {
        "eks-hybrid-gpu.io/node-selector": '{"eks.amazonaws.com/compute-type":"hybrid",'
        '"workload.example.com/gpu-allocation":"device-plugin"}',
        "eks-hybrid-gpu.io/sharing": "none",
        "eks-hybrid-gpu.io/config-path": "eks-hybrid-gpu:cohorts[0]",
        "eks-hybrid-gpu.io/approved-to-run": "false",
        "pulumi.com/skipAwait": "true",
        "pulumi.com/deletionPropagationPolicy": "background",  # a replacement never meets the old Job
    }
    assert dra.inputs["metadata"]["labels"] == {
        "eks-hybrid-gpu.io/owner": "dra",
        "eks-hybrid-gpu.io/cohort": "dra",
        "eks-hybrid-gpu.io/smoke-job": "true",
    }
    assert dra.inputs["metadata"]["annotations"]["eks-hybrid-gpu.io/config-path"] == "eks-hybrid-gpu:cohorts[1]"
    assert dra.inputs["metadata"]["annotations"]["eks-hybrid-gpu.io/node-selector"] == (
        '{"eks.amazonaws.com/compute-type":"hybrid","workload.example.com/gpu-allocation":"dra"}'
    )


# ---------------------------------------------------------------- charts: versions and sources


def test_upstream_chart_sources_and_versions(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    plugin, dra = recorder.named("gpu-plugin-chart"), recorder.named("gpu-dra-chart")
    assert plugin.type_ == dra.type_ == CHART
    assert plugin.inputs["chart"] == "nvidia-device-plugin"
    assert plugin.inputs["version"] == "0.20.0"
    assert plugin.inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert (plugin.inputs["name"], plugin.inputs["namespace"]) == ("hybrid-gpu-plugin", "gpu-system")
    assert dra.inputs["chart"] == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    assert dra.inputs["version"] == "0.5.0"
    assert "repositoryOpts" not in dra.inputs
    assert (dra.inputs["name"], dra.inputs["namespace"]) == ("hybrid-gpu-dra", "gpu-dra-system")
    for chart in (plugin, dra):
        assert chart.inputs["skipAwait"] is False
        assert "plainHttp" not in chart.inputs


def test_operator_release_source_and_version(run: RunProgram) -> None:
    recorder = run(_operator("cluster-policy"))
    release = recorder.named("gpu-operator-release")

    assert release.type_ == RELEASE
    assert release.inputs["chart"] == "gpu-operator"
    assert release.inputs["version"] == "v26.7.0"
    assert release.inputs["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    assert (release.inputs["name"], release.inputs["namespace"]) == ("gpu-operator", "gpu-operator")


@pytest.mark.charts
def test_archive_override_resolves_to_an_absolute_path_without_version(run: RunProgram) -> None:
    plugin, dra = charts.device_plugin(), charts.dra_driver()
    config = _both_cohorts(
        charts={
            "devicePlugin": {"version": "0.20.0", "source": {"archive": os.path.relpath(plugin, ROOT)}},
            "draDriver": {"version": "0.4.1", "source": {"archive": os.path.relpath(dra, ROOT)}},
        }
    )

    recorder = run(config)

    for name, archive, version in [("gpu-plugin-chart", plugin, "0.20.0"), ("gpu-dra-chart", dra, "0.4.1")]:
        chart = recorder.named(name).inputs
        assert chart["chart"] == str(archive)
        assert Path(chart["chart"]).is_absolute()
        assert ".." not in Path(chart["chart"]).parts
        assert chart["version"] == version
        assert "repositoryOpts" not in chart


@pytest.mark.charts
def test_operator_archive_override(run: RunProgram) -> None:
    operator = charts.gpu_operator()
    config = _operator("gpu-cluster")
    config["charts"] = {"gpuOperator": {"version": "v26.7.0", "source": {"archive": os.path.relpath(operator, ROOT)}}}

    release = run(config).named("gpu-operator-release").inputs

    assert release["chart"] == str(operator)
    assert release["version"] == "v26.7.0"
    assert "repositoryOpts" not in release


def test_oci_mirror_and_repo_overrides(run: RunProgram) -> None:
    config = _both_cohorts(
        charts={
            "devicePlugin": {"version": "0.20.0", "source": {"repo": "https://charts.example.com/nvidia"}},
            "draDriver": {
                "version": "0.5.0",
                "source": {"oci": "oci://mirror.example.com:5000/charts/dra-driver-nvidia-gpu", "plainHttp": True},
            },
        }
    )

    recorder = run(config)

    plugin, dra = recorder.named("gpu-plugin-chart").inputs, recorder.named("gpu-dra-chart").inputs
    assert (plugin["chart"], plugin["version"]) == ("nvidia-device-plugin", "0.20.0")
    assert plugin["repositoryOpts"] == {"repo": "https://charts.example.com/nvidia"}
    assert (dra["chart"], dra["version"]) == ("oci://mirror.example.com:5000/charts/dra-driver-nvidia-gpu", "0.5.0")
    assert dra["plainHttp"] is True


def test_skip_await_reaches_every_chart(run: RunProgram) -> None:
    recorder = run(
        _both_cohorts(cluster={"source": "local", "kubernetesVersion": "1.34.4", "skipAwait": True, "preflight": False})
    )

    assert [r.inputs["skipAwait"] for r in recorder.of_type(CHART)] == [True, True]


# ---------------------------------------------------------------- namespaces, parents, providers, types


def test_namespaces_and_pod_security(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    def labels(enforce: str, role: str) -> dict[str, str]:
        return {
            "pod-security.kubernetes.io/enforce": enforce,
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
            "eks-hybrid-gpu.io/role": role,
        }

    found = {r.name: r.inputs["metadata"] for r in recorder.of_type("kubernetes:core/v1:Namespace")}
    assert found == {
        "gpu-namespaces-device-plugin": {"name": "gpu-system", "labels": labels("privileged", "device-plugin")},
        "gpu-namespaces-workloads": {"name": "ai-workloads", "labels": labels("restricted", "workloads")},
        "gpu-namespaces-dra": {"name": "gpu-dra-system", "labels": labels("privileged", "dra")},
    }
    assert exported_outputs()["namespaces"] == {
        "device-plugin": "gpu-system",
        "workloads": "ai-workloads",
        "dra": "gpu-dra-system",
    }


def test_operator_namespace_is_privileged(run: RunProgram) -> None:
    recorder = run(_operator("cluster-policy"))

    ns = recorder.named("gpu-namespaces-gpu-operator").inputs["metadata"]
    assert ns["name"] == "gpu-operator"
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_custom_namespaces_are_used_everywhere(run: RunProgram) -> None:
    recorder = run(_both_cohorts(namespaces={"devicePlugin": "nvdp", "draDriver": "nvdra", "workloads": "ml"}))

    assert recorder.named("gpu-plugin-chart").inputs["namespace"] == "nvdp"
    assert recorder.named("gpu-dra-chart").inputs["namespace"] == "nvdra"
    assert recorder.named("gpu-ledger-configmap").inputs["metadata"]["namespace"] == "nvdp"
    assert recorder.named("gpu-dra-objects-single-large-gpu").inputs["metadata"]["namespace"] == "ml"
    assert {j.inputs["metadata"]["namespace"] for j in recorder.jobs()} == {"ml"}


def test_every_child_is_parented_to_its_component(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    assert {r.name: r.parent for r in recorder.registrations} == {
        "cluster": "eks-hybrid-gpu-test",
        "gpu": "eks-hybrid-gpu-test",
        "gpu-namespaces": "gpu",
        "gpu-runtime-class": "gpu",
        "gpu-cohort-label-guard": "gpu",
        "gpu-ledger": "gpu",
        "gpu-dra-objects": "gpu",
        "gpu-plugin": "gpu",
        "gpu-dra": "gpu",
        "gpu-plugin-smoke": "gpu",
        "gpu-dra-smoke": "gpu",
        "gpu-namespaces-device-plugin": "gpu-namespaces",
        "gpu-namespaces-workloads": "gpu-namespaces",
        "gpu-namespaces-dra": "gpu-namespaces",
        "gpu-runtime-class-class": "gpu-runtime-class",
        "gpu-cohort-label-guard-policy": "gpu-cohort-label-guard",
        "gpu-cohort-label-guard-binding": "gpu-cohort-label-guard",
        "gpu-ledger-configmap": "gpu-ledger",
        "gpu-dra-objects-hybrid-full-gpu": "gpu-dra-objects",
        "gpu-dra-objects-hybrid-large-gpu": "gpu-dra-objects",
        "gpu-dra-objects-single-large-gpu": "gpu-dra-objects",
        "gpu-plugin-chart": "gpu-plugin",
        "gpu-dra-chart": "gpu-dra",
        "gpu-plugin-smoke-job": "gpu-plugin-smoke",
        "gpu-dra-smoke-job": "gpu-dra-smoke",
    }


def test_provider_is_set_on_every_kubernetes_resource(run: RunProgram) -> None:
    recorder = run(_both_cohorts(smokeJobs={"probe": True}))
    operator = run(_operator("cluster-policy"))

    for registration in [*recorder.custom(), *operator.custom()]:
        assert registration.provider == PROVIDER, registration.name
    assert len(recorder.custom()) == 15
    assert recorder.named("cluster").type_ == "pulumi:providers:kubernetes"


def test_type_tokens(run: RunProgram) -> None:
    recorder = run(_both_cohorts())
    operator = run(_operator("cluster-policy"))

    assert {r.name: r.type_ for r in recorder.registrations if not r.type_.startswith("kubernetes:")} == {
        "cluster": "pulumi:providers:kubernetes",
        "gpu": "eks-hybrid-gpu:index:HybridGpuCluster",
        "gpu-namespaces": "eks-hybrid-gpu:cluster:GpuNamespaces",
        "gpu-runtime-class": "eks-hybrid-gpu:cluster:NvidiaRuntimeClass",
        "gpu-cohort-label-guard": "eks-hybrid-gpu:cluster:CohortLabelGuard",
        "gpu-ledger": "eks-hybrid-gpu:cluster:OwnershipLedger",
        "gpu-dra-objects": "eks-hybrid-gpu:dra:DraObjects",
        "gpu-plugin": "eks-hybrid-gpu:owners:DevicePlugin",
        "gpu-dra": "eks-hybrid-gpu:owners:DraDriver",
        "gpu-plugin-smoke": "eks-hybrid-gpu:smoke:SmokeJob",
        "gpu-dra-smoke": "eks-hybrid-gpu:smoke:SmokeJob",
    }
    assert operator.named("gpu-operator").type_ == "eks-hybrid-gpu:owners:GpuOperator"


def test_the_cohort_label_guard_refuses_relabelling_a_schedulable_node(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    policy = recorder.named("gpu-cohort-label-guard-policy")
    assert policy.type_ == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
    spec = policy.inputs["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule == {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["UPDATE"],
        "resources": ["nodes", "nodes/status"],
    }
    validation, allocator = spec["validations"]
    assert '"workload.example.com/gpu-allocation" in oldObject.metadata.labels' in validation["expression"]
    assert "eks-hybrid-gpu move-host NODE --to COHORT" in validation["message"]
    assert allocator == {
        "expression": allocator_expression(),
        "message": allocator_refusal_message(),
        "reason": "Forbidden",
    }
    assert '"eks-hybrid-gpu.io/allocator" in oldObject.metadata.labels' in allocator["expression"]
    binding = recorder.named("gpu-cohort-label-guard-binding")
    assert binding.inputs["spec"] == {"policyName": "eks-hybrid-gpu-cohort-label-guard", "validationActions": ["Deny"]}


def test_the_cohort_label_guard_can_be_switched_off(run: RunProgram) -> None:
    recorder = run(_both_cohorts(cohortLabelGuard=False))

    assert not [r for r in recorder.registrations if "cohort-label-guard" in r.name]


# ---------------------------------------------------------------- sharing


@pytest.mark.parametrize("replicas", [4, 8])
def test_time_slicing_config_is_the_seed_fragment(run: RunProgram, replicas: int) -> None:
    config = _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing={"mode": "time-slicing", "replicas": replicas})])

    recorder = run(config)

    values = _values(recorder, "gpu-plugin-chart")
    expected = seeds.time_slicing()
    expected["sharing"]["timeSlicing"]["resources"][0]["replicas"] = replicas
    assert set(values["config"]) == {"map", "default"}
    assert values["config"]["default"] == "time-slicing"
    assert list(values["config"]["map"]) == ["time-slicing"]
    assert yaml.safe_load(values["config"]["map"]["time-slicing"]) == expected
    _assert_key_by_key({k: v for k, v in values.items() if k != "config"}, seeds.document(seeds.DEVICE_PLUGIN_VALUES))

    job = recorder.named("gpu-plugin-smoke-job")
    assert _container(job)["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu.shared": 1}
    assert _container(job)["resources"]["limits"] == {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu.shared": 1}
    assert job.inputs["metadata"]["annotations"]["eks-hybrid-gpu.io/sharing"] == "time-slicing"


def test_time_slicing_without_rename_keeps_nvidia_com_gpu(run: RunProgram) -> None:
    sharing = {"mode": "time-slicing", "replicas": 2, "renameByDefault": False, "failRequestsGreaterThanOne": False}

    recorder = run(_base_config(cohorts=[cohort(PLUGIN_COHORT, sharing=sharing)]))

    document = yaml.safe_load(_values(recorder, "gpu-plugin-chart")["config"]["map"]["time-slicing"])
    assert document["sharing"]["timeSlicing"] == {
        "renameByDefault": False,
        "failRequestsGreaterThanOne": False,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 2}],
    }
    assert _container(recorder.named("gpu-plugin-smoke-job"))["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_mig_mixed(run: RunProgram) -> None:
    sharing = {"mode": "mig", "migStrategy": "mixed", "gpuModel": "A100-40GB", "migProfile": "1g.5gb"}

    recorder = run(_base_config(cohorts=[cohort(PLUGIN_COHORT, sharing=sharing)]))

    values = _values(recorder, "gpu-plugin-chart")
    assert values["migStrategy"] == "mixed"
    assert "config" not in values
    resources = _container(recorder.named("gpu-plugin-smoke-job"))["resources"]
    assert resources["requests"] == {"cpu": "100m", "memory": "128Mi", "nvidia.com/mig-1g.5gb": 1}
    assert resources["limits"] == {"cpu": "500m", "memory": "256Mi", "nvidia.com/mig-1g.5gb": 1}
    annotations = recorder.named("gpu-plugin-smoke-job").inputs["metadata"]["annotations"]
    assert annotations["eks-hybrid-gpu.io/sharing"] == "mig-mixed"


def test_mig_single_requests_nvidia_com_gpu(run: RunProgram) -> None:
    recorder = run(_base_config(cohorts=[cohort(PLUGIN_COHORT, sharing={"mode": "mig", "migStrategy": "single"})]))

    assert _values(recorder, "gpu-plugin-chart")["migStrategy"] == "single"
    resources = _container(recorder.named("gpu-plugin-smoke-job"))["resources"]
    assert resources["limits"] == {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": 1}


# ---------------------------------------------------------------- runtime class


def test_runtime_class_is_created_when_hosts_have_the_handler(run: RunProgram) -> None:
    recorder = run(_base_config(runtimeClass={"hostsHaveNvidiaHandler": True}))

    created = recorder.named("gpu-runtime-class-class")
    assert created.type_ == RUNTIME_CLASS
    assert created.inputs == {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"},
        "handler": "nvidia",
    }
    assert created.parent == "gpu-runtime-class"
    assert recorder.reads == {}


def test_runtime_class_is_read_when_hosts_do_not_declare_the_handler(run: RunProgram) -> None:
    recorder = run(_base_config(runtimeClass={"hostsHaveNvidiaHandler": False}))

    read = recorder.named("gpu-runtime-class-existing")
    assert read.type_ == RUNTIME_CLASS
    assert recorder.reads == {"gpu-runtime-class-existing": "nvidia"}
    assert read.parent == "gpu-runtime-class"
    assert read.provider == PROVIDER
    assert [r.name for r in recorder.of_type(RUNTIME_CLASS)] == ["gpu-runtime-class-existing"]


def test_custom_runtime_class_name(run: RunProgram) -> None:
    recorder = run(_base_config(runtimeClass={"name": "nvidia-cdi", "hostsHaveNvidiaHandler": False}))

    assert recorder.reads == {"gpu-runtime-class-existing": "nvidia-cdi"}
    assert _values(recorder, "gpu-plugin-chart")["runtimeClassName"] == "nvidia-cdi"
    assert _pod(recorder.named("gpu-plugin-smoke-job"))["runtimeClassName"] == "nvidia-cdi"


@pytest.mark.parametrize(
    ("config", "registers_class", "job_runtime_class"),
    [
        (_operator("cluster-policy"), True, "nvidia"),
        # With its toolkit on, the Operator creates the nvidia class and handler itself.
        (_operator("cluster-policy", toolkitEnabled=True), False, "nvidia"),
        (_operator("gpu-cluster"), False, None),
        (_base_config(cohorts=[DRA_COHORT]), False, None),
    ],
    ids=["cluster-policy", "cluster-policy-with-toolkit", "gpu-cluster", "dra-only"],
)
def test_runtime_class_only_where_the_stack_must_provide_it(
    run: RunProgram, config: dict[str, Any], registers_class: bool, job_runtime_class: str | None
) -> None:
    recorder = run(config)

    assert bool(recorder.of_type(RUNTIME_CLASS)) is registers_class
    assert _pod(recorder.jobs()[0]).get("runtimeClassName") == job_runtime_class


def test_runtime_class_component_constructed_directly(construct: Construct) -> None:
    def build() -> None:
        NvidiaRuntimeClass("rc", class_name="nvidia", hosts_have_handler=True)
        NvidiaRuntimeClass("existing", class_name="nvidia", hosts_have_handler=False)

    recorder = construct(build)

    assert sorted((r.type_, r.name, r.parent) for r in recorder.registrations) == [
        ("eks-hybrid-gpu:cluster:NvidiaRuntimeClass", "existing", "eks-hybrid-gpu-test"),
        ("eks-hybrid-gpu:cluster:NvidiaRuntimeClass", "rc", "eks-hybrid-gpu-test"),
        (RUNTIME_CLASS, "existing-existing", "existing"),
        (RUNTIME_CLASS, "rc-class", "rc"),
    ]
    assert recorder.reads == {"existing-existing": "nvidia"}
    assert recorder.named("rc-class").inputs["handler"] == "nvidia"


# ---------------------------------------------------------------- approval, ledger, probe


def test_approved_cohort_unsuspends_only_its_job(run: RunProgram) -> None:
    recorder = run(_both_cohorts(smokeJobs={"approvedCohort": "dra", "image": DIGEST_IMAGE}))

    plugin, dra = recorder.named("gpu-plugin-smoke-job"), recorder.named("gpu-dra-smoke-job")
    assert dra.inputs["spec"]["suspend"] is False
    assert dra.inputs["metadata"]["annotations"][APPROVED_ANNOTATION] == "true"
    assert APPROVED_ANNOTATION == "eks-hybrid-gpu.io/approved-to-run"
    assert plugin.inputs["spec"]["suspend"] is True
    assert plugin.inputs["metadata"]["annotations"][APPROVED_ANNOTATION] == "false"
    assert {_container(j)["image"] for j in (plugin, dra)} == {DIGEST_IMAGE}
    assert exported_outputs()["smokeJobs"] == {"plugin": "hybrid-gpu-plugin-smoke", "dra": "hybrid-gpu-dra-smoke"}


def test_without_approval_every_job_stays_suspended(run: RunProgram) -> None:
    recorder = run(_both_cohorts(smokeJobs={"image": DIGEST_IMAGE}))

    assert [j.inputs["spec"]["suspend"] for j in recorder.jobs()] == [True, True]
    assert {j.inputs["metadata"]["annotations"][APPROVED_ANNOTATION] for j in recorder.jobs()} == {"false"}


def test_ledger_holds_the_ownership_map(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    ledger = recorder.named("gpu-ledger-configmap")
    assert ledger.type_ == CONFIG_MAP
    assert ledger.inputs["metadata"] == {
        "name": "gpu-allocation-ledger",
        "namespace": "gpu-system",
        "labels": {"eks-hybrid-gpu.io/ledger": "true"},
    }
    assert list(ledger.inputs["data"]) == ["ownership.json"]
    expected = {
        "cohorts": {
            "plugin": {
                "owner": "device-plugin",
                "nodeSelector": selector_for("device-plugin"),
                "sharing": "none",
                "namespace": "gpu-system",
                "hostDriverVerified": True,
            },
            "dra": {
                "owner": "dra",
                "nodeSelector": selector_for("dra"),
                "sharing": "none",
                "namespace": "gpu-dra-system",
                "hostDriverVerified": True,
            },
        },
        "operatorMode": None,
    }
    assert json.loads(ledger.inputs["data"]["ownership.json"]) == expected
    assert exported_outputs()["ownership"] == expected
    assert exported_outputs()["releases"] == {"plugin": "hybrid-gpu-plugin", "dra": "hybrid-gpu-dra"}


def test_ledger_records_the_operator_mode(run: RunProgram) -> None:
    recorder = run(_operator("gpu-cluster"))

    ledger = json.loads(recorder.named("gpu-ledger-configmap").inputs["data"]["ownership.json"])
    assert ledger == {
        "cohorts": {
            "operator": {
                "owner": "gpu-operator",
                "nodeSelector": selector_for("gpu-operator"),
                "sharing": "none",
                "namespace": "gpu-operator",
                "hostDriverVerified": True,
            }
        },
        "operatorMode": "gpu-cluster",
    }


def test_probe_mode(run: RunProgram) -> None:
    recorder = run(_both_cohorts(smokeJobs={"probe": True}))

    probe = recorder.named("gpu-cuda-probe")
    assert probe.type_ == CONFIG_MAP
    assert probe.parent == "gpu"
    assert probe.inputs["metadata"] == {
        "name": "hybrid-gpu-cuda-probe",
        "namespace": "ai-workloads",
        "labels": {"eks-hybrid-gpu.io/component": "cuda-probe"},
    }
    assert probe.inputs["data"] == {"cuda_probe.py": probe_script_path().read_text()}

    seed_jobs = seeds.documents(seeds.SMOKE_JOBS)
    for job, seed in zip(
        [recorder.named("gpu-plugin-smoke-job"), recorder.named("gpu-dra-smoke-job")], seed_jobs, strict=True
    ):
        container, pod = _container(job), _pod(job)
        assert container["command"] == ["python3", "/opt/gpu-probe/cuda_probe.py", "--budget-seconds", "20"]
        assert container["volumeMounts"] == [{"name": "gpu-probe", "mountPath": "/opt/gpu-probe", "readOnly": True}]
        assert pod["volumes"] == [
            {"name": "gpu-probe", "configMap": {"name": "hybrid-gpu-cuda-probe", "defaultMode": 0o444}}
        ]
        assert job.inputs["spec"]["suspend"] is True
        # Every hardening setting of the guide's Job is kept.
        seed_pod = seed["spec"]["template"]["spec"]
        _assert_key_by_key({k: v for k, v in pod.items() if k != "volumes"}, seed_pod, skip=("containers",))
        _assert_key_by_key(
            {k: v for k, v in container.items() if k != "volumeMounts"},
            seed_pod["containers"][0],
            skip=("image", "command"),
        )
        _assert_key_by_key(job.inputs["spec"], seed["spec"], skip=("template",))


def test_no_probe_config_map_by_default(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    assert [r.name for r in recorder.of_type(CONFIG_MAP)] == ["gpu-ledger-configmap"]
    assert all("volumes" not in _pod(j) for j in recorder.jobs())


# ---------------------------------------------------------------- what the guide forbids, across layouts

LAYOUTS = {
    "both": _both_cohorts(),
    "probe": _both_cohorts(smokeJobs={"probe": True}),
    "time-slicing": _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing={"mode": "time-slicing", "replicas": 4})]),
    "cluster-policy": _operator("cluster-policy"),
    "gpu-cluster": _operator("gpu-cluster"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_nothing_the_seed_forbids(run: RunProgram, layout: str) -> None:
    recorder = run(LAYOUTS[layout])

    for job in recorder.jobs():
        resources = _container(job)["resources"]
        extended = [k for k in (*resources["requests"], *resources["limits"]) if k.startswith("nvidia.com/")]
        claims = resources.get("claims", [])
        assert bool(extended) != bool(claims), f"{job.name} must use exactly one allocation mechanism"
        assert bool(claims) == ("resourceClaims" in _pod(job))
    for registration in recorder.registrations:
        if registration.name == "gpu-cuda-probe":
            continue  # the probe's source only reports the variable the runtime set
        for item in _walk(registration.inputs):
            assert not (isinstance(item, str) and "CUDA_VISIBLE_DEVICES" in item), registration.name
    for job in recorder.jobs():
        assert "env" not in _container(job)
    for chart in recorder.of_type(CHART):
        assert "affinity" not in chart.inputs["values"]
    for release in recorder.of_type(RELEASE):
        for flag in ("disableHooks", "disableCRDHooks", "skipCrds", "disableWebhooks"):
            assert not release.inputs.get(flag), flag
    assert not [c for c in recorder.of_type(CHART) if c.inputs["chart"].endswith("gpu-operator")]


def test_device_plugin_discovery_stays_off(run: RunProgram) -> None:
    values = _values(run(_both_cohorts()), "gpu-plugin-chart")

    assert values["gfd"] == {"enabled": False}
    assert values["nfd"] == {"enabled": False}


# ---------------------------------------------------------------- ownership stamping


OWNERSHIP = Ownership(
    owner="device-plugin",
    cohort="plugin",
    selector=selector_for("device-plugin"),
    sharing="time-slicing",
    config_path="eks-hybrid-gpu:cohorts[0]",
)

STAMP_LABELS = {"eks-hybrid-gpu.io/owner": "device-plugin", "eks-hybrid-gpu.io/cohort": "plugin"}
STAMP_ANNOTATIONS = {
    "eks-hybrid-gpu.io/node-selector": '{"eks.amazonaws.com/compute-type":"hybrid",'
    '"workload.example.com/gpu-allocation":"device-plugin"}',
    "eks-hybrid-gpu.io/sharing": "time-slicing",
    "eks-hybrid-gpu.io/config-path": "eks-hybrid-gpu:cohorts[0]",
}


def _daemonset_props() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "hybrid-gpu-plugin-nvidia-device-plugin",
            "namespace": "gpu-system",
            "labels": {
                "app.kubernetes.io/name": "nvidia-device-plugin",
                "helm.sh/chart": "nvidia-device-plugin-0.20.0",
            },
            "annotations": {"deprecated.daemonset.template.generation": "1"},
        },
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "nvidia-device-plugin"}}},
    }


def _stamped(result: object) -> dict[str, Any]:
    """The props of a transform result (asserting that the transform did return one)."""
    assert isinstance(result, pulumi.ResourceTransformResult)
    props: dict[str, Any] = dict(result.props)
    return props


def _transform_args(custom: bool, type_: str, props: dict[str, Any]) -> pulumi.ResourceTransformArgs:
    return pulumi.ResourceTransformArgs(
        custom=custom, type_=type_, name="hybrid-gpu-plugin", props=props, opts=pulumi.ResourceOptions()
    )


def test_stamp_merges_labels_and_annotations_into_a_daemonset() -> None:
    props = _daemonset_props()
    opts = pulumi.ResourceOptions(protect=False)

    result = stamp(OWNERSHIP)(
        pulumi.ResourceTransformArgs(
            custom=True, type_="kubernetes:apps/v1:DaemonSet", name="ds", props=props, opts=opts
        )
    )

    assert isinstance(result, pulumi.ResourceTransformResult)
    assert result.opts is opts
    stamped = _stamped(result)
    assert stamped["metadata"] == {
        "name": "hybrid-gpu-plugin-nvidia-device-plugin",
        "namespace": "gpu-system",
        "labels": {
            "app.kubernetes.io/name": "nvidia-device-plugin",
            "helm.sh/chart": "nvidia-device-plugin-0.20.0",
            **STAMP_LABELS,
        },
        "annotations": {"deprecated.daemonset.template.generation": "1", **STAMP_ANNOTATIONS},
    }
    assert stamped["spec"] == _daemonset_props()["spec"]
    assert stamped["kind"] == "DaemonSet"
    assert props == _daemonset_props()  # the input is not mutated


def test_stamp_adds_labels_where_there_were_none() -> None:
    props = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}

    result = stamp(OWNERSHIP)(_transform_args(True, "kubernetes:core/v1:ServiceAccount", props))

    assert _stamped(result)["metadata"] == {"name": "sa", "labels": STAMP_LABELS, "annotations": STAMP_ANNOTATIONS}


def test_stamp_overrides_a_conflicting_owner_label() -> None:
    props = _daemonset_props()
    props["metadata"]["labels"]["eks-hybrid-gpu.io/owner"] = "dra"

    result = stamp(OWNERSHIP)(_transform_args(True, "kubernetes:apps/v1:DaemonSet", props))

    assert _stamped(result)["metadata"]["labels"]["eks-hybrid-gpu.io/owner"] == "device-plugin"


@pytest.mark.parametrize(
    ("custom", "type_", "props"),
    [
        (False, "eks-hybrid-gpu:owners:DevicePlugin", _daemonset_props()),
        (False, "kubernetes:helm.sh/v4:Chart", _daemonset_props()),
        (True, "aws:eks/cluster:Cluster", _daemonset_props()),
        (True, "kubernetes:apps/v1:DaemonSet", {"kind": "DaemonSet"}),
    ],
    ids=["component", "chart-component", "not-kubernetes", "no-metadata"],
)
def test_stamp_leaves_other_resources_untouched(custom: bool, type_: str, props: dict[str, Any]) -> None:
    assert stamp(OWNERSHIP)(_transform_args(custom, type_, props)) is None


def test_owner_charts_carry_the_stamp_of_their_cohort(run: RunProgram) -> None:
    recorder = run(_both_cohorts())

    for chart, owner, cohort_name, index, chart_ref in [
        ("gpu-plugin-chart", "device-plugin", "plugin", 0, "nvidia-device-plugin@0.20.0"),
        (
            "gpu-dra-chart",
            "dra",
            "dra",
            1,
            "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu@0.5.0",
        ),
    ]:
        transform = recorder.transforms[chart][0]
        result = transform(_transform_args(True, "kubernetes:apps/v1:DaemonSet", _daemonset_props()))
        metadata = _stamped(result)["metadata"]
        assert metadata["annotations"]["eks-hybrid-gpu.io/chart"] == chart_ref
        assert metadata["labels"]["eks-hybrid-gpu.io/owner"] == owner
        assert metadata["labels"]["eks-hybrid-gpu.io/cohort"] == cohort_name
        assert metadata["labels"]["app.kubernetes.io/name"] == "nvidia-device-plugin"
        assert metadata["annotations"]["eks-hybrid-gpu.io/config-path"] == f"eks-hybrid-gpu:cohorts[{index}]"
        assert json.loads(metadata["annotations"]["eks-hybrid-gpu.io/node-selector"]) == selector_for(owner)
    assert len(recorder.transforms["gpu-plugin-chart"]) == 1
    assert len(recorder.transforms["gpu-dra-chart"]) == 2
    assert recorder.transforms["gpu-plugin-smoke-job"] == []


def test_dra_chart_device_classes_lose_extended_resource_name(run: RunProgram) -> None:
    recorder = run(_both_cohorts())
    strip = recorder.transforms["gpu-dra-chart"][1]
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "x"}}], "extendedResourceName": "nvidia.com/gpu"},
    }
    result = strip(_transform_args(True, "kubernetes:resource.k8s.io/v1:DeviceClass", device_class))
    assert result is not None
    assert result.props["spec"] == {"selectors": [{"cel": {"expression": "x"}}]}
    assert strip(_transform_args(True, "kubernetes:apps/v1:DaemonSet", _daemonset_props())) is None


def test_dra_chart_keeps_the_mapping_when_the_stack_keeps_the_gpu_name(run: RunProgram) -> None:
    """dra.extendedResourceName: the chart's class keeps `nvidia.com/gpu` (KEP-5004); only the label transform runs."""
    kept = _both_cohorts(dra={"extendedResourceName": "nvidia.com/gpu"})
    kept["cluster"] = {**kept["cluster"], "kubernetesVersion": "1.37.2"}
    device_class: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "x"}}], "extendedResourceName": "nvidia.com/gpu"},
    }

    def rendered(config: dict[str, Any]) -> dict[str, Any]:
        props = device_class
        for transform in run(config).transforms["gpu-dra-chart"]:
            result = transform(_transform_args(True, "kubernetes:resource.k8s.io/v1:DeviceClass", props))
            props = result.props if result is not None else props
        return dict(props["spec"])

    assert rendered(kept)["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in rendered(_both_cohorts())


# ---------------------------------------------------------------- components constructed directly


def test_device_plugin_component_outputs_and_children(construct: Construct) -> None:
    cohort_config = CohortConfig.model_validate(
        cohort(PLUGIN_COHORT, name="h200", sharing={"mode": "time-slicing", "replicas": 3})
    )
    outputs: dict[str, Any] = {}

    def build() -> pulumi.Output[Any]:
        plugin = DevicePlugin(
            "dp",
            cohort=cohort_config,
            ownership=OWNERSHIP,
            chart=ChartPin(version="0.20.0"),
            namespace="gpu-system",
            runtime_class="nvidia",
            skip_await=True,
            project_dir=ROOT,
        )
        return pulumi.Output.all(plugin.release_name, plugin.resource_name).apply(
            lambda v: outputs.update(release=v[0], resource=v[1])
        )

    recorder = construct(build)

    assert [(r.type_, r.name, r.parent) for r in recorder.registrations] == [
        ("eks-hybrid-gpu:owners:DevicePlugin", "dp", "eks-hybrid-gpu-test"),
        (CHART, "dp-chart", "dp"),
    ]
    chart = recorder.named("dp-chart").inputs
    assert chart["name"] == "hybrid-gpu-h200"
    assert chart["skipAwait"] is True
    assert chart["values"]["nodeSelector"] == selector_for("device-plugin")
    assert outputs == {"release": "hybrid-gpu-h200", "resource": "nvidia.com/gpu.shared"}


def test_gpu_operator_component_children(construct: Construct) -> None:
    cohort_config = CohortConfig.model_validate(OPERATOR_COHORT)

    def build() -> None:
        GpuOperator(
            "op",
            operator=OperatorConfig(mode="gpu-cluster"),
            cohort=cohort_config,
            chart=ChartPin(version="v26.7.0"),
            namespace="gpu-operator",
            skip_await=False,
            project_dir=ROOT,
        )

    recorder = construct(build)

    assert [(r.type_, r.name, r.parent) for r in recorder.registrations] == [
        ("eks-hybrid-gpu:owners:GpuOperator", "op", "eks-hybrid-gpu-test"),
        (RELEASE, "op-release", "op"),
    ]
    values = dict(recorder.named("op-release").inputs["values"])
    assert values.pop("daemonsets") == OPERAND_TOLERATIONS  # the operand boundary, beyond the seed's fragment
    _assert_key_by_key(values, seeds.document(seeds.GPU_CLUSTER_VALUES))


# ---------------------------------------------------------------- reading the stack config


def test_plain_string_cohort_label_key_is_read(run: RunProgram) -> None:
    recorder = run(_base_config(cohortLabelKey="example.com/gpu-owner"))

    assert _values(recorder, "gpu-plugin-chart")["nodeSelector"] == {
        "eks.amazonaws.com/compute-type": "hybrid",
        "example.com/gpu-owner": "device-plugin",
    }
