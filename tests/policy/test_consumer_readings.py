"""Values read as their consumers read them, round three: one table per class, a refused stack and its clean twin.

Each stack comes from a real `helm template` of the pinned archives with mutated values (tests/support/charts.py),
or from the guide's pasted manifests; the render is checked first for what the chart really does, then the pack is
run on it (and, where a Release carries the same values, on the Release). The consumer of each value:

- FEATURE_GATES set in env lists: the DRA chart copies `kubeletPlugin.containers.*.env` after its own gates, the
  Operator appends `draDriver.*.env`; the kubelet keeps the last entry of a name; the driver parses that one.
- the device plugin's config-manager: `DEFAULT_CONFIG`, else the entry named `default` (NamedConfigFallback);
  `sharing.mps` is the same ReplicatedResources as time-slicing, so `renameByDefault` renames there too.
- the scheduler: a required node affinity `In` on `nvidia.com/device-plugin.config` binds a pod to those configs.
- the DRA chart: `resources.gpus.enabled=false` renders no `gpus` container, so no GPU owner.
- the ServiceAccount admission plugin: an unset pod field leaves the token to the ServiceAccount.
- containerd/OCI: `@sha512:` pins an image as `@sha256:` does.
- the kubelet's DRA manager: a container that lists no claim gets no device, so `NVIDIA_VISIBLE_DEVICES=void` there
  overrides nothing.
- the Operator chart: `mig.strategy: mixed` reaches the ClusterPolicy and its device plugin.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from policy.gpu_allocation.rules.dra import DRA_EXTENDED_RESOURCE_NAME_UNIQUE, DRA_FEATURE_GATES_ALLOWLISTED
from policy.gpu_allocation.rules.ownership import OPERATOR_OPERAND_TOLERATIONS_REVIEWED, SINGLE_ALLOCATION_OWNER
from policy.gpu_allocation.rules.plugin_configs import PLUGIN_CONFIG_LABEL
from policy.gpu_allocation.rules.sharing import MIG_STRATEGY_CONSISTENT, SHARED_GPU_RESOURCE_NAME
from policy.gpu_allocation.rules.workloads import (
    NO_VISIBLE_DEVICES_OVERRIDE,
    SMOKE_JOB_HARDENED,
    SMOKE_JOB_TOKEN_UNMOUNTED,
)
from tests.support import charts
from tests.support.policy_harness import ROOT, Harness, Item, Outcome, type_of

from .helm import attempt
from .test_foreign_stacks import (
    DIGEST,
    affinity,
    device_plugin,
    dra,
    foreign,
    gpu_workload,
    selector,
    smoke_job,
)
from .test_time_slicing_selection import EXCLUSIVE, SHARED

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives

PLUGIN = selector("device-plugin")
ALPHA_ON = "DynamicMIG=true,"
ALPHA_OFF = "DynamicMIG=false,"


def gates_env(text: str) -> list[dict[str, str]]:
    return [{"name": "FEATURE_GATES", "value": text}]


def containers_of(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in manifest["spec"]["template"]["spec"]["containers"]}


def kubelet_plugin(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in rendered if m["kind"] == "DaemonSet" and m["metadata"]["name"].endswith("kubelet-plugin"))


def last_env(container: dict[str, Any], name: str) -> Any:
    """The value the kubelet gives a container for `name`: the last entry of that name."""
    return [e.get("value") for e in container.get("env", []) if e["name"] == name][-1]


def operator_render(values: dict[str, Any]) -> list[dict[str, Any]]:
    objects, error = attempt(
        "gpu-operator", charts.gpu_operator(), "gpu-operator", values, ("resource.k8s.io/v1/DeviceClass",), timeout=120
    )
    assert error == ""
    return objects


def operator_values(mode: str, **changes: Any) -> dict[str, Any]:
    values = Harness.values(f"operator-{mode}-values.yaml")
    for dotted, value in changes.items():
        target = values
        *path, last = dotted.split("__")
        for key in path:
            target = target.setdefault(key, {})
        target[last] = value
    return values


def operator_release(harness: Harness, values: dict[str, Any]) -> Item:
    return harness.helm("gpu-operator", "gpu-operator", "v26.7.0", values, resource_type=harness.release)


def resource_check(harness: Harness, policy: Any, manifest: dict[str, Any]) -> Outcome:
    return harness.resource(policy, type_of(manifest), manifest, name=manifest["metadata"]["name"])


def release_check(harness: Harness, policy: Any, item: Item) -> Outcome:
    return harness.resource(policy, item.resource_type, item.props, name=item.name)


# --------------------------------------------------------------------------- feature gates in env lists


def dra_values_with_env(text: str) -> dict[str, Any]:
    values = Harness.values("dra-values.yaml")
    values["kubeletPlugin"]["containers"]["gpus"]["env"] = gates_env(text)
    return values


@pytest.mark.parametrize(("text", "refused"), [(ALPHA_ON, True), (ALPHA_OFF, False)], ids=["alpha-on", "alpha-off"])
def test_a_gate_set_in_the_dra_charts_env_list_is_judged_in_the_render_and_the_release(
    harness: Harness, text: str, refused: bool
) -> None:
    rendered = dra(kubeletPlugin__containers__gpus__env=gates_env(text))
    plugin = kubelet_plugin(rendered)
    # featureGates is {}: the chart renders no FEATURE_GATES of its own, the env list's entry is the one.
    assert last_env(containers_of(plugin)["gpus"], "FEATURE_GATES") == text
    on_render = resource_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, plugin)
    release = harness.helm_release("dra", "dra-driver-nvidia-gpu", "0.4.1", dra_values_with_env(text))
    on_release = release_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, release)
    if not refused:
        harness.passes(on_render)
        harness.passes(on_release)
        return
    assert "container 'gpus' env FEATURE_GATES DynamicMIG" in on_render.one()
    message = on_release.one()
    assert "Release 'dra'" in message
    assert "values kubeletPlugin.containers.gpus.env FEATURE_GATES DynamicMIG" in message
    assert "Alpha gate of DRA driver 0.4" in message
    assert "Remove DynamicMIG (the FEATURE_GATES entry of values kubeletPlugin.containers.gpus.env)" in message


def test_the_env_lists_entry_overrides_the_charts_own_gates_for_that_container(harness: Harness) -> None:
    """featureGates still reaches the other containers, so it is judged too; the env list's last entry wins."""
    plugin = kubelet_plugin(
        dra(featureGates={"DynamicMIG": False}, kubeletPlugin__containers__gpus__env=gates_env(ALPHA_ON))
    )
    gpus = containers_of(plugin)["gpus"]
    assert [e["value"] for e in gpus["env"] if e["name"] == "FEATURE_GATES"] == ["DynamicMIG=false,", ALPHA_ON]
    assert "DynamicMIG" in resource_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, plugin).one()


