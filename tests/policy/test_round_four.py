"""Round four (issue #43): what each workload and Operator option will do on the node, one table per class.

Each class has a refused stack and a near-identical one that passes (and the policy applied to it), built from real
`helm template` renders of the pinned archives (tests/support/charts.py) where a chart is involved. The consumer whose
reading decides:

- the scheduler's NodeAffinity filter (nodeSelector AND one required term, terms ORed): where a pod may land, read
  once (`rules/shapes.node_selection`) for every workload kind;
- the DRA driver: not supported on EKS Auto Mode (the seed); MIG devices publish `profile` (`mig.go`), so a claim
  naming a profile its GPU lacks is never allocated;
- the device plugin 0.20.0: `.shared` on every resource a renaming time-slicing config lists, MIG ones included;
  the config-manager's `named` fallback when `DEFAULT_CONFIG` renders empty;
- the GPU Operator: no device plugin under GPUCluster; sandbox workloads (`vm-passthrough`) bind the GPUs to
  vfio-pci; `extraObjects` renders whatever it holds.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from policy.gpu_allocation.rules.dra import (
    DRA_CLAIM_ON_DRA_COHORT,
    DRA_EXTENDED_RESOURCE_NAME_UNIQUE,
    DRA_EXTENDED_RESOURCE_REQUEST_SERVED,
)
from policy.gpu_allocation.rules.ownership import (
    OPERATOR_CR_EXCLUSIVE,
    OPERATOR_DEVICE_PLUGIN_DISABLED,
    SINGLE_ALLOCATION_OWNER,
)
from policy.gpu_allocation.rules.shapes import POD_SPEC_PATHS
from policy.gpu_allocation.rules.sharing import MIG_STRATEGY_CONSISTENT, SHARED_GPU_RESOURCE_NAME
from policy.gpu_allocation.rules.targeting import NO_AUTO_MODE_TARGETING
from tests.support.policy_harness import Harness, type_of

from .test_consumer_readings import operator_render, operator_values
from .test_foreign_stacks import DIGEST, device_plugin, dra, foreign, selector, smoke_job
from .test_name_mapping import stack_cluster, team_class
from .test_time_slicing_selection import EXCLUSIVE, SHARED

FIELDS_OF = "{base}.nodeSelector / {base}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"

pytestmark = [pytest.mark.policy, pytest.mark.charts]

PREVIEW = "pulumi preview --policy-pack policy"
KINDS = ("Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")
API = {
    "Pod": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
}
COMPUTE = "eks.amazonaws.com/compute-type"


def workload(kind: str, pod: dict[str, Any], name: str = "inference") -> dict[str, Any]:
    """A workload of any kind around one pod spec, each keeping it where the API puts it."""
    manifest: dict[str, Any] = {
        "apiVersion": API[kind],
        "kind": kind,
        "metadata": {"name": name, "namespace": "ai-workloads"},
    }
    path = POD_SPEC_PATHS[kind]
    target = manifest
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = copy.deepcopy(pod)
    if kind == "CronJob":
        manifest["spec"]["schedule"] = "0 * * * *"
    return manifest


def claim_pod(
    node_selector: dict[str, str], node_affinity: dict[str, Any] | None = None, template: str = "single-large-gpu"
) -> dict[str, Any]:
    """A pod that claims a GPU through DRA (the guide's ResourceClaimTemplate)."""
    pod: dict[str, Any] = {
        "nodeSelector": node_selector,
        "containers": [{"name": "server", "image": DIGEST, "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
    }
    if node_affinity is not None:
        pod["affinity"] = node_affinity
    return pod


def terms(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    """A required node affinity of ORed terms."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


def says_next_command(message: str) -> None:
    assert PREVIEW in message, message


# --------------------------------------------------------------------------- 1. DRA claims aimed at EKS Auto Mode

HYBRID_TERM = [{"key": COMPUTE, "operator": "In", "values": ["hybrid"]}]
AUTO_ROUTES: dict[str, tuple[dict[str, str], dict[str, Any] | None, str]] = {
    "nodeSelector auto": ({COMPUTE: "auto"}, None, f"nodeSelector {COMPUTE}='auto'"),
    "karpenter nodepool": (
        {},
        terms([{"key": "karpenter.sh/nodepool", "operator": "Exists"}]),
        "required nodeAffinity term 0",
    ),
    "ORed auto term": (
        {},
        terms(HYBRID_TERM, [{"key": COMPUTE, "operator": "In", "values": ["auto"]}]),
        "required nodeAffinity term 1",
    ),
}
PINNED: dict[str, tuple[dict[str, str], dict[str, Any] | None]] = {
    "nodeSelector auto": (selector("dra"), None),
    "karpenter nodepool": (
        {},
        terms(
            [
                {"key": "karpenter.sh/nodepool", "operator": "Exists"},
                {"key": COMPUTE, "operator": "NotIn", "values": ["auto"]},
            ]
        ),
    ),
    "ORed auto term": ({}, terms(HYBRID_TERM, [{"key": COMPUTE, "operator": "NotIn", "values": ["auto"]}])),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("route", sorted(AUTO_ROUTES))
def test_a_claim_of_any_workload_aimed_at_auto_mode_is_refused(harness: Harness, kind: str, route: str) -> None:
    # The claim's DeviceClass is what the DRA chart really renders (gpu.nvidia.com), served by no Auto Mode node.
    classes = {m["metadata"]["name"] for m in dra() if m["kind"] == "DeviceClass"}
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= classes
    node_selector, node_affinity, detail = AUTO_ROUTES[route]
    manifest = workload(kind, claim_pod(node_selector, node_affinity))
    message = harness.manifest_check(NO_AUTO_MODE_TARGETING, manifest).one()
    token = type_of(manifest)
    assert message.startswith(f"{token} 'ai-workloads/inference' claims a GPU through DRA (gpu)")
    assert ".".join(POD_SPEC_PATHS[kind]) + ".nodeSelector" in message
    assert detail in message
    assert "reaches EKS Auto Mode" in message
    assert "pin the pod to the DRA cohort" in message
    says_next_command(message)
    twin_selector, twin_affinity = PINNED[route]
    harness.passes(
        harness.manifest_check(NO_AUTO_MODE_TARGETING, workload(kind, claim_pod(twin_selector, twin_affinity)))
    )


def test_a_claim_that_leaves_compute_type_open_is_judged_and_passes(harness: Harness) -> None:
    """The scheduler binds a claim only where a driver published devices: an open selection aims nowhere."""
    harness.passes(harness.manifest_check(NO_AUTO_MODE_TARGETING, workload("Job", claim_pod({}))))


# --------------------------------------------------------------------------- MIG: `.shared` replicas and DRA profiles

MIG_SHARED = """version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/mig-1g.18gb
        replicas: 2
"""


def mig_request(resource: str, product: str = "NVIDIA-H200") -> dict[str, Any]:
    pod = {
        "nodeSelector": {**selector("device-plugin"), "nvidia.com/gpu.product": product},
        "containers": [
            {"name": "server", "image": DIGEST, "resources": {"limits": {resource: 1}, "requests": {resource: 1}}}
        ],
    }
    return workload("Deployment", pod)


@pytest.mark.parametrize(
    ("resource", "refused"),
    [("nvidia.com/mig-1g.18gb.shared", False), ("nvidia.com/mig-1g.10gb.shared", True)],
    ids=["h200-profile", "h100-profile"],
)
def test_shared_replicas_of_a_mig_profile_name_their_profile(harness: Harness, resource: str, refused: bool) -> None:
    rendered = device_plugin(migStrategy="mixed", config__map={"mig-shared": MIG_SHARED}, config__default="mig-shared")
    plugin = next(m for m in rendered if m["kind"] == "DaemonSet" and m["metadata"]["name"].endswith("device-plugin"))
    env = {
        e["name"]: e.get("value") for c in plugin["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])
    }
    assert env["MIG_STRATEGY"] == "mixed"
    stack = foreign([*rendered, mig_request(resource)])
    outcome = harness.stack(MIG_STRATEGY_CONSISTENT, stack)
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, stack))
    if not refused:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "MIG profile '1g.10gb' is not among the H200-141GB profiles" in message


MIG_TEMPLATE = "mig-slice"


def mig_template(expression: str | None, device_class: str = "mig.nvidia.com") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if expression is not None:
        exactly["selectors"] = [{"cel": {"expression": expression}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": MIG_TEMPLATE, "namespace": "ai-workloads"},
        "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": exactly}]}}},
    }


def profile_is(profile: str) -> str:
    return f'device.attributes["gpu.nvidia.com"].profile == "{profile}"'


def mig_claim_stack(expression: str | None, kind: str = "Job") -> list[Any]:
    pod = claim_pod({**selector("dra"), "nvidia.com/gpu.product": "NVIDIA-H200"}, template=MIG_TEMPLATE)
    return foreign([*dra(), mig_template(expression), workload(kind, pod)])


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "CronJob"])
def test_a_dra_claim_for_a_mig_profile_the_cohorts_gpu_lacks_is_refused(harness: Harness, kind: str) -> None:
    message = harness.stack(MIG_STRATEGY_CONSISTENT, mig_claim_stack(profile_is("1g.10gb"), kind)).one()
    assert "'ai-workloads/inference': claim 'gpu'" in message
    assert f"ResourceClaimTemplate 'ai-workloads/{MIG_TEMPLATE}'" in message
    assert "spec.spec.devices.requests[0].exactly" in message
    assert "MIG profile '1g.10gb'" in message
    assert "not among the H200-141GB profiles" in message
    assert "Select a profile of the cohort's GPU" in message
    says_next_command(message)
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, mig_claim_stack(profile_is("1g.18gb"), kind)))


def test_a_mig_profile_the_selector_does_not_state_literally_cannot_be_judged(harness: Harness) -> None:
    expression = 'device.attributes["gpu.nvidia.com"].profile.startsWith("1g")'
    message = harness.stack(MIG_STRATEGY_CONSISTENT, mig_claim_stack(expression)).one()
    assert "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression" in message
    assert "cannot judge the object and refuses it (fail closed)" in message
    says_next_command(message)
    # Any MIG device, no profile named: the selector asks nothing the GPU lacks.
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, mig_claim_stack(None)))


def test_a_profile_named_in_a_mig_device_class_is_read_too(harness: Harness) -> None:
    custom = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "h100-small-mig"},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && "
                        "device.attributes['gpu.nvidia.com'].type == 'mig' && "
                        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
                    }
                }
            ]
        },
    }
    pod = claim_pod({**selector("dra"), "nvidia.com/gpu.product": "NVIDIA-H200"}, template=MIG_TEMPLATE)
    stack = foreign([*dra(), custom, mig_template(None, "h100-small-mig"), workload("Deployment", pod)])
    message = harness.stack(MIG_STRATEGY_CONSISTENT, stack).one()
    assert "DeviceClass 'h100-small-mig'" in message
    custom["spec"]["selectors"][0]["cel"]["expression"] = custom["spec"]["selectors"][0]["cel"]["expression"].replace(
        "1g.10gb", "1g.18gb"
    )
    stack = foreign([*dra(), custom, mig_template(None, "h100-small-mig"), workload("Deployment", pod)])
    harness.passes(harness.stack(MIG_STRATEGY_CONSISTENT, stack))


# --------------------------------------------------------------------------- the plugin's named fallback


@pytest.mark.parametrize(
    ("configs", "refused"),
    [({"default": SHARED, "spare": SHARED}, True), ({"default": EXCLUSIVE, "spare": SHARED}, False)],
    ids=["default-entry-renames", "default-entry-exclusive"],
)
def test_with_config_default_rendered_empty_the_entry_named_default_decides_the_smoke_jobs_name(
    harness: Harness, configs: dict[str, str], refused: bool
) -> None:
    rendered = device_plugin(config__map=configs)
    plugin = next(m for m in rendered if m["kind"] == "DaemonSet" and m["metadata"]["name"].endswith("device-plugin"))
    init = plugin["spec"]["template"]["spec"]["initContainers"][0]
    assert {e["name"]: e.get("value") for e in init["env"]}["DEFAULT_CONFIG"] is None  # `value:` renders empty
    job = smoke_job()
    outcome = harness.stack(SHARED_GPU_RESOURCE_NAME, foreign([*rendered, job]))
    if not refused:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "'ai-workloads/hybrid-gpu-plugin-smoke': container 'gpu-check' requests nvidia.com/gpu" in message
    assert "advertise nvidia.com/gpu.shared instead" in message
    assert "Ask for nvidia.com/gpu.shared" in message


# --------------------------------------------------------------------------- the Operator's sandbox workloads


def operator_cluster_policy(**sandbox: Any) -> list[dict[str, Any]]:
    """The Operator chart rendered in ClusterPolicy mode, its device plugin off, with these sandboxWorkloads values."""
    values = operator_values("cluster-policy", devicePlugin__enabled=False, gfd__enabled=False)
    values["sandboxWorkloads"] = {"enabled": True, **sandbox}
    return operator_render(values)


@pytest.mark.parametrize(("workload", "refused"), [("vm-passthrough", True), ("container", False)])
def test_sandbox_workloads_defaulting_to_vm_passthrough_beside_a_standalone_plugin_are_refused(
    harness: Harness, workload: str, refused: bool
) -> None:
    rendered = operator_cluster_policy(defaultWorkload=workload)
    policy = next(m for m in rendered if m["kind"] == "ClusterPolicy")
    assert policy["spec"]["devicePlugin"]["enabled"] is False
    assert policy["spec"]["sandboxWorkloads"]["defaultWorkload"] == workload
    on_render = harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, foreign([*rendered, *device_plugin()]))
    values = operator_values("cluster-policy", devicePlugin__enabled=False, gfd__enabled=False)
    values["sandboxWorkloads"] = {"enabled": True, "defaultWorkload": workload}
    release = harness.helm_release("gpu-operator", "gpu-operator", "v26.7.0", values)
    on_release = harness.stack(OPERATOR_DEVICE_PLUGIN_DISABLED, [release, *foreign(device_plugin())])
    if not refused:
        harness.passes(on_render)
        harness.passes(on_release)
        return
    message = on_render.one()
    assert "ClusterPolicy 'cluster-policy': spec.sandboxWorkloads enables sandbox workloads" in message
    assert "defaultWorkload 'vm-passthrough'" in message
    assert "vfio-pci" in message
    assert "set spec.sandboxWorkloads.enabled: false" in message
    says_next_command(message)
    message = on_release.one()
    assert "Release 'gpu-operator': values sandboxWorkloads enables sandbox workloads" in message
    assert "set sandboxWorkloads.enabled: false" in message
    says_next_command(message)


# --------------------------------------------------------------------------- extraObjects of a Release


def gpu_cluster_release(harness: Harness, extra: list[Any]) -> Any:
    values = operator_values("gpu-cluster")
    values["extraObjects"] = extra
    return harness.helm_release("gpu-operator", "gpu-operator", "v26.7.0", values)


def cluster_policy_object() -> dict[str, Any]:
    """The ClusterPolicy the Operator chart itself renders, pasted into extraObjects."""
    rendered = operator_render(operator_values("cluster-policy"))
    policy = next(m for m in rendered if m["kind"] == "ClusterPolicy")
    return {
        "apiVersion": policy["apiVersion"],
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": policy["spec"],
    }


@pytest.mark.parametrize("as_text", [False, True], ids=["map", "string"])
def test_a_cluster_policy_in_a_gpu_cluster_releases_extra_objects_is_refused(harness: Harness, as_text: bool) -> None:
    policy = cluster_policy_object()
    values = operator_values("gpu-cluster")
    values["extraObjects"] = [policy]
    rendered = operator_render(values)
    assert sorted(m["kind"] for m in rendered if m["kind"] in {"ClusterPolicy", "GPUCluster"}) == [
        "ClusterPolicy",
        "GPUCluster",
    ]  # the chart renders both
    entry = yaml.safe_dump(policy) if as_text else policy
    message = harness.stack(OPERATOR_CR_EXCLUSIVE, [gpu_cluster_release(harness, [entry])]).one()
    assert "values extraObjects[0] of kubernetes:helm.sh/v3:Release 'gpu-operator'" in message
    assert "ClusterPolicy and GPUCluster" in message or "are both in this stack" in message
    assert "remove that entry from extraObjects" in message
    says_next_command(message)
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes"}, "data": {"a": "b"}}
    harness.passes(harness.stack(OPERATOR_CR_EXCLUSIVE, [gpu_cluster_release(harness, [config_map])]))


def test_an_allocator_in_extra_objects_is_a_second_owner(harness: Harness) -> None:
    static = Harness.docs("nvidia-device-plugin-static.yml")[0]
    static["spec"]["template"]["spec"]["nodeSelector"] = selector("dra")
    release = harness.helm_release("gpu-operator", "gpu-operator", "v26.7.0", {**operator_values("gpu-cluster")})
    release.props["values"]["extraObjects"] = [static]
    message = harness.stack(SINGLE_ALLOCATION_OWNER, [release, *foreign(dra())]).one()
    assert "values extraObjects[0] of kubernetes:helm.sh/v3:Release 'gpu-operator'" in message
    static["spec"]["template"]["spec"]["nodeSelector"] = selector("device-plugin")
    release.props["values"]["extraObjects"] = [static]
    harness.passes(harness.stack(SINGLE_ALLOCATION_OWNER, [release, *foreign(dra())]))


def test_a_templated_extra_object_cannot_be_judged(harness: Harness) -> None:
    text = "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: {{ .Release.Name }}\n"
    message = harness.stack(OPERATOR_CR_EXCLUSIVE, [gpu_cluster_release(harness, [text])]).one()
    assert "values extraObjects[0]" in message
    assert "fail closed" in message


# --------------------------------------------------------------------------- a claim pinned to a device-plugin cohort

PLUGIN = selector("device-plugin")
COHORT = "workload.example.com/gpu-allocation"


def seed_claim_objects() -> list[dict[str, Any]]:
    """The seed's DeviceClass and ResourceClaimTemplate (its CEL names the driver gpu.nvidia.com)."""
    return [
        Harness.find("seed-dra-objects.yaml", "DeviceClass", "hybrid-large-gpu"),
        Harness.find("seed-dra-objects.yaml", "ResourceClaimTemplate", "single-large-gpu"),
    ]


PLUGIN_ROUTES: dict[str, tuple[dict[str, str], dict[str, Any] | None]] = {
    "nodeSelector": (PLUGIN, None),
    "every ORed term": (
        {},
        terms(
            [{"key": COHORT, "operator": "In", "values": ["device-plugin"]}, *HYBRID_TERM],
            [
                {"key": COHORT, "operator": "In", "values": ["device-plugin", "retired"]},
                {"key": COMPUTE, "operator": "In", "values": ["hybrid"]},
                {"key": COHORT, "operator": "NotIn", "values": ["retired"]},
            ],
        ),
    ),
}
"""Node selections that only admit the device plugin's cohort (every alternative requires its label)."""
DRA_TWINS: dict[str, tuple[dict[str, str], dict[str, Any] | None]] = {
    "nodeSelector": (selector("dra"), None),
    # One ORed term reaches the DRA cohort: the scheduler may place the pod there, where the driver serves it.
    "every ORed term": (
        {},
        terms(
            [{"key": COHORT, "operator": "In", "values": ["device-plugin"]}],
            [{"key": COHORT, "operator": "In", "values": ["dra"]}],
        ),
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("route", sorted(PLUGIN_ROUTES))
def test_a_gpu_claim_pinned_to_a_device_plugin_cohort_is_refused(harness: Harness, kind: str, route: str) -> None:
    node_selector, node_affinity = PLUGIN_ROUTES[route]
    pinned = workload(kind, claim_pod(node_selector, node_affinity))
    outcome = harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), *seed_claim_objects(), pinned]))
    message = outcome.one()
    assert message.startswith(
        f"{type_of(pinned)} 'ai-workloads/inference' claims a GPU ('gpu' (kubernetes:resource.k8s.io/v1:"
        "ResourceClaimTemplate 'ai-workloads/single-large-gpu')) through DRA"
    ), message
    assert FIELDS_OF.format(base=".".join(POD_SPEC_PATHS[kind])) in message
    assert "only admits the device plugin's cohort" in message
    assert "double-booking" in message or "double-booked" in message
    assert 'pin the pod to the DRA cohort (nodeSelector {"eks.amazonaws.com/compute-type":"hybrid",' in message
    assert "ask nvidia.com/gpu in the container's resources.limits" in message
    says_next_command(message)
    twin_selector, twin_affinity = DRA_TWINS[route]
    twin = workload(kind, claim_pod(twin_selector, twin_affinity))
    stack = foreign([*device_plugin(), *dra(), *seed_claim_objects(), twin])
    harness.passes(harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack))


def test_with_no_dra_driver_the_claim_is_never_allocated(harness: Harness) -> None:
    job = workload("Job", claim_pod(PLUGIN))
    message = harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *seed_claim_objects(), job])).one()
    assert "no DRA driver of this stack runs there, so no ResourceSlice offers those GPUs" in message
    assert "the pod stays Pending" in message
    assert "pin the pod to a DRA cohort's nodes" in message
    says_next_command(message)


