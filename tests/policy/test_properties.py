"""Property-based tests: random pod specs, selectors and mutated manifests.

The workload policies are checked against an independent oracle written from the rules (not
from the implementation); every policy is fed mutated real objects, including unknown
sentinels, and must never raise.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulumi_policy import ResourceValidationArgs, ResourceValidationPolicy, StackValidationPolicy

from policy.gpu_allocation.pack import build_policies
from policy.gpu_allocation.rules.targeting import NO_AUTO_MODE_TARGETING
from policy.gpu_allocation.rules.workloads import GPU_REQUEST_SHAPE, NO_DUAL_ALLOCATION, NO_VISIBLE_DEVICES_OVERRIDE
from tests.support.policy_harness import DP_SELECTOR, Harness, Item, engine_options, type_of, wire

pytestmark = pytest.mark.policy

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
HARNESS = Harness()

# --------------------------------------------------------------------------- pod specs

GPU_NAMES = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"]
OTHER_NAMES = ["cpu", "memory", "example.com/fpga"]
QUANTITIES: dict[Any, Fraction | None] = {
    0: Fraction(0),
    1: Fraction(1),
    2: Fraction(2),
    4: Fraction(4),
    "1": Fraction(1),
    "2": Fraction(2),
    "1e0": Fraction(1),
    "1000m": Fraction(1),
    "0.5": Fraction(1, 2),
    "500m": Fraction(1, 2),
    1.5: Fraction(3, 2),
    -1: Fraction(-1),
    "abc": None,
}
ENV_NAMES = ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LOG_LEVEL"]
FORBIDDEN = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}
KINDS = ["Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "Pod"]


@st.composite
def containers(draw: st.DrawFn, prefix: str) -> list[dict[str, Any]]:
    result = []
    for index in range(draw(st.integers(1, 3) if prefix == "c" else st.integers(0, 1))):
        names = draw(st.lists(st.sampled_from(GPU_NAMES + OTHER_NAMES), unique=True, max_size=3))
        requests = {n: draw(st.sampled_from(list(QUANTITIES))) for n in names if draw(st.booleans())}
        limits = {n: draw(st.sampled_from(list(QUANTITIES))) for n in names if draw(st.booleans())}
        container: dict[str, Any] = {"name": f"{prefix}{index}", "image": "registry.example.com/app:1"}
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = requests
        if limits:
            resources["limits"] = limits
        claims = draw(st.lists(st.sampled_from(["gpu", "extra"]), unique=True, max_size=2))
        if claims:
            resources["claims"] = [{"name": c} for c in claims]
        if resources:
            container["resources"] = resources
        env = draw(st.lists(st.sampled_from(ENV_NAMES), unique=True, max_size=2))
        if env:
            container["env"] = [{"name": name, "value": "0"} for name in env]
        result.append(container)
    return result


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": draw(containers("c"))}
    init = draw(containers("i"))
    if init:
        pod["initContainers"] = init
    if draw(st.booleans()):
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-large-gpu"}]
    return pod


def workload(kind: str, pod: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": "w", "namespace": "ai-workloads"}
    template = {"spec": pod}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": kind, "metadata": metadata, "spec": pod}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": metadata, "spec": {"template": template}}
    if kind == "CronJob":
        spec = {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": metadata, "spec": spec}
    spec = {"selector": {"matchLabels": {"app": "w"}}, "template": template}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": metadata, "spec": spec}


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def expected_shape_problems(pod: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(container, resource, problem) from the rule: whole numbers, requests == limits."""
    problems = []
    for container in all_containers(pod):
        resources = container.get("resources", {})
        requests, limits = resources.get("requests", {}), resources.get("limits", {})
        for name in sorted({*requests, *limits}):
            if not name.startswith("nvidia.com/"):
                continue
            for which, table in (("requests", requests), ("limits", limits)):
                if name in table:
                    quantity = QUANTITIES[table[name]]
                    if quantity is None or quantity.denominator != 1 or quantity < 0:
                        problems.append((container["name"], name, f"{which}-not-whole"))
            if name in requests and name not in limits:
                problems.append((container["name"], name, "no-limit"))
            elif name in requests and name in limits:
                request, limit = QUANTITIES[requests[name]], QUANTITIES[limits[name]]
                if request is not None and limit is not None and request != limit:
                    problems.append((container["name"], name, "unequal"))
    return problems


def gets_gpus(container: dict[str, Any], pod: dict[str, Any]) -> bool:
    resources = container.get("resources", {})
    names = {*resources.get("requests", {}), *resources.get("limits", {})}
    device = any(n.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) for n in names)
    return device or bool(resources.get("claims")) or bool(pod.get("resourceClaims"))


