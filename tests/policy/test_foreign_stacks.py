"""The pack on stacks this program did not build: no stamps, no ledger, no Chart parent.

What a platform team runs on every pull request: real `helm template` renders of the pinned chart archives
(tests/support/charts.py) with the guide's values, NVIDIA's static device-plugin manifest and the guide's smoke
Jobs pasted as plain manifests. Each headline rule gets a violating stack and its clean twin, one value apart.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest

from policy.gpu_allocation.rules.ownership import OPERATOR_DEVICE_PLUGIN_DISABLED, SINGLE_ALLOCATION_OWNER
from policy.gpu_allocation.rules.sharing import MIG_STRATEGY_CONSISTENT, SHARED_GPU_RESOURCE_NAME
from policy.gpu_allocation.rules.targeting import GPU_DISCOVERY_AFFINITY_KEPT, NO_AUTO_MODE_TARGETING
from policy.gpu_allocation.rules.workloads import SMOKE_JOB_HARDENED, SMOKE_JOB_TOKEN_UNMOUNTED
from tests.support import charts
from tests.support.policy_harness import Harness, Item, type_of

from .helm import template

pytestmark = pytest.mark.policy

FOREIGN = "urn:pulumi:team::platform-gpu::"
"""Another team's project: nothing here is this program's."""
COHORT_KEY = "workload.example.com/gpu-allocation"
DIGEST = "registry.example.invalid/approved/gpu-smoke@sha256:" + "a" * 64
STATIC_PLUGIN = "kube-system/nvidia-device-plugin-daemonset"


def foreign(manifests: list[dict[str, Any]]) -> list[Item]:
    """Stack items as a ConfigGroup-less foreign program registers them: no parent, its own project."""
    items = []
    for manifest in manifests:
        metadata = manifest["metadata"]
        name = f"{metadata.get('namespace', '')}/{metadata['name']}".lstrip("/")
        resource_type = type_of(manifest)
        items.append(Item(resource_type, manifest, name, None, f"{FOREIGN}{resource_type}::{name}"))
    return items


@functools.cache
def _rendered(chart: str, values_file: str, overrides: str) -> list[dict[str, Any]]:
    values = Harness.values(values_file)
    for path, value in json.loads(overrides):
        target = values
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    if chart == "device-plugin":
        return template("hybrid-gpu-plugin", charts.device_plugin(), "gpu-system", values)
    return template("hybrid-gpu-dra", charts.dra_driver(), "gpu-dra-system", values)


def device_plugin(values_file: str = "device-plugin-values.yaml", **overrides: Any) -> list[dict[str, Any]]:
    """The device-plugin chart rendered with the guide's values and dotted-path overrides (`a__b=value`)."""
    pairs = [(k.split("__"), v) for k, v in sorted(overrides.items())]
    return copy.deepcopy(_rendered("device-plugin", values_file, json.dumps(pairs)))


def dra(**overrides: Any) -> list[dict[str, Any]]:
    """The DRA chart rendered with the guide's values and dotted-path overrides."""
    pairs = [(k.split("__"), v) for k, v in sorted(overrides.items())]
    return copy.deepcopy(_rendered("dra", "dra-values.yaml", json.dumps(pairs)))


def static_plugin(
    node_selector: dict[str, str] | None = None, affinity: dict[str, Any] | None = None
) -> dict[str, Any]:
    """NVIDIA's static device-plugin DaemonSet, optionally placed."""
    manifest = Harness.docs("nvidia-device-plugin-static.yml")[0]
    pod = manifest["spec"]["template"]["spec"]
    if node_selector is not None:
        pod["nodeSelector"] = node_selector
    if affinity is not None:
        pod["affinity"] = affinity
    return manifest


def smoke_job(name: str = "hybrid-gpu-plugin-smoke") -> dict[str, Any]:
    """The guide's smoke Job pasted as a plain manifest, its image pinned by digest."""
    manifest = Harness.find("seed-smoke-jobs.yaml", "Job", name)
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = DIGEST
    return manifest


def gpu_workload(resource: str, node_selector: dict[str, str], count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inference", "namespace": "ai-workloads"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": node_selector,
                    "containers": [
                        {
                            "name": "server",
                            "image": DIGEST,
                            "resources": {"requests": {resource: count}, "limits": {resource: count}},
                        }
                    ],
                }
            }
        },
    }


def affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
            }
        }
    }


def selector(cohort: str) -> dict[str, str]:
    return {"eks.amazonaws.com/compute-type": "hybrid", COHORT_KEY: cohort}


# --------------------------------------------------------------------------- single-allocation-owner


@pytest.mark.charts
def test_guide_renders_of_both_charts_on_their_own_cohorts_pass_without_a_ledger(harness: Harness) -> None:
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, foreign([*device_plugin(), *dra()]))
    harness.passes(outcome)