def test_a_dra_env_list_whose_container_is_not_rendered_is_not_judged(harness: Harness) -> None:
    values = Harness.values("dra-values.yaml")
    values["kubeletPlugin"]["containers"]["computeDomains"] = {"env": gates_env(ALPHA_ON)}
    rendered = dra(kubeletPlugin__containers__computeDomains__env=gates_env(ALPHA_ON))
    assert "compute-domains" not in containers_of(kubelet_plugin(rendered))  # resources.computeDomains.enabled: false
    release = harness.helm_release("dra", "dra-driver-nvidia-gpu", "0.4.1", values)
    harness.passes(release_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, release))


def test_a_dra_env_gate_from_value_from_cannot_be_judged(harness: Harness) -> None:
    values = Harness.values("dra-values.yaml")
    values["kubeletPlugin"]["containers"]["gpus"]["env"] = [
        {"name": "FEATURE_GATES", "valueFrom": {"configMapKeyRef": {"name": "gates", "key": "FEATURE_GATES"}}}
    ]
    release = harness.helm_release("dra", "dra-driver-nvidia-gpu", "0.4.1", values)
    message = release_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, release).one()
    assert "values kubeletPlugin.containers.gpus.env FEATURE_GATES" in message
    assert "valueFrom" in message
    assert "fail closed" in message


