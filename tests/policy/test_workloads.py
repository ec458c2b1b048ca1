"""Workload policies: smoke Jobs, GPU request shape, env overrides, dual allocation, sharing, MIG."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from policy.gpu_allocation.rules.sharing import (
    MIG_STRATEGY_CONSISTENT,
    SHARED_GPU_RESOURCE_NAME,
    TIME_SLICING_CONFIG_ATTACHED,
)
from policy.gpu_allocation.rules.workloads import (
    GPU_REQUEST_SHAPE,
    NO_DUAL_ALLOCATION,
    NO_VISIBLE_DEVICES_OVERRIDE,
    SMOKE_JOB_HARDENED,
)
from policy.gpu_allocation.vocab.gpu_models import MIG_PROFILES, normalize_gpu_model
from policy.gpu_allocation.vocab.mig import normalize_profile
from tests.support.policy_harness import (
    DP_DAEMONSET,
    DP_SELECTOR,
    DRA_DAEMONSET,
    DRA_SELECTOR,
    Harness,
    Item,
    real_items,
)

pytestmark = pytest.mark.policy

UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
UNKNOWN_OBJECT = "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"
DIGEST = "registry.example.com/approved/gpu-smoke@sha256:" + "a" * 64
PLUGIN_JOB = "hybrid-gpu-plugin-smoke"
DRA_JOB = "hybrid-gpu-dra-smoke"


def job(harness: Harness, name: str = PLUGIN_JOB, *, approved: str = "false", digest: bool = True) -> dict[str, Any]:
    """A seed smoke Job as the program renders it: stamped, labelled, image pinned by digest."""
    owner, selector = ("device-plugin", DP_SELECTOR) if name == PLUGIN_JOB else ("dra", DRA_SELECTOR)
    manifest = harness.stamp(harness.find("seed-smoke-jobs.yaml", "Job", name), owner, "plugin", selector)
    manifest["metadata"]["labels"]["eks-hybrid-gpu.io/smoke-job"] = "true"
    manifest["metadata"]["annotations"]["eks-hybrid-gpu.io/approved-to-run"] = approved
    if digest:
        manifest["spec"]["template"]["spec"]["containers"][0]["image"] = DIGEST
    return manifest


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def container(manifest: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = pod(manifest)["containers"][0]
    return first


# --------------------------------------------------------------------------- smoke Jobs


@pytest.mark.parametrize("name", [PLUGIN_JOB, DRA_JOB])
def test_seed_smoke_jobs_with_a_digest_pass(harness: Harness, name: str) -> None:
    outcome = harness.manifest_check(SMOKE_JOB_HARDENED, job(harness, name))
    harness.passes(outcome)


def test_approved_job_may_run(harness: Harness) -> None:
    manifest = job(harness, approved="true")
    manifest["spec"]["suspend"] = False
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, manifest))


def test_seed_placeholder_image_is_refused(harness: Harness) -> None:
    manifest = job(harness, digest=False)
    assert harness.manifest_check(SMOKE_JOB_HARDENED, manifest).one() == (
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke': container 'gpu-check' image is "
        "'registry.example.invalid/approved/gpu-smoke:replace-with-approved-digest', not pinned by an @sha256: "
        "digest, so the tested image can change under the same tag. Set eks-hybrid-gpu:smokeJobs.image to an "
        "approved image@sha256:<64 hex> reference."
    )


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(manifest: dict[str, Any]) -> None:
        target = manifest
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
        if value is _DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return mutate


_DELETE = object()
POD = "spec.template.spec"
CTR = f"{POD}.containers.0"


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (
            _set("spec.suspend", False),
            "spec.suspend is false (absent means false) but annotation eks-hybrid-gpu.io/approved-to-run is "
            "'false', so the Job starts GPU work nobody approved. Keep spec.suspend: true, or approve exactly this "
            "cohort in eks-hybrid-gpu:smokeJobs.approvedCohort.",
        ),
        (_set("spec.suspend", _DELETE), "spec.suspend is null (absent means false)"),
        (
            _set("spec.activeDeadlineSeconds", 3600),
            "spec.activeDeadlineSeconds is 3600, above the maximum 600. Set "
            "eks-hybrid-gpu:smokeJobs.activeDeadlineSeconds to at most 600.",
        ),
        (_set("spec.activeDeadlineSeconds", _DELETE), "spec.activeDeadlineSeconds is null, so the Job is unbounded."),
        (_set("spec.backoffLimit", _DELETE), "spec.backoffLimit is null (absent means 6)"),
        (_set("spec.ttlSecondsAfterFinished", _DELETE), "spec.ttlSecondsAfterFinished is null"),
        (_set(f"{POD}.automountServiceAccountToken", True), "automountServiceAccountToken is true"),
        (_set(f"{POD}.securityContext.runAsUser", 0), "container 'gpu-check' runAsUser is 0"),
        (_set(f"{POD}.securityContext.runAsNonRoot", False), "container 'gpu-check' runAsNonRoot is false"),
        (
            _set(f"{CTR}.securityContext.seccompProfile", {"type": "Unconfined"}),
            "container 'gpu-check' seccompProfile.type is 'Unconfined'",
        ),
        (
            _set(f"{CTR}.securityContext.allowPrivilegeEscalation", True),
            "container 'gpu-check' securityContext.allowPrivilegeEscalation is true. Set it to false",
        ),
        (
            _set(f"{CTR}.securityContext.readOnlyRootFilesystem", _DELETE),
            "container 'gpu-check' securityContext.readOnlyRootFilesystem is null. Set it to true",
        ),
        (_set(f"{CTR}.securityContext.capabilities.drop", ["NET_RAW"]), 'capabilities.drop is ["NET_RAW"]'),
        (_set(f"{CTR}.securityContext.capabilities.add", ["SYS_ADMIN"]), 'capabilities.add is ["SYS_ADMIN"]'),
        (_set(f"{CTR}.securityContext.privileged", True), "container 'gpu-check' is privileged"),
    ],
)
def test_smoke_job_findings(harness: Harness, mutate: Callable[[dict[str, Any]], None], fragment: str) -> None:
    manifest = job(harness)
    mutate(manifest)
    message = harness.manifest_check(SMOKE_JOB_HARDENED, manifest).one()
    assert message.startswith("kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke': ")
    assert fragment in message


def test_deadline_maximum_is_configurable(harness: Harness) -> None:
    manifest = job(harness)
    manifest["spec"]["activeDeadlineSeconds"] = 3600
    outcome = harness.manifest_check(SMOKE_JOB_HARDENED, manifest, {"maxActiveDeadlineSeconds": 7200})
    harness.passes(outcome)


def test_non_smoke_job_is_not_applicable(harness: Harness) -> None:
    manifest = harness.find("seed-smoke-jobs.yaml", "Job", PLUGIN_JOB)
    manifest["metadata"]["name"] = "train-resnet"
    outcome = harness.manifest_check(SMOKE_JOB_HARDENED, manifest)
    assert harness.not_applicable(outcome) == (
        "not a smoke Job (label eks-hybrid-gpu.io/smoke-job=true, or a GPU Job named as a smoke/validation Job)"
    )


def test_seed_smoke_job_pasted_without_labels_is_judged_on_its_hardening(harness: Harness) -> None:
    manifest = harness.find("seed-smoke-jobs.yaml", "Job", PLUGIN_JOB)
    messages = harness.manifest_check(SMOKE_JOB_HARDENED, manifest).messages
    # The seed's image is a tag; approval (spec.suspend) is this program's workflow, not a foreign Job's.
    assert messages == [
        f"kubernetes:batch/v1:Job 'ai-workloads/{PLUGIN_JOB}': container 'gpu-check' image is "
        f"{manifest['spec']['template']['spec']['containers'][0]['image']!r}, not pinned by an @sha256: digest, so "
        "the tested image can change under the same tag. Set the container image to an approved "
        "image@sha256:<64 hex> reference."
    ]


def test_smoke_job_unknowns_do_not_crash(harness: Harness) -> None:
    manifest = job(harness)
    container(manifest)["image"] = UNKNOWN_STRING
    manifest["spec"]["suspend"] = "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7"
    pod(manifest)["securityContext"] = UNKNOWN_OBJECT
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, manifest))
    manifest["spec"] = UNKNOWN_OBJECT
    assert harness.not_applicable(harness.manifest_check(SMOKE_JOB_HARDENED, manifest)) == (
        "the Job spec is unknown during preview"
    )


# --------------------------------------------------------------------------- request shape


def as_kind(manifest: dict[str, Any], kind: str) -> dict[str, Any]:
    template = copy.deepcopy(manifest["spec"]["template"])
    metadata = {"name": "inference", "namespace": "ai-workloads"}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
    if kind == "CronJob":
        spec = {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}
        return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata, "spec": spec}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": template}}
    spec = {"selector": {"matchLabels": {"app": "x"}}, "template": template}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": metadata, "spec": spec}


def test_seed_requests_pass(harness: Harness) -> None:
    for name in (PLUGIN_JOB, DRA_JOB):
        harness.passes(harness.manifest_check(GPU_REQUEST_SHAPE, job(harness, name)))


@pytest.mark.parametrize("kind", ["Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "Pod"])
def test_fractional_request_in_every_pod_template(harness: Harness, kind: str) -> None:
    manifest = job(harness)
    container(manifest)["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    container(manifest)["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    outcome = harness.manifest_check(GPU_REQUEST_SHAPE, as_kind(manifest, kind))
    assert len(outcome.violations) == 2
    assert outcome.messages[0].startswith(f"kubernetes:{'core/v1' if kind == 'Pod' else ''}")
    assert (
        "'ai-workloads/inference': container 'gpu-check' requests['nvidia.com/gpu'] is '0.5': extended GPU "
        "resources are whole, non-negative device counts (no fractions or milli-units); request whole devices, "
        "or share GPUs through time-slicing or MIG (in the manifest of kubernetes:"
    ) in outcome.messages[0]


def test_milli_units_and_unequal_limits(harness: Harness) -> None:
    manifest = job(harness)
    container(manifest)["resources"]["requests"]["nvidia.com/gpu"] = "500m"
    container(manifest)["resources"]["limits"]["nvidia.com/gpu"] = 1
    messages = harness.manifest_check(GPU_REQUEST_SHAPE, manifest).messages
    assert any("requests['nvidia.com/gpu'] is '500m'" in m for m in messages)
    assert any("requests['nvidia.com/gpu'] is '500m' but limits['nvidia.com/gpu'] is 1" in m for m in messages)
    container(manifest)["resources"]["requests"]["nvidia.com/gpu"] = 1
    container(manifest)["resources"]["limits"]["nvidia.com/gpu"] = 2
    message = harness.manifest_check(GPU_REQUEST_SHAPE, manifest).one()
    assert (
        "container 'gpu-check' requests['nvidia.com/gpu'] is 1 but limits['nvidia.com/gpu'] is 2: GPU requests "
        "must equal limits (devices are not overcommitted); set both to the same whole number "
        "(in eks-hybrid-gpu:cohorts[0])."
    ) in message


def test_request_without_limit_and_limit_only(harness: Harness) -> None:
    manifest = job(harness)
    del container(manifest)["resources"]["limits"]["nvidia.com/gpu"]
    message = harness.manifest_check(GPU_REQUEST_SHAPE, manifest).one()
    assert "requests['nvidia.com/gpu'] is 1 without a limit" in message
    manifest = job(harness)
    del container(manifest)["resources"]["requests"]["nvidia.com/gpu"]
    harness.passes(harness.manifest_check(GPU_REQUEST_SHAPE, manifest))


def test_request_shape_unknowns(harness: Harness) -> None:
    manifest = job(harness)
    container(manifest)["resources"]["limits"] = UNKNOWN_OBJECT
    harness.passes(harness.manifest_check(GPU_REQUEST_SHAPE, manifest))
    container(manifest)["resources"] = {"requests": {"nvidia.com/gpu": "3eeb2bf0-c639-47a8-9e75-3b44932eb421"}}
    harness.passes(harness.manifest_check(GPU_REQUEST_SHAPE, manifest))
    manifest["spec"]["template"] = UNKNOWN_OBJECT
    assert harness.not_applicable(harness.manifest_check(GPU_REQUEST_SHAPE, manifest)) == (
        "the pod template is unknown during preview"
    )


def test_non_workload_is_not_applicable(harness: Harness) -> None:
    device_class = harness.find("seed-dra-objects.yaml", "DeviceClass", "hybrid-full-gpu")
    outcome = harness.manifest_check(GPU_REQUEST_SHAPE, device_class)
    assert harness.not_applicable(outcome) == "not a workload with a pod template"


# --------------------------------------------------------------------------- visible devices


@pytest.mark.parametrize(
    ("file_name", "name"),
    [
        ("device-plugin-rendered.yaml", DP_DAEMONSET),
        ("device-plugin-rendered.yaml", f"{DP_DAEMONSET}-mps-control-daemon"),
        ("dra-rendered.yaml", DRA_DAEMONSET),
    ],
)
def test_allocators_that_set_visible_devices_but_request_no_gpu_pass(
    harness: Harness, file_name: str, name: str
) -> None:
    manifest = harness.find(file_name, "DaemonSet", name)
    envs = [e["name"] for c in pod(manifest)["containers"] for e in c.get("env", [])]
    assert "NVIDIA_VISIBLE_DEVICES" in envs
    harness.passes(harness.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, manifest))


def test_cuda_visible_devices_on_a_device_plugin_container(harness: Harness) -> None:
    manifest = job(harness)
    container(manifest)["env"] = [{"name": "CUDA_VISIBLE_DEVICES", "value": "0,1,2,3"}]
    assert harness.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, manifest).one() == (
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke': container 'gpu-check' gets GPUs through "
        "the device plugin (nvidia.com/gpu) and sets env CUDA_VISIBLE_DEVICES='0,1,2,3'. The device plugin/DRA "
        "driver and the runtime supply the assigned devices, and CUDA's process-visible indices can differ from "
        "physical ones, so the override can hide or misidentify the allocation and grants no extra GPUs. Remove "
        "CUDA_VISIBLE_DEVICES from the env (in eks-hybrid-gpu:cohorts[0])."
    )


def test_nvidia_visible_devices_on_a_claim_container(harness: Harness) -> None:
    manifest = job(harness, DRA_JOB)
    container(manifest)["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    message = harness.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, manifest).one()
    assert (
        "container 'gpu-check' gets GPUs through DRA claim(s) gpu-resource and sets env NVIDIA_VISIBLE_DEVICES='all'"
        in message
    )


def test_sidecar_of_a_claim_pod_is_checked_too(harness: Harness) -> None:
    manifest = job(harness, DRA_JOB)
    pod(manifest)["containers"].append(
        {"name": "sidecar", "image": DIGEST, "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]}
    )
    message = harness.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, manifest).one()
    assert "container 'sidecar' gets GPUs through the pod's DRA resourceClaims (gpu-resource)" in message


# --------------------------------------------------------------------------- dual allocation


def test_seed_jobs_use_one_mechanism(harness: Harness) -> None:
    for name in (PLUGIN_JOB, DRA_JOB):
        harness.passes(harness.manifest_check(NO_DUAL_ALLOCATION, job(harness, name)))


def test_device_plugin_request_and_claim_at_once(harness: Harness) -> None:
    manifest = job(harness, DRA_JOB)
    container(manifest)["resources"]["requests"]["nvidia.com/gpu"] = 1
    container(manifest)["resources"]["limits"]["nvidia.com/gpu"] = 1
    assert harness.manifest_check(NO_DUAL_ALLOCATION, manifest).one() == (
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-dra-smoke': requests nvidia.com/gpu (container "
        "'gpu-check') through the device plugin and DRA claim(s) gpu-resource at once. The two mechanisms can "
        "hand out the same physical GPUs, so the pod double-allocates (or never schedules). Request GPUs through "
        "one mechanism: nvidia.com/gpu on a device-plugin cohort, or resourceClaims on a DRA cohort "
        "(in eks-hybrid-gpu:cohorts[0])."
    )


def test_dual_allocation_unknown_pod(harness: Harness) -> None:
    manifest = job(harness, DRA_JOB)
    pod(manifest)["resourceClaims"] = "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2"
    harness.passes(harness.manifest_check(NO_DUAL_ALLOCATION, manifest))


# --------------------------------------------------------------------------- time-slicing


TS_CONFIGS = "hybrid-gpu-ts-nvidia-device-plugin-configs"
TS_DAEMONSET = "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-ts-nvidia-device-plugin'"
BY_CHART = "(rendered by kubernetes:helm.sh/v4:Chart 'plugin-chart')"


def shared_stack(harness: Harness) -> list[Item]:
    """A Chart v4 device plugin with the time-slicing config attached, as captured from a real preview."""
    return harness.device_plugin(sharing="time-slicing", variant="ts")


def child(items: list[Item], kind: str, suffix: str) -> Item:
    return next(i for i in items if i.resource_type.endswith(f":{kind}") and i.name.endswith(suffix))


def set_env(items: list[Item], name: str, value: Any) -> None:
    """Change an env var in every rendered container that sets it (the chart renders it in several)."""
    for item in items:
        if item.resource_type != "kubernetes:apps/v1:DaemonSet":
            continue
        spec = pod(item.props)
        for entry in [*spec.get("initContainers", []), *spec["containers"]]:
            for env in entry.get("env", []):
                if env["name"] == name:
                    env["value"] = value


def workload(harness: Harness, resource: str, count: int = 1) -> Item:
    manifest = job(harness)
    del manifest["metadata"]["labels"]["eks-hybrid-gpu.io/owner"]
    for table in ("requests", "limits"):
        del container(manifest)["resources"][table]["nvidia.com/gpu"]
        container(manifest)["resources"][table][resource] = count
    return harness.item(manifest)


def test_attached_time_slicing_and_shared_request_pass(harness: Harness) -> None:
    items = [*shared_stack(harness), workload(harness, "nvidia.com/gpu.shared")]
    outcome = harness.stack(SHARED_GPU_RESOURCE_NAME, items)
    harness.passes(outcome)


def test_exclusive_request_on_a_renamed_cohort(harness: Harness) -> None:
    items = [*shared_stack(harness), workload(harness, "nvidia.com/gpu")]
    assert harness.stack(SHARED_GPU_RESOURCE_NAME, items).one() == (
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke': container 'gpu-check' requests "
        "nvidia.com/gpu but it only runs on kubernetes:helm.sh/v4:Chart 'plugin-chart' (cohort plugin), whose "
        "time-slicing config advertises nvidia.com/gpu.shared instead (renameByDefault: true), so the pod stays "
        "Pending. Ask for nvidia.com/gpu.shared (eks-hybrid-gpu:cohorts[0]); a shared replica is not an "
        "exclusive GPU."
    )


def test_more_than_one_shared_replica(harness: Harness) -> None:
    items = [*shared_stack(harness), workload(harness, "nvidia.com/gpu.shared", 2)]
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, items).one()
    assert "requests 2 nvidia.com/gpu.shared on kubernetes:helm.sh/v4:Chart 'plugin-chart'" in message


def test_fail_requests_greater_than_one_must_stay_true(harness: Harness) -> None:
    items = shared_stack(harness)
    data = child(items, "ConfigMap", TS_CONFIGS).props["data"]
    data["time-slicing"] = data["time-slicing"].replace(
        "failRequestsGreaterThanOne: true", "failRequestsGreaterThanOne: false"
    )
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, items).one()
    assert message.startswith(
        f"kubernetes:core/v1:ConfigMap 'gpu-system/{TS_CONFIGS}' {BY_CHART} data.time-slicing: "
        "sharing.timeSlicing.failRequestsGreaterThanOne is false."
    )
    assert "Keep it true (eks-hybrid-gpu:cohorts[0].sharing)." in message
    config = {"requireFailRequestsGreaterThanOne": False}
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, items, config))


def test_fail_requests_greater_than_one_in_release_values(harness: Harness) -> None:
    values = harness.values("device-plugin-time-slicing-values.yaml")
    text = values["config"]["map"]["time-slicing"]
    values["config"]["map"]["time-slicing"] = text.replace(
        "failRequestsGreaterThanOne: true", "failRequestsGreaterThanOne: false"
    )
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", values)
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, [release]).one()
    assert message.startswith(
        "kubernetes:helm.sh/v3:Release 'plugin-release' values config.map.time-slicing: sharing.timeSlicing."
        "failRequestsGreaterThanOne is false."
    )


def test_time_slicing_config_not_selected_by_default(harness: Harness) -> None:
    items = shared_stack(harness)
    child(items, "ConfigMap", TS_CONFIGS).props["data"]["default"] = "version: v1\n"
    set_env(items, "DEFAULT_CONFIG", "default")
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, items).one()
    assert message.startswith(
        f"{TS_DAEMONSET} {BY_CHART}: time-slicing config(s) time-slicing are not selected by the config-manager "
        "env DEFAULT_CONFIG (values config.default) ('default' resolves to 'default'), so they only apply to nodes "
        "labelled nvidia.com/device-plugin.config=<name>; an unattached config changes nothing."
    )
    values = harness.values("device-plugin-time-slicing-values.yaml")
    values["config"]["map"]["default"] = "version: v1\n"
    values["config"]["default"] = "default"
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", values)
    # A Release this program did not stamp declares no cohort sharing: a config that config.default does not
    # select applies to nodes labelled nvidia.com/device-plugin.config=time-slicing (the plugin's per-node selection).
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, [release]))


def test_declared_time_slicing_without_config(harness: Harness) -> None:
    items = harness.device_plugin(sharing="time-slicing")
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, items).one()
    assert message.startswith(
        "kubernetes:helm.sh/v4:Chart 'plugin-chart' belongs to a cohort declared time-slicing "
        "(eks-hybrid-gpu.io/sharing) but its rendered plugin DaemonSet mounts no device-plugin ConfigMap "
        "(available-configs), so no time-slicing config is attached and the GPUs stay exclusive."
    )
    assert "eks-hybrid-gpu:cohorts[0].sharing.mode" in message


def test_unattached_config_map(harness: Harness) -> None:
    rendered = child(shared_stack(harness), "ConfigMap", TS_CONFIGS).props
    loose = copy.deepcopy(rendered)
    loose["metadata"] = {"name": "time-slicing-config", "namespace": "gpu-system"}
    items = [*harness.device_plugin(), harness.item(loose)]
    assert harness.stack(TIME_SLICING_CONFIG_ATTACHED, items).one() == (
        "kubernetes:core/v1:ConfigMap 'gpu-system/time-slicing-config' holds a time-slicing device-plugin config "
        "(time-slicing) that no device plugin references (config.name), so it changes nothing: the GPUs stay "
        "exclusive. Attach it through the device plugin's config.name/config.default "
        "(eks-hybrid-gpu:cohorts[i].sharing), or delete it."
    )
    # config.name: the rendered plugin mounts it as its available-configs volume.
    items = [*harness.device_plugin(), harness.item(loose)]
    plugin = child(items, "DaemonSet", "/hybrid-gpu-plugin-nvidia-device-plugin")
    pod(plugin.props)["volumes"].append({"name": "available-configs", "configMap": {"name": "time-slicing-config"}})
    harness.passes(harness.stack(TIME_SLICING_CONFIG_ATTACHED, items))
    values = harness.values("device-plugin-values.yaml")
    values["config"] = {"name": "time-slicing-config", "default": "time-slicing"}
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", values)
    harness.passes(harness.stack(TIME_SLICING_CONFIG_ATTACHED, [release, harness.item(loose)]))


def test_sharing_unknowns_do_not_crash(harness: Harness) -> None:
    items = shared_stack(harness)
    child(items, "ConfigMap", TS_CONFIGS).props["data"] = UNKNOWN_OBJECT
    items.append(workload(harness, "nvidia.com/gpu"))
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, items))
    pod(child(items, "DaemonSet", "/hybrid-gpu-ts-nvidia-device-plugin").props)["volumes"] = UNKNOWN_OBJECT
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, items))
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", {"config": UNKNOWN_OBJECT})
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, [release, items[-1]]))
    release.props["values"] = UNKNOWN_OBJECT
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, [release, items[-1]]))


def test_real_time_slicing_plugin_of_a_captured_preview(harness: Harness) -> None:
    """DevicePlugin with time-slicing, exactly as the analyzer received it (Chart empty, ConfigMap rendered)."""
    items = [i for i in real_items("plugin-variants") if "mig" not in i.name and "gfd" not in i.name]
    chart = next(i for i in items if i.name == "ts-chart")
    assert chart.props == {}
    outcome = harness.stack(SHARED_GPU_RESOURCE_NAME, items)
    harness.passes(outcome)
    exclusive = workload(harness, "nvidia.com/gpu")
    exclusive.props["metadata"]["labels"]["eks-hybrid-gpu.io/cohort"] = "ts"
    message = harness.stack(SHARED_GPU_RESOURCE_NAME, [*items, exclusive]).one()
    assert "only runs on kubernetes:helm.sh/v4:Chart 'ts-chart' (cohort ts), whose time-slicing config" in message


# --------------------------------------------------------------------------- MIG


def mig_stack(harness: Harness, strategy: str = "mixed", sharing: str = "mig-mixed") -> list[Item]:
    """A Chart v4 device plugin as captured with migStrategy mixed; its rendered MIG_STRATEGY set to ``strategy``."""
    items = harness.device_plugin(sharing=sharing, variant="mig")
    set_env(items, "MIG_STRATEGY", strategy)
    return items


def mig_workload(harness: Harness, profile: str, product: str | None = "NVIDIA-A100-SXM4-40GB") -> Item:
    item = workload(harness, f"nvidia.com/mig-{profile}")
    if product is not None:
        pod(item.props)["nodeSelector"]["nvidia.com/gpu.product"] = product
    return item


def test_mixed_strategy_and_a_valid_profile_pass(harness: Harness) -> None:
    items = [*mig_stack(harness), mig_workload(harness, "1g.5gb")]
    outcome = harness.stack(MIG_STRATEGY_CONSISTENT, items)
    harness.passes(outcome)


def test_mig_request_on_a_none_strategy_cohort(harness: Harness) -> None:
    items = [*mig_stack(harness, "none", "none"), mig_workload(harness, "1g.5gb")]
    assert harness.stack(MIG_STRATEGY_CONSISTENT, items).one() == (
        "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke': container 'gpu-check' requests "
        "nvidia.com/mig-1g.5gb, but it only runs on kubernetes:helm.sh/v4:Chart 'plugin-chart' (cohort plugin), "
        "whose migStrategy is 'none': only the mixed strategy advertises nvidia.com/mig-<profile>, and changing a "
        "request does not create MIG instances. Prepare the MIG geometry, then set "
        "eks-hybrid-gpu:cohorts[i].sharing.migStrategy to mixed, or request nvidia.com/gpu "
        "(eks-hybrid-gpu:cohorts[0])."
    )
    # The local stack's plugin renders MIG_STRATEGY=none too.
    items = [*harness.device_plugin(), mig_workload(harness, "1g.5gb")]
    assert "whose migStrategy is 'none'" in harness.stack(MIG_STRATEGY_CONSISTENT, items).one()


def test_profile_of_another_sku(harness: Harness) -> None:
    items = [*mig_stack(harness), mig_workload(harness, "4g.40gb")]
    message = harness.stack(MIG_STRATEGY_CONSISTENT, items).one()
    assert (
        "requests nvidia.com/mig-4g.40gb: MIG profile '4g.40gb' is not among the A100-40GB profiles (1g.10gb, "
        "1g.5gb, 1g.5gb+me, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb); profiles are SKU-specific"
    ) in message
    outcome = harness.stack(
        MIG_STRATEGY_CONSISTENT,
        [*mig_stack(harness), mig_workload(harness, "4g.40gb", product=None)],
        config={"gpuModels": {"plugin": "A100-80GB"}},
    )
    harness.passes(outcome)


@pytest.mark.parametrize(
    ("profile", "product", "ok"),
    [
        ("3g.71gb", "NVIDIA-H200", True),
        ("7g.141gb", "NVIDIA-H200-NVL", True),
        ("3g.40gb", "NVIDIA-H200", False),
        ("1g.10gb.me", "NVIDIA-H100-80GB-HBM3", True),
        ("1g.18gb", "NVIDIA-H100-80GB-HBM3", False),
        ("2g.20gb", None, True),
        ("5g.50gb", None, False),
    ],
)
def test_profile_tables(harness: Harness, profile: str, product: str | None, ok: bool) -> None:
    items = [*mig_stack(harness), mig_workload(harness, profile, product)]
    outcome = harness.stack(MIG_STRATEGY_CONSISTENT, items)
    if ok:
        harness.passes(outcome)
    else:
        assert outcome.violations


def test_strategy_disagrees_with_cohort_sharing(harness: Harness) -> None:
    message = harness.stack(MIG_STRATEGY_CONSISTENT, mig_stack(harness, "single", "mig-mixed")).one()
    assert message == (
        "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-mig-nvidia-device-plugin' (rendered by "
        "kubernetes:helm.sh/v4:Chart 'plugin-chart') container 'nvidia-device-plugin-ctr' env MIG_STRATEGY is "
        "'single' but the cohort is declared mig-mixed, so the plugin advertises the wrong MIG resources. Set "
        "eks-hybrid-gpu:cohorts[0].sharing.migStrategy to mixed after preparing the MIG geometry."
    )


def test_strategy_disagrees_in_release_values(harness: Harness) -> None:
    values = harness.values("device-plugin-values.yaml")
    values["migStrategy"] = "single"
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", values)
    ledger = harness.ledger({"plugin": harness.cohort_entry("device-plugin", DP_SELECTOR, "mig-mixed")})
    # A Release renders nothing visible: its cohort comes from a workload's selector only, so no sharing is known.
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, [release, harness.item(ledger, name="ledger")]))
    item = mig_workload(harness, "1g.5gb")
    assert "whose migStrategy is 'single'" in harness.stack(MIG_STRATEGY_CONSISTENT, [release, item]).one()


def test_real_plugin_rendered_with_a_strategy_its_cohort_does_not_declare(harness: Harness) -> None:
    """migStrategy single in Chart v4 values: the analyzer sees it only as the rendered MIG_STRATEGY env."""
    message = harness.stack(MIG_STRATEGY_CONSISTENT, real_items("plugin-variants")).one()
    assert message == (
        "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-gfd-nvidia-device-plugin' (rendered by "
        "kubernetes:helm.sh/v4:Chart 'gfd-chart') container 'nvidia-device-plugin-ctr' env MIG_STRATEGY is "
        "'single' but the cohort is declared none, not MIG. Set eks-hybrid-gpu:cohorts[2].sharing.migStrategy to "
        "match the prepared GPUs (none unless MIG is enabled)."
    )


def test_no_mixed_owner_anywhere(harness: Harness) -> None:
    item = mig_workload(harness, "1g.5gb")
    pod(item.props)["nodeSelector"] = {"eks.amazonaws.com/compute-type": "hybrid"}
    del item.props["metadata"]["labels"]["eks-hybrid-gpu.io/cohort"]
    message = harness.stack(MIG_STRATEGY_CONSISTENT, [*mig_stack(harness, "none", "none"), item]).one()
    assert "but no device plugin or Operator in this stack uses the mixed MIG strategy" in message


def test_mig_unknowns_do_not_crash(harness: Harness) -> None:
    items = mig_stack(harness)
    set_env(items, "MIG_STRATEGY", UNKNOWN_STRING)
    item = mig_workload(harness, "1g.5gb")
    pod(item.props)["nodeSelector"] = UNKNOWN_OBJECT
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, [*items, item]))
    release = harness.helm_release("plugin-release", "nvidia-device-plugin", "0.20.0", {})
    release.props["values"] = UNKNOWN_OBJECT
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, [release, mig_workload(harness, "1g.5gb")]))


def test_mig_not_applicable(harness: Harness) -> None:
    outcome = harness.stack(MIG_STRATEGY_CONSISTENT, harness.dra())
    assert harness.not_applicable(outcome) == "no device plugin and no nvidia.com/mig-* request"


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA-A100-PCIE-80GB", "A100-80GB"),
        ("a100 80gb", "A100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("H100-SXM5-94GB", None),
        ("NVIDIA-H200", "H200-141GB"),
        ("H200-141GB", "H200-141GB"),
        ("NVIDIA-A100", None),
        ("Tesla-T4", None),
    ],
)
def test_gpu_model_names(text: str, model: str | None) -> None:
    assert normalize_gpu_model(text) == model


def test_profile_names() -> None:
    assert normalize_profile("nvidia.com/mig-1g.5gb.me") == "1g.5gb+me"
    assert set(MIG_PROFILES["A100-40GB"]) >= {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
    assert "4g.40gb" not in MIG_PROFILES["A100-40GB"]
    assert "4g.40gb" in MIG_PROFILES["A100-80GB"]