@pytest.mark.charts
def test_dra_render_moved_onto_the_plugin_cohort_is_refused(harness: Harness) -> None:
    items = foreign([*device_plugin(), *dra(kubeletPlugin__nodeSelector=selector("device-plugin"))])
    message = harness.stack(SINGLE_ALLOCATION_OWNER, items).one()
    assert "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-plugin-nvidia-device-plugin'" in message
    assert "kubernetes:apps/v1:DaemonSet 'gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin'" in message
    assert "can select the same nodes" in message
    assert "eks-hybrid-gpu:" not in message, "a foreign stack has no stack config to point at"
    assert "the nodeSelector (or required node affinity) of the allocator pods of" in message


@pytest.mark.charts
def test_nvidia_static_plugin_next_to_the_dra_driver_is_refused(harness: Harness) -> None:
    items = foreign([static_plugin(), *dra()])
    message = harness.stack(SINGLE_ALLOCATION_OWNER, items).one()
    assert f"kubernetes:apps/v1:DaemonSet '{STATIC_PLUGIN}' (device-plugin, nodeSelector {{}} from" in message
    assert "(dra, nodeSelector" in message
    assert "ledger" not in message


@pytest.mark.charts
def test_nvidia_static_plugin_placed_on_its_own_cohort_passes(harness: Harness) -> None:
    items = foreign([static_plugin(selector("device-plugin")), *dra()])
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, items))


@pytest.mark.charts
def test_required_affinity_that_admits_the_dra_cohort_is_refused(harness: Harness) -> None:
    admits = affinity({"key": COHORT_KEY, "operator": "In", "values": ["device-plugin", "dra"]})
    items = foreign([static_plugin({"eks.amazonaws.com/compute-type": "hybrid"}, admits), *dra()])
    message = harness.stack(SINGLE_ALLOCATION_OWNER, items).one()
    assert "required nodeAffinity" in message


@pytest.mark.charts
def test_required_affinity_that_excludes_the_dra_cohort_passes(harness: Harness) -> None:
    excludes = affinity({"key": COHORT_KEY, "operator": "NotIn", "values": ["dra"]})
    items = foreign([static_plugin({"eks.amazonaws.com/compute-type": "hybrid"}, excludes), *dra()])
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, items))


@pytest.mark.charts
def test_companions_of_one_install_are_never_a_second_owner(harness: Harness) -> None:
    rendered = device_plugin()
    kinds = sorted(d["metadata"]["name"] for d in rendered if d["kind"] == "DaemonSet")
    assert kinds == [
        "hybrid-gpu-plugin-nvidia-device-plugin",
        "hybrid-gpu-plugin-nvidia-device-plugin-mps-control-daemon",
    ]
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, foreign(rendered))
    harness.passes(outcome)


@pytest.mark.charts
def test_two_device_plugins_on_one_cohort_are_refused(harness: Harness) -> None:
    items = foreign([*device_plugin(), static_plugin(selector("device-plugin"))])
    message = harness.stack(SINGLE_ALLOCATION_OWNER, items).one()
    assert STATIC_PLUGIN in message
    assert "hybrid-gpu-plugin-nvidia-device-plugin" in message


# --------------------------------------------------------------------------- no-auto-mode-targeting


def test_nvidia_static_plugin_without_the_hybrid_pin_is_refused(harness: Harness) -> None:
    message = harness.manifest_check(NO_AUTO_MODE_TARGETING, static_plugin()).one()
    assert message.startswith(f"kubernetes:apps/v1:DaemonSet '{STATIC_PLUGIN}' is not pinned")
    assert "Add eks.amazonaws.com/compute-type: hybrid to spec.template.spec.nodeSelector of " in message
    assert "eks-hybrid-gpu:" not in message


def test_nvidia_static_plugin_pinned_to_hybrid_passes(harness: Harness) -> None:
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, static_plugin(selector("device-plugin"))))


def test_plain_daemonset_running_the_plugin_binary_is_an_allocator(harness: Harness) -> None:
    manifest = static_plugin()
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["name"] = "gpu"
    container["image"] = "mirror.example.invalid/gpu/plugin:1.0"
    container["command"] = ["/usr/bin/nvidia-device-plugin"]
    assert "is not pinned" in harness.manifest_check(NO_AUTO_MODE_TARGETING, manifest).one()