@pytest.mark.parametrize(("text", "refused"), [(ALPHA_ON, True), (ALPHA_OFF, False)], ids=["alpha-on", "alpha-off"])
def test_a_gate_set_in_the_operators_dra_env_list_is_judged_in_the_release_and_the_gpucluster(
    harness: Harness, text: str, refused: bool
) -> None:
    values = operator_values("gpu-cluster", draDriver__gpus={"kubeletPlugin": {"env": gates_env(text)}})
    cluster = next(o for o in operator_render(values) if o["kind"] == "GPUCluster")
    assert cluster["spec"]["draDriver"]["gpus"]["kubeletPlugin"]["env"] == gates_env(text)
    assert "featureGates" not in cluster["spec"]["draDriver"]
    on_cr = resource_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, cluster)
    on_release = release_check(harness, DRA_FEATURE_GATES_ALLOWLISTED, operator_release(harness, values))
    if not refused:
        harness.passes(on_cr)
        harness.passes(on_release)
        return
    assert "spec.draDriver.gpus.kubeletPlugin.env FEATURE_GATES DynamicMIG" in on_cr.one()
    message = on_release.one()
    assert "values draDriver.gpus.kubeletPlugin.env FEATURE_GATES DynamicMIG" in message
    assert "DRA driver 0.5.0" in message


# --------------------------------------------------------------------------- the plugin's named-config fallback


def judge_sharing(harness: Harness, manifests: list[dict[str, Any]]) -> Outcome:
    return harness.stack(SHARED_GPU_RESOURCE_NAME, foreign(manifests))


def unlabelled(resource: str, count: int = 1) -> dict[str, Any]:
    """A workload on the plugin cohort's nodes that carry no nvidia.com/device-plugin.config label."""
    workload = gpu_workload(resource, PLUGIN, count)
    workload["spec"]["template"]["spec"]["affinity"] = affinity(
        {"key": PLUGIN_CONFIG_LABEL, "operator": "DoesNotExist"}
    )
    return workload


@pytest.mark.parametrize(
    ("configs", "refused"),
    [({"default": SHARED, "exclusive": EXCLUSIVE}, True), ({"default": EXCLUSIVE, "shared": SHARED}, False)],
    ids=["default-entry-shared", "default-entry-exclusive"],
)
def test_without_config_default_the_entry_named_default_decides_unlabelled_nodes(
    harness: Harness, configs: dict[str, str], refused: bool
) -> None:
    rendered = device_plugin(config__map=configs)
    daemonset = next(m for m in rendered if m["kind"] == "DaemonSet")
    init = daemonset["spec"]["template"]["spec"]["initContainers"][0]
    assert last_env(init, "DEFAULT_CONFIG") in (None, "")  # no config.default: the config-manager falls back
    assert last_env(init, "FALLBACK_STRATEGIES") == "named,single"
    outcome = judge_sharing(harness, [*rendered, unlabelled("nvidia.com/gpu")])
    release = harness.helm_release(
        "plugin",
        "nvidia-device-plugin",
        "0.20.0",
        {**Harness.values("device-plugin-values.yaml"), "config": {"map": configs}},
    )
    on_release = harness.stack(SHARED_GPU_RESOURCE_NAME, [release, *foreign([unlabelled("nvidia.com/gpu")])])
    if not refused:
        harness.passes(outcome)
        harness.passes(on_release)
        return
    for message in (outcome.one(), on_release.one()):
        assert "container 'server' requests nvidia.com/gpu" in message
        assert "config advertises nvidia.com/gpu.shared instead" in message


# --------------------------------------------------------------------------- MPS renames as time-slicing does