def expected_env_problems(pod: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (c["name"], e["name"])
        for c in all_containers(pod)
        if gets_gpus(c, pod)
        for e in c.get("env", [])
        if e["name"] in FORBIDDEN
    ]


def expected_dual(pod: dict[str, Any]) -> bool:
    device = any(
        n.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))
        for c in all_containers(pod)
        for n in {*c.get("resources", {}).get("requests", {}), *c.get("resources", {}).get("limits", {})}
    )
    claims = any(c.get("resources", {}).get("claims") for c in all_containers(pod)) or bool(pod.get("resourceClaims"))
    return device and claims


@PROPERTY_SETTINGS
@given(pod=pod_specs(), kind=st.sampled_from(KINDS))
def test_request_shape_reports_every_generated_problem(pod: dict[str, Any], kind: str) -> None:
    outcome = HARNESS.manifest_check(GPU_REQUEST_SHAPE, workload(kind, pod))
    expected = expected_shape_problems(pod)
    assert outcome.applied, outcome.not_applicable  # a clean draw must be judged clean, not skipped
    assert len(outcome.violations) == len(expected), (expected, outcome.messages)
    for container_name, name, problem in expected:
        fragment = {
            "requests-not-whole": f"container '{container_name}' requests['{name}'] is ",
            "limits-not-whole": f"container '{container_name}' limits['{name}'] is ",
            "no-limit": f"container '{container_name}' requests['{name}'] is ",
            "unequal": f"but limits['{name}'] is ",
        }[problem]
        assert any(fragment in m for m in outcome.messages), (problem, outcome.messages)


@PROPERTY_SETTINGS
@given(pod=pod_specs(), kind=st.sampled_from(KINDS))
def test_visible_devices_override_reports_every_gpu_container(pod: dict[str, Any], kind: str) -> None:
    outcome = HARNESS.manifest_check(NO_VISIBLE_DEVICES_OVERRIDE, workload(kind, pod))
    expected = expected_env_problems(pod)
    assert outcome.applied, outcome.not_applicable  # a clean draw must be judged clean, not skipped
    assert len(outcome.violations) == len(expected), (expected, outcome.messages)
    for container_name, env in expected:
        assert any(f"container '{container_name}' gets GPUs" in m and f"sets env {env}=" in m for m in outcome.messages)


@PROPERTY_SETTINGS
@given(pod=pod_specs(), kind=st.sampled_from(KINDS))
def test_dual_allocation_is_reported_exactly_when_both_mechanisms_are_used(pod: dict[str, Any], kind: str) -> None:
    outcome = HARNESS.manifest_check(NO_DUAL_ALLOCATION, workload(kind, pod))
    assert outcome.applied, outcome.not_applicable  # a clean draw must be judged clean, not skipped
    assert len(outcome.violations) == (1 if expected_dual(pod) else 0), outcome.messages
    if expected_dual(pod):
        assert "through the device plugin and DRA claim(s)" in outcome.one()


# --------------------------------------------------------------------------- selectors

COMPUTE = "eks.amazonaws.com/compute-type"
EXPRESSIONS = st.one_of(
    st.builds(
        lambda op, values: {"key": COMPUTE, "operator": op, "values": values},
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(["hybrid", "auto", "ec2"]), unique=True, min_size=1, max_size=3),
    ),
    st.just({"key": COMPUTE, "operator": "Exists"}),
    st.just({"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}),
)
TERMS = st.lists(st.builds(lambda e: {"matchExpressions": e}, st.lists(EXPRESSIONS, max_size=2)), max_size=3)


def term_pins(term: dict[str, Any]) -> bool:
    return any(
        (e["operator"] == "In" and all(v == "hybrid" for v in e["values"]))
        or (e["operator"] == "NotIn" and "auto" in e["values"])
        for e in term["matchExpressions"]
        if e["key"] == COMPUTE and "values" in e
    )


@PROPERTY_SETTINGS
@given(
    selected=st.sampled_from([None, "hybrid", "auto", "ec2"]),
    terms=st.one_of(st.none(), TERMS),
    smoke=st.booleans(),
)
def test_auto_mode_targeting_matches_the_rule(selected: str | None, terms: list[Any] | None, smoke: bool) -> None:
    manifest = HARNESS.find("device-plugin-rendered.yaml", "DaemonSet", "hybrid-gpu-plugin-nvidia-device-plugin")
    manifest = HARNESS.stamp(manifest, "device-plugin", "plugin", DP_SELECTOR)
    if smoke:
        manifest = HARNESS.find("seed-smoke-jobs.yaml", "Job", "hybrid-gpu-plugin-smoke")
        manifest["metadata"]["labels"] = {"eks-hybrid-gpu.io/smoke-job": "true"}
    pod = manifest["spec"]["template"]["spec"]
    pod["nodeSelector"] = {k: v for k, v in pod["nodeSelector"].items() if k != COMPUTE}
    if selected is not None:
        pod["nodeSelector"][COMPUTE] = selected
    if terms is None:
        pod.pop("affinity", None)
    else:
        pod["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    pinned = selected == "hybrid" or (selected != "auto" and bool(terms) and all(term_pins(t) for t in terms or []))
    outcome = HARNESS.manifest_check(NO_AUTO_MODE_TARGETING, manifest)
    assert outcome.applied, outcome.not_applicable  # a clean draw must be judged clean, not skipped
    assert len(outcome.violations) == (0 if pinned else 1), (selected, terms, outcome.messages)


# --------------------------------------------------------------------------- robustness

SENTINELS = [
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
]
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 1e30]),
    st.text(max_size=6),
    st.sampled_from(["true", "false", "auto", "hybrid", "/", "0.20.0", "^1", "RuntimeDefault", "all"]),
    st.sampled_from(SENTINELS),
)