def test_smoke_job_whose_not_in_admits_auto_mode_is_refused(harness: Harness) -> None:
    job = smoke_job()
    pod = job["spec"]["template"]["spec"]
    pod["nodeSelector"] = {COHORT_KEY: "device-plugin"}
    pod["affinity"] = affinity({"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]})
    assert "can schedule on EKS Auto Mode" in harness.manifest_check(NO_AUTO_MODE_TARGETING, job).one()
    pod["affinity"] = affinity({"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]})
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, job))


# --------------------------------------------------------------------------- smoke-job-hardened


def test_guide_smoke_jobs_pasted_with_a_digest_pass(harness: Harness) -> None:
    for name in ("hybrid-gpu-plugin-smoke", "hybrid-gpu-dra-smoke"):
        outcome = harness.manifest_check(SMOKE_JOB_HARDENED, smoke_job(name))
        harness.passes(outcome, name)


def _container(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]["containers"][0]


UNHARDENINGS: dict[str, tuple[Any, str]] = {
    "no deadline": (lambda j: j["spec"].pop("activeDeadlineSeconds"), "spec.activeDeadlineSeconds is null"),
    "long deadline": (lambda j: j["spec"].update(activeDeadlineSeconds=3600), "above the maximum 600"),
    "retries": (lambda j: j["spec"].update(backoffLimit=3), "spec.backoffLimit is 3"),
    "no ttl": (lambda j: j["spec"].pop("ttlSecondsAfterFinished"), "spec.ttlSecondsAfterFinished is null"),
    "token": (
        lambda j: j["spec"]["template"]["spec"].update(automountServiceAccountToken=True),
        "automountServiceAccountToken is true",
    ),
    "root": (lambda j: j["spec"]["template"]["spec"]["securityContext"].update(runAsUser=0), "runAsUser is 0"),
    "unconfined": (
        lambda j: j["spec"]["template"]["spec"]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        "seccompProfile.type is 'Unconfined'",
    ),
    "escalation": (
        lambda j: _container(j)["securityContext"].update(allowPrivilegeEscalation=True),
        "allowPrivilegeEscalation is true",
    ),
    "writable root": (
        lambda j: _container(j)["securityContext"].pop("readOnlyRootFilesystem"),
        "readOnlyRootFilesystem is null",
    ),
    "capabilities": (
        lambda j: _container(j)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
        "capabilities.add",
    ),
    "tag": (lambda j: _container(j).update(image="registry.example.invalid/gpu-smoke:1.0"), "not pinned by an @sha256"),
}


@pytest.mark.parametrize("mutation", sorted(UNHARDENINGS))
def test_each_unhardened_pasted_smoke_job_is_refused(harness: Harness, mutation: str) -> None:
    job = smoke_job()
    change, expected = UNHARDENINGS[mutation]
    change(job)
    message = harness.manifest_check(SMOKE_JOB_HARDENED, job).one()
    assert expected in message
    assert "eks-hybrid-gpu:" not in message


def test_a_pasted_smoke_job_leaving_the_token_unset_is_refused_by_its_unmanaged_default_account(
    harness: Harness,
) -> None:
    job = smoke_job()
    job["spec"]["template"]["spec"].pop("automountServiceAccountToken")
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, job))  # the pod leaves it to its ServiceAccount
    message = harness.stack(SMOKE_JOB_TOKEN_UNMOUNTED, foreign([job])).one()
    assert "ServiceAccount 'default' decides, and the namespace's own" in message
    assert "add a ServiceAccountPatch of ServiceAccount 'default'" in message


def test_a_gpu_job_not_named_as_a_smoke_job_is_not_judged_as_one(harness: Harness) -> None:
    job = smoke_job()
    job["metadata"]["name"] = "nightly-training"
    job["spec"].pop("backoffLimit")
    assert harness.not_applicable(harness.manifest_check(SMOKE_JOB_HARDENED, job)).startswith("not a smoke Job")


# --------------------------------------------------------------------------- shared-gpu-resource-name


@pytest.mark.charts
def test_request_for_the_renamed_resource_on_a_time_sliced_cohort_passes(harness: Harness) -> None:
    rendered = device_plugin("device-plugin-time-slicing-values.yaml")
    items = foreign([*rendered, gpu_workload("nvidia.com/gpu.shared", selector("device-plugin"))])
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, items))


@pytest.mark.charts
def test_request_for_nvidia_gpu_on_a_cohort_whose_config_renames_it_is_refused(harness: Harness) -> None:
    rendered = device_plugin("device-plugin-time-slicing-values.yaml")
    items = foreign([*rendered, gpu_workload("nvidia.com/gpu", selector("device-plugin"))])
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, items).one()
    assert "nvidia.com/gpu.shared" in message
    assert "kubernetes:apps/v1:Deployment 'ai-workloads/inference'" in message


# --------------------------------------------------------------------------- mig-strategy-consistent