MPS = """version: v1
sharing:
  mps:
    renameByDefault: true
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""
MPS_KEEPS_NAME = MPS.replace("renameByDefault: true", "renameByDefault: false")


@pytest.mark.parametrize(("config", "refused"), [(MPS, True), (MPS_KEEPS_NAME, False)], ids=["rename", "no-rename"])
def test_mps_with_rename_by_default_advertises_the_shared_name(harness: Harness, config: str, refused: bool) -> None:
    rendered = device_plugin(config__map={"mps": config}, config__default="mps")
    assert any(m["kind"] == "DaemonSet" and "mps-control-daemon" in m["metadata"]["name"] for m in rendered)
    outcome = judge_sharing(harness, [*rendered, gpu_workload("nvidia.com/gpu", PLUGIN)])
    if not refused:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "whose MPS config advertises nvidia.com/gpu.shared instead" in message
    harness.passes(judge_sharing(harness, [*rendered, gpu_workload("nvidia.com/gpu.shared", PLUGIN)]))


def test_mps_fails_requests_greater_than_one_unless_it_says_otherwise(harness: Harness) -> None:
    """The plugin sets an unset MPS failRequestsGreaterThanOne to true: no 'keep it true' finding, a 2-replica ask
    fails."""
    rendered = device_plugin(config__map={"mps": MPS}, config__default="mps")
    message = judge_sharing(harness, [*rendered, gpu_workload("nvidia.com/gpu.shared", PLUGIN, 2)]).one()
    assert "whose MPS config sets failRequestsGreaterThanOne: true, so the allocation fails" in message
    relaxed = device_plugin(
        config__map={"mps": MPS.replace("  mps:\n", "  mps:\n    failRequestsGreaterThanOne: false\n")},
        config__default="mps",
    )
    message = judge_sharing(harness, relaxed).one()
    assert "sharing.mps.failRequestsGreaterThanOne is false" in message


# --------------------------------------------------------------------------- node affinity selects a config


def pinned_by_affinity(resource: str, configs: list[str]) -> dict[str, Any]:
    workload = gpu_workload(resource, PLUGIN)
    workload["spec"]["template"]["spec"]["affinity"] = affinity(
        {"key": PLUGIN_CONFIG_LABEL, "operator": "In", "values": configs}
    )
    return workload


@pytest.mark.parametrize(
    ("configs", "refused"), [(["shared"], True), (["exclusive"], False), (["shared", "exclusive"], False)]
)
def test_required_node_affinity_binds_a_workload_to_its_configs(
    harness: Harness, configs: list[str], refused: bool
) -> None:
    rendered = device_plugin(config__map={"exclusive": EXCLUSIVE, "shared": SHARED}, config__default="exclusive")
    outcome = judge_sharing(harness, [*rendered, pinned_by_affinity("nvidia.com/gpu", configs)])
    if not refused:
        harness.passes(outcome)
        return
    assert f"config 'shared' (its {PLUGIN_CONFIG_LABEL} node label) advertises nvidia.com/gpu.shared" in outcome.one()
    harness.passes(judge_sharing(harness, [*rendered, pinned_by_affinity("nvidia.com/gpu.shared", configs)]))


# --------------------------------------------------------------------------- ComputeDomain-only DRA is no GPU owner


def compute_domains_only(gpus: bool) -> dict[str, Any]:
    return {"resources": {"gpus": {"enabled": gpus}, "computeDomains": {"enabled": True}}}


@pytest.mark.parametrize(("gpus", "refused"), [(True, True), (False, False)], ids=["gpus-on", "gpus-off"])
def test_a_dra_driver_without_gpus_next_to_the_plugin_is_no_second_owner(
    harness: Harness, gpus: bool, refused: bool
) -> None:
    on_plugin_nodes = {"kubeletPlugin__nodeSelector": PLUGIN, "resources__gpus__enabled": gpus}
    rendered = dra(resources__computeDomains__enabled=True, **on_plugin_nodes)
    plugin = kubelet_plugin(rendered)
    assert ("gpus" in containers_of(plugin)) is gpus
    assert any(m["kind"] == "DeviceClass" and m["metadata"]["name"] == "gpu.nvidia.com" for m in rendered) is gpus
    outcome = harness.stack(SINGLE_ALLOCATION_OWNER, foreign([*device_plugin(), *rendered]))
    values = {**Harness.values("dra-values.yaml"), **compute_domains_only(gpus)}
    values["kubeletPlugin"]["nodeSelector"] = PLUGIN
    releases = [
        harness.helm_release("dra", "dra-driver-nvidia-gpu", "0.4.1", values),
        harness.helm_release("plugin", "nvidia-device-plugin", "0.20.0", Harness.values("device-plugin-values.yaml")),
    ]
    on_releases = harness.stack(SINGLE_ALLOCATION_OWNER, releases)
    if not refused:
        harness.passes(outcome)
        harness.passes(on_releases)
        return
    message = outcome.one()
    assert "DaemonSet 'gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin' (dra, nodeSelector" in message
    assert "can select the same nodes" in message
    assert "can select the same nodes" in on_releases.one()


# --------------------------------------------------------------------------- ServiceAccount tokens


def job_on_account(account: str | None) -> dict[str, Any]:
    job = smoke_job()
    pod = job["spec"]["template"]["spec"]
    pod.pop("automountServiceAccountToken")
    if account is not None:
        pod["serviceAccountName"] = account
    return job


def service_account(automount: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "gpu-smoke", "namespace": "ai-workloads"},
    }
    if automount is not None:
        manifest["automountServiceAccountToken"] = automount
    return manifest


@pytest.mark.parametrize(
    ("automount", "refused"), [(False, False), (True, True), (None, True)], ids=["false", "true", "unset"]
)
def test_a_smoke_job_leaving_the_token_to_its_service_account_gets_what_the_account_says(
    harness: Harness, automount: Any, refused: bool
) -> None:
    job = job_on_account("gpu-smoke")
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, job))  # the pod leaves it to the account
    outcome = harness.stack(SMOKE_JOB_TOKEN_UNMOUNTED, foreign([job, service_account(automount)]))
    if not refused:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "kubernetes:batch/v1:Job 'ai-workloads/hybrid-gpu-plugin-smoke'" in message
    assert "ServiceAccount 'gpu-smoke' decides" in message
    assert f"its automountServiceAccountToken is {'true' if automount else 'null'}" in message
    assert "Set automountServiceAccountToken: false" in message


def test_a_service_account_that_is_not_in_the_stack_cannot_be_told(harness: Harness) -> None:
    message = harness.stack(SMOKE_JOB_TOKEN_UNMOUNTED, foreign([job_on_account("gpu-smoke")])).one()
    assert "not in this stack" in message
    assert "fail closed" in message


def default_account_patch(automount: bool) -> dict[str, Any]:
    """What a stack writes to stop the namespace's own `default` ServiceAccount from mounting tokens."""
    manifest = {**service_account(automount), "kind": "ServiceAccountPatch"}
    manifest["metadata"] = {"name": "default", "namespace": "ai-workloads"}
    return manifest