def test_a_driver_on_the_plugins_cohort_would_double_book(harness: Harness) -> None:
    """A second owner on the cohort serves the claim: the GPUs the plugin hands out are handed out twice."""
    on_plugin_nodes = dra(kubeletPlugin__nodeSelector=PLUGIN)
    job = workload("Job", claim_pod(PLUGIN))
    stack = foreign([*device_plugin(), *on_plugin_nodes, *seed_claim_objects(), job])
    message = harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack).one()
    assert "a DRA driver runs there too (" in message
    assert "so the claim would be served by a second owner" in message
    assert "(double-booked)" in message


def test_a_claim_whose_object_is_not_in_the_stack_cannot_be_judged(harness: Harness) -> None:
    job = workload("Job", claim_pod(PLUGIN))
    message = harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), job])).one()
    assert "claims 'gpu' (ResourceClaimTemplate 'single-large-gpu') through DRA" in message
    assert "the claim object is not in this stack" in message
    assert "cannot judge the object and refuses it (fail closed)" in message
    says_next_command(message)


def test_a_claim_for_another_drivers_devices_is_not_a_gpu_claim(harness: Harness) -> None:
    """A compute-domain channel (IMEX, no GPU) is another driver's device: the GPUs' owner is not in question."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-large-gpu", "namespace": "ai-workloads"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "channel", "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}}
                    ]
                }
            }
        },
    }
    job = workload("Job", claim_pod(PLUGIN))
    outcome = harness.stack(DRA_CLAIM_ON_DRA_COHORT, foreign([*device_plugin(), *dra(), template, job]))
    harness.passes(outcome)


# --------------------------------------------------------------------------- nvidia.com/gpu on the Operator's DRA nodes

OPERATOR_NODES = selector("operator")


def plain_request(node_selector: dict[str, str], kind: str = "Deployment") -> dict[str, Any]:
    pod = {
        "nodeSelector": node_selector,
        "containers": [
            {
                "name": "server",
                "image": DIGEST,
                "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}},
            }
        ],
    }
    return workload(kind, pod)


@pytest.mark.parametrize("kind", KINDS)
def test_nvidia_gpu_asked_on_the_gpu_cluster_operators_nodes_is_refused(harness: Harness, kind: str) -> None:
    release = harness.operator("gpu-cluster")
    asked = plain_request(OPERATOR_NODES, kind)
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, [release, *foreign([*device_plugin(), asked])])
    message = outcome.one()
    assert message.startswith(
        f"{type_of(asked)} 'ai-workloads/inference' (container 'server') asks nvidia.com/gpu with no ResourceClaim"
    ), message
    assert "the DRA driver the GPUCluster of kubernetes:helm.sh/v3:Release 'gpu-operator-release' runs" in message
    assert "the GPU Operator runs no device plugin under a GPUCluster, and no DeviceClass maps the name" in message
    assert "add a DeviceClass of your own that maps the name (spec.extendedResourceName: nvidia.com/gpu" in message
    assert f"the manifest of {type_of(asked)} 'ai-workloads/inference'" in message
    says_next_command(message)
    # The twin: the same request on the device plugin's cohort is served there.
    twin = plain_request(PLUGIN, kind)
    harness.passes(harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, [release, *foreign([*device_plugin(), twin])]))


def test_the_rendered_gpu_cluster_runs_the_driver_too(harness: Harness) -> None:
    rendered = operator_render(operator_values("gpu-cluster"))
    assert any(m["kind"] == "GPUCluster" for m in rendered)
    stack = foreign([*rendered, *device_plugin(), plain_request(OPERATOR_NODES)])
    message = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, stack).one()
    assert "the GPU Operator runs no device plugin under a GPUCluster" in message


@pytest.mark.parametrize(("version", "refused"), [("1.37.2", False), ("1.35.3", True)])
def test_a_class_mapping_nvidia_gpu_serves_the_operators_nodes_where_the_gate_is_on(
    harness: Harness, version: str, refused: bool
) -> None:
    """KEP-5004's exception: a DeviceClass with extendedResourceName nvidia.com/gpu lets DRA serve the plain name."""
    stack_cluster(kubernetesVersion=version)
    stack = [harness.operator("gpu-cluster"), *foreign([team_class(), plain_request(OPERATOR_NODES)])]
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, stack)
    if not refused:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "kubernetes:resource.k8s.io/v1:DeviceClass 'team-gpu' maps it" in message
    assert "DRAExtendedResource is off in Kubernetes 1.35" in message