@pytest.mark.charts
def test_mixed_mig_request_on_a_rendered_mixed_plugin_passes(harness: Harness) -> None:
    items = foreign(
        [*device_plugin(migStrategy="mixed"), gpu_workload("nvidia.com/mig-1g.5gb", selector("device-plugin"))]
    )
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, items))


@pytest.mark.charts
def test_mixed_mig_request_on_a_plugin_without_the_mixed_strategy_is_refused(harness: Harness) -> None:
    items = foreign([*device_plugin(), gpu_workload("nvidia.com/mig-1g.5gb", selector("device-plugin"))])
    message = harness.stack(MIG_STRATEGY_CONSISTENT, items).one()
    assert "nvidia.com/mig-1g.5gb" in message


# --------------------------------------------------------------------------- operator-device-plugin-disabled


def _cluster_policy(device_plugin_enabled: bool | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"operator": {"defaultRuntime": "containerd"}}
    if device_plugin_enabled is not None:
        spec["devicePlugin"] = {"enabled": device_plugin_enabled}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


def test_plain_cluster_policy_with_its_plugin_next_to_nvidias_static_plugin_is_refused(harness: Harness) -> None:
    items = foreign([static_plugin(selector("device-plugin")), _cluster_policy(None)])
    message = harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, items).one()
    assert message.startswith("kubernetes:nvidia.com/v1:ClusterPolicy 'cluster-policy' deploys")
    assert f"DaemonSet '{STATIC_PLUGIN}'" in message
    assert "Set spec.devicePlugin.enabled: false" in message


def test_plain_cluster_policy_without_its_plugin_next_to_nvidias_static_plugin_passes(harness: Harness) -> None:
    items = foreign([static_plugin(selector("device-plugin")), _cluster_policy(False)])
    harness.passes(harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, items))


def test_affinity_message_on_a_foreign_daemonset_names_its_own_field(harness: Harness) -> None:
    message = harness.manifest_check(GPU_DISCOVERY_AFFINITY_KEPT, static_plugin(selector("device-plugin"))).one()
    assert (
        f"(remove the override from spec.template.spec.affinity of kubernetes:apps/v1:DaemonSet '{STATIC_PLUGIN}')"
        in (message)
    )
    assert "eks-hybrid-gpu:" not in message


def _static_plugin_with_config(config: str) -> list[dict[str, Any]]:
    """NVIDIA's static plugin reading a time-slicing file from its own ConfigMap (no chart, no config-manager)."""
    plugin = static_plugin(selector("device-plugin"))
    pod = plugin["spec"]["template"]["spec"]
    container = pod["containers"][0]
    container["env"].append({"name": "CONFIG_FILE", "value": "/etc/nvidia/plugin/config.yaml"})
    container["volumeMounts"].append({"name": "plugin-config", "mountPath": "/etc/nvidia/plugin"})
    pod["volumes"].append({"name": "plugin-config", "configMap": {"name": "gpu-sharing"}})
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-sharing", "namespace": "kube-system"},
        "data": {"config.yaml": config},
    }
    return [plugin, config_map]


TIME_SLICING = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


def test_static_plugin_config_file_that_renames_the_gpu_is_found(harness: Harness) -> None:
    workload = gpu_workload("nvidia.com/gpu", selector("device-plugin"))
    items = foreign([*_static_plugin_with_config(TIME_SLICING), workload])
    assert "nvidia.com/gpu.shared" in harness.stack(SHARED_GPU_RESOURCE_NAME, items).one()
    shared = foreign(
        [
            *_static_plugin_with_config(TIME_SLICING),
            gpu_workload("nvidia.com/gpu.shared", workload["spec"]["template"]["spec"]["nodeSelector"]),
        ]
    )
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, shared))


def test_static_plugin_config_file_without_fail_requests_greater_than_one_is_refused(harness: Harness) -> None:
    loose = TIME_SLICING.replace("failRequestsGreaterThanOne: true", "failRequestsGreaterThanOne: false")
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, foreign(_static_plugin_with_config(loose))).one()
    assert "failRequestsGreaterThanOne is false" in message
    assert "ConfigMap 'kube-system/gpu-sharing'" in message


MIXED_CONFIG = "version: v1\nflags:\n  migStrategy: mixed\n"


def test_mixed_mig_request_on_a_static_plugin_whose_config_file_says_mixed_passes(harness: Harness) -> None:
    workload = gpu_workload("nvidia.com/mig-1g.5gb", selector("device-plugin"))
    items = foreign([*_static_plugin_with_config(MIXED_CONFIG), workload])
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, items))
    items = foreign([*_static_plugin_with_config(MIXED_CONFIG.replace("mixed", "single")), workload])
    assert "nvidia.com/mig-1g.5gb" in harness.stack(MIG_STRATEGY_CONSISTENT, items).one()