@pytest.mark.parametrize(
    ("account", "refused"),
    [(None, "the namespace's own"), (False, None), (True, "its automountServiceAccountToken is true")],
    ids=["unmanaged", "patched-false", "patched-true"],
)
def test_the_default_service_account_decides_like_any_other(harness: Harness, account: Any, refused: Any) -> None:
    """The pod on `default` leaving the field unset gets what that account says (shouldAutomount), as any pod."""
    job = job_on_account(None)
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, job))  # the pod leaves it to the account
    manifests = [job] if account is None else [job, default_account_patch(account)]
    outcome = harness.stack(SMOKE_JOB_TOKEN_UNMOUNTED, foreign(manifests))
    if refused is None:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "ServiceAccount 'default' decides" in message
    assert refused in message
    assert "Set automountServiceAccountToken: false in the Job's pod template" in message


def test_a_pod_that_says_true_is_refused_whatever_its_account(harness: Harness) -> None:
    job = smoke_job()
    job["spec"]["template"]["spec"]["automountServiceAccountToken"] = True
    message = harness.manifest_check(SMOKE_JOB_HARDENED, job).one()
    assert "automountServiceAccountToken is true" in message
    harness.passes(harness.stack(SMOKE_JOB_TOKEN_UNMOUNTED, foreign([job, default_account_patch(False)])))


# --------------------------------------------------------------------------- registered OCI digests