def _containers_of(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3))


JSON = st.recursive(LEAVES, _containers_of, max_leaves=12)


def seeds() -> list[Item]:
    """Real-shaped objects of every family: charts, rendered objects, seed objects, ledger."""
    items = [
        *HARNESS.device_plugin(),
        *HARNESS.device_plugin("shared", name="shared-chart", sharing="time-slicing", variant="ts"),
        *HARNESS.device_plugin("gfd", name="gfd-chart", variant="gfd"),
        *HARNESS.dra(),
        *HARNESS.dra("root", name="root-chart", variant="root"),
        *HARNESS.dra("cm", name="cm-chart", variant="cm"),
        HARNESS.helm_release(
            "plugin-release", "nvidia-device-plugin", "0.20.0", HARNESS.values("device-plugin-values.yaml")
        ),
        HARNESS.operator("gpu-cluster"),
        HARNESS.operator("cluster-policy"),
        HARNESS.seed_ledger(),
    ]
    for doc in [*HARNESS.docs("seed-dra-objects.yaml"), *HARNESS.docs("seed-smoke-jobs.yaml")]:
        doc["metadata"].setdefault("labels", {})["eks-hybrid-gpu.io/smoke-job"] = "true"
        items.append(HARNESS.item(doc))
    items.extend(HARNESS.item(doc) for doc in HARNESS.docs("operator-rendered.yaml"))
    return items


SEEDS = seeds()


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = copy.copy(value)
    copied[path[0]] = replace(value[path[0]], path[1:], new)
    return copied


@st.composite
def mutated(draw: st.DrawFn) -> Item:
    seed = draw(st.sampled_from(SEEDS))
    props = seed.props
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(props)[1:] or [()]))
        props = replace(props, path, draw(JSON))
    return Item(seed.resource_type, props if isinstance(props, dict) else {"value": props}, seed.name, seed.parent)


RESOURCE_POLICIES = [p for p in build_policies() if isinstance(p, ResourceValidationPolicy)]
STACK_POLICIES = [p for p in build_policies() if isinstance(p, StackValidationPolicy)]


@settings(max_examples=300, deadline=None)
@given(item=mutated())
def test_resource_policies_never_crash_on_mutated_objects(item: Item) -> None:
    args = ResourceValidationArgs(
        item.resource_type, wire(item.props), item.urn, item.name, engine_options(), None, None
    )
    for policy in RESOURCE_POLICIES:
        outcome = HARNESS.run_resource(policy, args)
        assert all(isinstance(m, str) and m for m in outcome.messages)


@settings(max_examples=100, deadline=None)
@given(items=st.lists(mutated(), min_size=1, max_size=6), keep=st.lists(st.sampled_from(SEEDS), max_size=6))
def test_stack_policies_never_crash_on_mutated_stacks(items: list[Item], keep: list[Item]) -> None:
    stack: dict[str, Item] = {}
    for item in [*keep, *items]:
        stack[item.name] = item
    chosen = [Item(i.resource_type, i.props, i.name, i.parent if i.parent in stack else None) for i in stack.values()]
    args = HARNESS.stack_args(chosen)
    for policy in STACK_POLICIES:
        outcome = HARNESS.run_stack(policy, args)
        assert all(isinstance(m, str) and m for m in outcome.messages)


def test_seeds_are_real_manifests() -> None:
    kinds = {type_of(i.props) for i in SEEDS if "apiVersion" in i.props}
    assert "kubernetes:apps/v1:DaemonSet" in kinds
    assert "kubernetes:batch/v1:Job" in kinds