# --------------------------------------------------------------------------- the mapping a DRA Release renders


def dra_release(harness: Harness, **changes: Any) -> Any:
    values = Harness.values("dra-values.yaml")
    values.update(changes)
    return harness.helm_release("dra", "dra-driver-nvidia-gpu", "0.5.0", values)


@pytest.mark.parametrize(("api", "served"), [(None, True), ("resource.k8s.io/v1beta2", False)])
def test_the_gpu_class_a_dra_release_renders_maps_nvidia_gpu(harness: Harness, api: str | None, served: bool) -> None:
    """The chart sets extendedResourceName on gpu.nvidia.com when it renders resource.k8s.io/v1 (the default)."""
    rendered = dra()
    gpu_class = next(m for m in rendered if m["kind"] == "DeviceClass" and m["metadata"]["name"] == "gpu.nvidia.com")
    assert gpu_class["spec"]["extendedResourceName"] == "nvidia.com/gpu"  # the real render, values as the Release's
    release = dra_release(harness, **({"resourceApiVersion": api} if api else {}))
    stack_cluster(kubernetesVersion="1.37.2")
    stack = [release, *foreign([plain_request(selector("dra"))])]
    outcome = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, stack)
    if served:
        harness.passes(outcome)
        return
    message = outcome.one()
    assert "no DeviceClass maps it" in message