@pytest.mark.parametrize(
    ("image", "refused"),
    [
        ("registry.example.invalid/approved/gpu-smoke@sha512:" + "b" * 128, False),
        ("registry.example.invalid/approved/gpu-smoke:1.0@sha512:" + "b" * 128, False),
        ("registry.example.invalid/approved/gpu-smoke@sha512:" + "b" * 64, True),
        ("registry.example.invalid/approved/gpu-smoke@sha384:" + "b" * 96, True),
        ("registry.example.invalid/approved/gpu-smoke@sha512:" + "B" * 128, True),
    ],
    ids=["sha512", "tag-and-sha512", "sha512-short", "sha384-unregistered", "upper-case"],
)
def test_an_image_pinned_by_any_registered_oci_digest_is_pinned(harness: Harness, image: str, refused: bool) -> None:
    job = smoke_job()
    job["spec"]["template"]["spec"]["containers"][0]["image"] = image
    outcome = harness.manifest_check(SMOKE_JOB_HARDENED, job)
    if refused:
        assert "not pinned by an @sha256: digest" in outcome.one()
    else:
        harness.passes(outcome)


# --------------------------------------------------------------------------- void in a container without a claim


def dra_job(sidecar_claims: bool) -> dict[str, Any]:
    job = Harness.find("seed-smoke-jobs.yaml", "Job", "hybrid-gpu-dra-smoke")
    pod = job["spec"]["template"]["spec"]
    pod["containers"][0]["image"] = DIGEST
    sidecar: dict[str, Any] = {
        "name": "log-shipper",
        "image": DIGEST,
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
    }
    if sidecar_claims:
        sidecar["resources"] = {"claims": copy.deepcopy(pod["containers"][0]["resources"]["claims"])}
    pod["containers"].append(sidecar)
    return job


@pytest.mark.parametrize(("claims", "refused"), [(True, True), (False, False)], ids=["lists-claim", "no-claim"])
def test_void_in_a_container_that_lists_no_claim_is_no_override(harness: Harness, claims: bool, refused: bool) -> None:
    outcome = harness.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, dra_job(claims))
    if not refused:
        harness.passes(outcome)
        return
    assert "container 'log-shipper' gets GPUs through DRA claim(s)" in outcome.one()


def test_a_visible_devices_value_other_than_void_in_such_a_container_is_still_refused(harness: Harness) -> None:
    job = dra_job(False)
    job["spec"]["template"]["spec"]["containers"][1]["env"][0]["value"] = "all"
    assert (
        "container 'log-shipper' gets GPUs through the pod's DRA resourceClaims"
        in harness.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, job).one()
    )


# --------------------------------------------------------------------------- the Operator's mig.strategy


@pytest.mark.parametrize(("strategy", "refused"), [("mixed", False), ("single", True)])
def test_the_operator_releases_mig_strategy_reaches_its_device_plugin(
    harness: Harness, strategy: str, refused: bool
) -> None:
    values = operator_values("cluster-policy", mig__strategy=strategy, devicePlugin__enabled=True)
    policy = next(o for o in operator_render(values) if o["kind"] == "ClusterPolicy")
    assert policy["spec"]["mig"]["strategy"] == strategy
    workload = foreign([gpu_workload("nvidia.com/mig-1g.10gb", {"eks.amazonaws.com/compute-type": "hybrid"})])
    on_release = harness.stack(MIG_STRATEGY_CONSISTENT, [operator_release(harness, values), *workload])
    on_cr = harness.stack(MIG_STRATEGY_CONSISTENT, [*foreign([policy]), *workload])
    if not refused:
        harness.passes(on_release)
        harness.passes(on_cr)
        return
    assert "no device plugin or Operator in this stack uses the mixed MIG strategy" in on_release.one()
    assert "no device plugin or Operator in this stack uses the mixed MIG strategy" in on_cr.one()


# --------------------------------------------------------------------------- review advisories


def test_the_review_items_are_advisories() -> None:
    assert OPERATOR_OPERAND_TOLERATIONS_REVIEWED.enforcement_level == EnforcementLevel.ADVISORY
    # Issue 40 made two classes mapping one name a refusal (tests/policy/test_name_mapping.py).
    assert DRA_EXTENDED_RESOURCE_NAME_UNIQUE.enforcement_level == EnforcementLevel.MANDATORY


@pytest.mark.parametrize(
    ("toleration", "warned"),
    [
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "workload.example.com/gpu-allocation", "operator": "Exists", "effect": "NoSchedule"}, False),
    ],
    ids=["every-taint", "every-noschedule-taint", "keyed"],
)
def test_operator_operands_that_tolerate_every_taint_are_reviewed(
    harness: Harness, toleration: dict[str, str], warned: bool
) -> None:
    values = operator_values("cluster-policy", daemonsets__tolerations=[toleration])
    policy = next(o for o in operator_render(values) if o["kind"] == "ClusterPolicy")
    assert policy["spec"]["daemonsets"]["tolerations"] == [toleration]
    on_release = harness.stack(OPERATOR_OPERAND_TOLERATIONS_REVIEWED, [operator_release(harness, values)])
    on_cr = harness.stack(OPERATOR_OPERAND_TOLERATIONS_REVIEWED, foreign([policy]))
    if not warned:
        harness.passes(on_release)
        harness.passes(on_cr)
        return
    assert "values daemonsets.tolerations" in on_release.one()
    message = on_cr.one()
    assert "kubernetes:nvidia.com/v1:ClusterPolicy 'cluster-policy': spec.daemonsets.tolerations" in message
    assert "tolerates every taint" in message
    assert "EKS Auto Mode nodes (nvidia.com/gpu:NoSchedule)" in message
    assert "nvidia.com/gpu.deploy.operands=false" in message


def dra_pinned_classes() -> list[dict[str, Any]]:
    objects, error = attempt(
        "dra",
        charts.dra_driver_pinned(),
        "gpu-dra-system",
        Harness.values("dra-values.yaml"),
        ("resource.k8s.io/v1/DeviceClass",),
        timeout=120,
    )
    assert error == ""
    return [o for o in objects if o["kind"] == "DeviceClass"]


@pytest.mark.parametrize("second", [True, False], ids=["two-classes", "one-class"])
def test_a_second_device_class_with_the_same_extended_resource_name_is_refused(harness: Harness, second: bool) -> None:
    classes = dra_pinned_classes()
    mapped = [c for c in classes if c["spec"].get("extendedResourceName") == "nvidia.com/gpu"]
    assert [c["metadata"]["name"] for c in mapped] == ["gpu.nvidia.com"]
    team = Harness.find("seed-dra-objects.yaml", "DeviceClass", "hybrid-full-gpu")
    if second:
        team["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_NAME_UNIQUE, foreign([*classes, team]))
    if not second:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "DeviceClass 'gpu.nvidia.com'" in message
    assert "DeviceClass 'hybrid-full-gpu'" in message
    assert "spec.extendedResourceName 'nvidia.com/gpu'" in message
    assert "Keep spec.extendedResourceName on exactly one of them" in message


# --------------------------------------------------------------------------- the pack's layers


def relative_imports(path: Path, package: str) -> set[str]:
    """The pack modules one file imports (TYPE_CHECKING imports included: a circle of types is a circle too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{module}.{alias.name}" for alias in node.names} | {module}
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            modules[".".join(parts[:-1])] = (path, ".".join(parts[:-1]))
        else:
            modules[".".join(parts)] = (path, ".".join(parts[:-1]))
    return {name: relative_imports(path, package) & set(modules) - {name} for name, (path, package) in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for target in sorted(graph[node]):
                if target == start:
                    found.append(path)
                elif target > start and target not in path:
                    stack.append((target, [*path, target]))
    return found


def test_the_packs_modules_import_one_way() -> None:
    graph = import_graph(ROOT / "policy" / "gpu_allocation")
    assert "gpu_allocation.rules.resource" in graph["gpu_allocation.rules.operator_crs"]
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_circle_of_types(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (package / "b.py").write_text("from .a import A\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]