def test_a_dra_releases_mapping_and_a_teams_class_are_two_mappings_of_one_name(harness: Harness) -> None:
    stack = [dra_release(harness), *foreign([team_class()])]
    message = harness.stack(DRA_EXTENDED_RESOURCE_NAME_UNIQUE, stack).one()
    assert "DeviceClass 'gpu.nvidia.com' (rendered by kubernetes:helm.sh/v3:Release 'dra' from its values)" in message
    assert "kubernetes:resource.k8s.io/v1:DeviceClass 'team-gpu'" in message
    says_next_command(message)
    harness.passes(harness.stack(DRA_EXTENDED_RESOURCE_NAME_UNIQUE, [dra_release(harness)]))


# --------------------------------------------------------------------------- pod templates a Release renders


def test_workloads_in_a_releases_extra_objects_are_judged_like_any_other(harness: Harness) -> None:
    """The Operator chart renders each extraObjects entry: a claim or a plain request there lands like any other."""
    claim_job = workload("Job", claim_pod(PLUGIN), name="claims")
    asking = plain_request(OPERATOR_NODES)
    release = gpu_cluster_release(harness, [claim_job, asking, *seed_claim_objects()])
    stack = [release, *foreign(device_plugin())]
    where = "values extraObjects[{}] of kubernetes:helm.sh/v3:Release 'gpu-operator'"
    message = harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack).one()
    assert message.startswith(f"kubernetes:batch/v1:Job 'ai-workloads/claims' (from {where.format(0)}) claims a GPU")
    # The GPUCluster's driver runs on every GPU node the Operator manages: a second owner on the plugin's cohort.
    assert "a DRA driver runs there too (the DRA driver the GPUCluster of kubernetes:helm.sh/v3:Release" in message
    assert "(double-booked)" in message
    message = harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, stack).one()
    assert message.startswith(f"kubernetes:apps/v1:Deployment 'ai-workloads/inference' (from {where.format(1)})")
    assert "the GPU Operator runs no device plugin under a GPUCluster" in message
    # The twins: the claim on the GPUCluster's nodes, the plain request on the plugin's cohort.
    release = gpu_cluster_release(
        harness,
        [workload("Job", claim_pod(OPERATOR_NODES), name="claims"), plain_request(PLUGIN), *seed_claim_objects()],
    )
    stack = [release, *foreign(device_plugin())]
    harness.passes(harness.stack(DRA_CLAIM_ON_DRA_COHORT, stack))
    harness.passes(harness.stack(DRA_EXTENDED_RESOURCE_REQUEST_SERVED, stack))
