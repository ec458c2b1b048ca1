"""`migrate --to dra` keeping `nvidia.com/gpu` (KEP-5004): refused before anything changes where the gate is off for
the cohort (the older of server and kubelet), where another class maps the name, or where workloads would lose
their only place; otherwise run with the mapping class waited for before any uncordon."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.client.kubeclient import DEVICE_CLASSES, SLICES, KubeApiError
from cluster.client.waits import WaitTimedOut
from cluster.judge.kept_name import gate_refusal, mapping_classes, node_gates, shadowing_refusal, stranded
from cluster.judge.node_state import TRANSIT_ANNOTATION as TRANSIT
from cluster.judge.node_state import NodeState
from cluster.records.migration import Migration, parse_migration
from components.mid_migration import apply_to_raw, beside_raw
from components.node_guard import allocator_expression, allocator_refusal_message, guard_expression
from eks_hybrid_gpu import migrate
from eks_hybrid_gpu.movehost import MoveRefused, refuse_unkept_name
from eks_hybrid_gpu.stackfile import edited
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, COHORT_LABEL, OWNER_LABEL
from testkit.fake_kube import FakeKube
from testkit.fake_kube import merge_patch as merge_patch_into
from tests.support.configs import hybrid_node
from tests.support.node_cel import evaluate
from tests.unit.test_migrate import LEDGER, NODES, NS, RECORD, _args, cluster
from tests.unit.test_migrate import _pod as _pod_of

pytestmark = pytest.mark.unit

NAME = "nvidia.com/gpu"
HOSTS = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "device-plugin"}
MAPPING = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"extendedResourceName": NAME}}


def _node(
    name: str, kubelet: str, allocatable: dict[str, str] | None = None, cohort: str = "device-plugin"
) -> dict[str, Any]:
    node = hybrid_node(name, cohort, kubelet=kubelet)
    node["status"]["allocatable"] = allocatable or {}
    return node


def _pod(name: str, node: str, resource: str = NAME, *, controlled: bool = True) -> dict[str, Any]:
    owners = [{"kind": "ReplicaSet", "name": "trainer-5d9", "controller": True}] if controlled else []
    return {
        "metadata": {"name": name, "namespace": "ai", "uid": name, "ownerReferences": owners},
        "spec": {
            "nodeName": node,
            "nodeSelector": HOSTS,
            "containers": [{"name": "main", "resources": {"limits": {resource: "1"}}}],
        },
        "status": {"phase": "Running"},
    }


# ---------------------------------------------------------------- the judge: gate, shadowing, stranded workloads


def test_current_server_and_kubelets_keep_the_name() -> None:
    gates = node_gates((1, 37), [_node("a", "v1.37.2-eks-1"), _node("b", "v1.36.1-eks-1")], {})
    assert [g.keeps for g in gates] == [True, True]
    assert gate_refusal(NAME, "plugin", "v1.37.2", gates, {}) is None


def test_an_old_kubelet_under_a_new_server_is_refused_naming_it_and_the_fixes() -> None:
    gates = node_gates((1, 37), [_node("a", "v1.37.2-eks-1"), _node("b", "v1.34.4-eks-3")], {})
    refusal = gate_refusal(NAME, "plugin", "v1.37.2", gates, {})
    assert refusal == (
        "cohort plugin cannot keep nvidia.com/gpu through DRA: DRAExtendedResource (KEP-5004) is off for its nodes — "
        "server v1.37.2, b kubelet v1.34.4-eks-3: Kubernetes 1.34 (the older of server and kubelet) has it off; it "
        "is alpha and off by default before 1.36, so every pod asking nvidia.com/gpu would stay Pending on the moved "
        "nodes. Upgrade the control plane and these kubelets to 1.36+, or turn DRAExtendedResource on in every "
        "control-plane component and kubelet and set cluster.featureGates.DRAExtendedResource: true, or change the "
        "workloads to ask a ResourceClaim (DeviceClass gpu.nvidia.com) and remove dra.extendedResourceName"
    )


def test_the_server_decides_when_older_and_a_gate_set_on_counts() -> None:
    nodes = [_node("a", "v1.35.2-eks-1")]
    assert gate_refusal(NAME, "plugin", "v1.35.2", node_gates((1, 35), nodes, {}), {}) is not None
    on = {"DRAExtendedResource": True}
    assert gate_refusal(NAME, "plugin", "v1.35.2", node_gates((1, 35), nodes, on), on) is None


def test_a_version_that_cannot_be_read_is_refused_not_passed() -> None:
    refusal = gate_refusal(NAME, "plugin", None, node_gates(None, [_node("a", "v1.37.2-eks-1")], {}), {})
    assert refusal is not None
    assert "server version unknown" in refusal
    assert "cannot be read on a, and what cannot be read is not passed" in refusal


def test_another_class_mapping_the_name_is_refused_naming_both() -> None:
    foreign = {"metadata": {"name": "vendor-gpus"}, "spec": {"extendedResourceName": NAME}}
    assert mapping_classes([MAPPING, foreign], NAME) == ["gpu.nvidia.com", "vendor-gpus"]
    assert shadowing_refusal([MAPPING], NAME, "gpu.nvidia.com") is None
    refusal = shadowing_refusal([MAPPING, foreign], NAME, "gpu.nvidia.com")
    assert refusal is not None
    assert refusal.startswith("DeviceClass vendor-gpus already maps nvidia.com/gpu (spec.extendedResourceName)")
    assert "would add DeviceClass gpu.nvidia.com mapping it too" in refusal


@pytest.mark.parametrize(
    ("pods", "kept", "lost"),
    [
        ([_pod("t-1", "a")], None, ["ai/t-1 (ReplicaSet trainer-5d9) asks nvidia.com/gpu"]),
        ([_pod("t-1", "a")], NAME, []),  # the mapping class serves it on the moved nodes
        ([_pod("t-1", "a", controlled=False)], None, []),  # a bare pod is not recreated: the drain's to judge
        (
            [_pod("t-1", "a", "nvidia.com/gpu.shared")],
            NAME,
            ["ai/t-1 (ReplicaSet trainer-5d9) asks nvidia.com/gpu.shared"],
        ),
        ([_pod("t-1", "c")], None, []),  # not on a moving node
    ],
)
def test_workloads_that_would_lose_their_only_place(
    pods: list[dict[str, Any]], kept: str | None, lost: list[str]
) -> None:
    nodes = [_node("a", "v1.37.2"), _node("b", "v1.37.2"), _node("c", "v1.37.2", {NAME: "4"}, cohort="other")]
    assert stranded(pods, ["a", "b"], nodes, kept) == lost


def test_a_node_that_publishes_the_name_and_admits_the_pod_is_a_place() -> None:
    nodes = [_node("a", "v1.37.2"), _node("c", "v1.37.2", {NAME: "4"})]
    assert stranded([_pod("t-1", "a")], ["a"], nodes, None) == []


# ---------------------------------------------------------------- migrate


def _keeping(project: Path, version: str = "1.37.2") -> None:
    path = project / "stacks" / "Pulumi.t.yaml"
    document = yaml.safe_load(path.read_text())
    config = document["config"]
    config["eks-hybrid-gpu:cluster"]["kubernetesVersion"] = version
    config["eks-hybrid-gpu:cohorts"][0]["owner"] = "dra"
    config["eks-hybrid-gpu:cohorts"][0]["nodeSelector"] = HOSTS
    config["eks-hybrid-gpu:dra"] = {"extendedResourceName": NAME}
    path.write_text(yaml.safe_dump(document))


def _cluster(server: str = "v1.37.2", kubelet: str = "v1.37.2-eks-1") -> FakeKube:
    kube = cluster()
    kube.objects["/version"] = {"gitVersion": server}
    for node in NODES:
        kube.objects[f"/api/v1/nodes/{node}"]["status"]["nodeInfo"] = {"kubeletVersion": kubelet}
    return kube


def _refusal(project: Path, kube: FakeKube, *extra: str) -> str:
    stack = migrate.read_stack_file("t", project)
    with pytest.raises(migrate.MigrateRefused) as refused:
        migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project, *extra))  # type: ignore[arg-type]
    assert kube.writes == []
    return str(refused.value)


def test_a_1_34_server_refuses_the_move_before_anything_changes(project: Path) -> None:
    _keeping(project)  # the file declares 1.37.2; the server answers otherwise
    text = _refusal(project, _cluster("v1.34.4", "v1.34.4-eks-3"))
    assert text.startswith("cohort plugin: device-plugin -> dra keeping nvidia.com/gpu: cohort plugin cannot keep")
    assert "server v1.34.4, gpu-1 kubelet v1.34.4-eks-3, gpu-2 kubelet v1.34.4-eks-3" in text
    assert text.endswith("; nothing was changed")


def test_old_cohort_kubelets_under_a_1_37_server_refuse_the_move(project: Path) -> None:
    _keeping(project)
    assert "Kubernetes 1.35 (the older of server and kubelet)" in _refusal(project, _cluster("v1.37.2", "v1.35.0"))


def test_a_foreign_mapping_class_refuses_the_move(project: Path) -> None:
    _keeping(project)
    kube = _cluster()
    kube.objects[f"{DEVICE_CLASSES}/vendor-gpus"] = {
        "metadata": {"name": "vendor-gpus"},
        "spec": {"extendedResourceName": NAME},
    }
    assert "DeviceClass vendor-gpus already maps nvidia.com/gpu" in _refusal(project, kube)


def test_a_deployment_that_would_lose_nvidia_gpu_refuses_a_move_that_does_not_keep_it(project: Path) -> None:
    kube = _cluster()
    kube.objects["/api/v1/pods/t-1"] = _pod("t-1", "gpu-1")
    text = _refusal(project, kube, "--drain")
    assert text.startswith("cohort plugin: device-plugin -> dra: ai/t-1 (ReplicaSet trainer-5d9) asks nvidia.com/gpu")
    assert "Set dra.extendedResourceName: nvidia.com/gpu with owner dra on Kubernetes 1.36+" in text
    _keeping(project)  # the same Deployment, the name kept: planned
    stack = migrate.read_stack_file("t", project)
    planned = migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project, "--drain"))  # type: ignore[arg-type]
    assert planned is not None


KEY = ALLOCATOR_LABEL
OLD = {**HOSTS, KEY: "device-plugin"}
MOVED = {**HOSTS, KEY: "dra"}


class Fleet(FakeKube):
    """The fake API server with the two DaemonSets' controller and the kubelets: after every write each node runs
    the allocator whose installed selector its labels match (device plugin: allocatable 4; DRA: its slice,
    allocatable 0), or none; `samples` keeps each node's allocators and whether it serves `nvidia.com/gpu`."""

    def __init__(self) -> None:
        super().__init__()
        self.installed: dict[str, dict[str, str]] = {"device-plugin": dict(HOSTS)}
        """owner -> the cohort label value its DaemonSet selects."""
        self.samples: list[dict[str, tuple[list[str], bool]]] = []

    def settle(self) -> None:
        for node in NODES:
            path = f"/api/v1/nodes/{node}"
            labels = self.objects[path]["metadata"]["labels"]
            owners = [o for o, wanted in self.installed.items() if all(labels.get(k) == v for k, v in wanted.items())]
            for other in ("device-plugin", "dra"):
                if other not in owners:
                    self.objects.pop(f"/api/v1/pods/{other}-{node}", None)
            if "dra" not in owners:
                self.objects.pop(f"{SLICES}/{node}-slice", None)
            plugin = "device-plugin" in owners
            self.objects[path]["status"]["allocatable"] = {NAME: "4" if plugin else "0"}
            for owner in owners:
                pod_path, pod = _allocator(node, owner)
                self.objects.setdefault(pod_path, pod)
            if "dra" in owners:
                self.objects[f"{SLICES}/{node}-slice"] = {
                    "metadata": {"name": f"{node}-slice"},
                    "spec": {"nodeName": node, "driver": "gpu.nvidia.com"},
                }
        self.sample()

    def sample(self) -> None:
        seen: dict[str, tuple[list[str], bool]] = {}
        mapped = f"{DEVICE_CLASSES}/gpu.nvidia.com" in self.objects
        for node in NODES:
            allocators = [o for o in ("device-plugin", "dra") if f"/api/v1/pods/{o}-{node}" in self.objects]
            state = self.objects[f"/api/v1/nodes/{node}"]
            open_ = not state.get("spec", {}).get("unschedulable")
            plugin = state["status"]["allocatable"].get(NAME, "0") != "0"
            serves = open_ and (plugin or (mapped and f"{SLICES}/{node}-slice" in self.objects))
            seen[node] = (allocators, serves)
        self.samples.append(seen)

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        found = super().merge_patch(path, body)
        if path.startswith("/api/v1/nodes/"):
            self.settle()
        return found


def _allocator(node: str, owner: str) -> tuple[str, dict[str, Any]]:
    path, pod = _pod_of(node, owner)
    return path, pod


def _fleet(server: str = "v1.37.2") -> Fleet:
    kube = Fleet()
    kube.objects.update(copy.deepcopy(_cluster(server).objects))
    kube.settle()
    return kube


class UpKeeping:
    """Each phase's `pulumi up`, as the program installs it one node at a time: install adds the DRA DaemonSet on
    the hosts' new selector (and the mapping class), remove drops the device plugin's."""

    def __init__(self, kube: Fleet) -> None:
        self.kube = kube
        self.calls: list[str] = []

    def __call__(self, why: str) -> None:
        phase = json.loads(self.kube.objects[RECORD]["data"]["migration.json"])["phase"]
        self.calls.append(phase)
        if phase == "install":
            self.kube.installed.update({"device-plugin": OLD, "dra": MOVED})
            status = {"desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}
            labels = {OWNER_LABEL: "device-plugin", COHORT_LABEL: "plugin"}
            self.kube.objects["/apis/apps/v1/daemonsets/plugin"] = {
                "metadata": {"name": "plugin", "namespace": NS, "labels": labels, "generation": 2},
                "status": {**status, "observedGeneration": 2},
            }
            self.kube.objects[f"{DEVICE_CLASSES}/gpu.nvidia.com"] = copy.deepcopy(MAPPING)
        if phase == "remove":
            self.kube.installed.pop("device-plugin")
        self.kube.settle()


def _record(kube: FakeKube) -> dict[str, Any]:
    return dict(json.loads(kube.objects[RECORD]["data"]["migration.json"]))


def test_keeping_the_name_moves_one_node_at_a_time_and_one_always_serves(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _keeping(project)
    kube = _fleet()
    stack = migrate.read_stack_file("t", project)
    assert migrate.migrate(kube, stack, _args(project, "--dry-run"), UpKeeping(kube)) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "keeps nvidia.com/gpu, one node at a time: the install phase's DeviceClass gpu.nvidia.com maps it" in out
    assert f"1. [label] label gpu-1, gpu-2 {KEY}=device-plugin (nothing selects it yet)" in out
    assert f"2. [install] `pulumi up` with device-plugin's selector narrowed to {KEY}=device-plugin" in out
    assert "3. [move-nodes] one node at a time (gpu-1, gpu-2): cordon, wait for the pods" in out
    up = UpKeeping(kube)
    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5"), up) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert up.calls == ["install", "remove"]
    # Never two allocators on a node; at every write one node serves nvidia.com/gpu; the nodes move in turn.
    assert all(len(allocators) <= 1 for sample in kube.samples for allocators, _ in sample.values())
    assert all(any(serves for _, serves in sample.values()) for sample in kube.samples)
    cordoned = [tuple(n for n, (_, s) in sample.items() if not s) for sample in kube.samples]
    assert ("gpu-1", "gpu-2") not in cordoned
    assert out.index("uncordoned gpu-1") < out.index("cordoned gpu-2") < out.index("uncordoned gpu-2")
    assert out.index("DeviceClass gpu.nvidia.com maps nvidia.com/gpu") < out.index("cordoned gpu-1")
    assert "[node 1/2] gpu-1 serves dra" in out
    assert "[node 2/2] gpu-2 serves dra" in out
    for node in NODES:
        state = kube.objects[f"/api/v1/nodes/{node}"]
        assert state["metadata"]["labels"][KEY] == "dra"
        assert state["metadata"]["labels"]["workload.example.com/gpu-allocation"] == "device-plugin"  # kept
        assert not state["spec"].get("unschedulable")
        assert TRANSIT not in state["metadata"].get("annotations", {})
    assert RECORD not in kube.objects
    written = yaml.safe_load((project / "stacks" / "Pulumi.t.yaml").read_text())
    assert written["config"]["eks-hybrid-gpu:cohorts"][0]["nodeSelector"] == MOVED


class Guarded(Fleet):
    """The fleet behind the cohort label guard: each node write is judged by the policy's two CEL validations on
    the node before and after it, and refused (403, nothing written) as the API server refuses it."""

    def __init__(self) -> None:
        super().__init__()
        self.judged: list[tuple[str, str | None, str | None, bool]] = []
        """(node, allocator label before, after, cordoned after) of each admitted node write."""

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if not path.startswith("/api/v1/nodes/"):
            return super().merge_patch(path, body)
        before = copy.deepcopy(self.objects[path])
        after = copy.deepcopy(before)
        merge_patch_into(after, body)
        key = "workload.example.com/gpu-allocation"
        if not (evaluate(guard_expression(key), before, after) and evaluate(allocator_expression(), before, after)):
            raise KubeApiError(403, allocator_refusal_message())
        labels = (before["metadata"].get("labels") or {}, after["metadata"].get("labels") or {})
        cordoned = bool(after.get("spec", {}).get("unschedulable"))
        self.judged.append((path, labels[0].get(KEY), labels[1].get(KEY), cordoned))
        return super().merge_patch(path, body)


def _guarded() -> Guarded:
    kube = Guarded()
    kube.objects.update(copy.deepcopy(_cluster().objects))
    kube.settle()
    return kube


def test_migrate_keeping_the_name_passes_the_guard_and_relabels_only_what_it_may(project: Path) -> None:
    """Every allocator-label change migrate makes on a schedulable node is the label phase's absent -> device-plugin;
    the moves to dra (and the removals before them) all come under its cordon."""
    _keeping(project)
    kube = _guarded()
    stack = migrate.read_stack_file("t", project)
    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5"), UpKeeping(kube)) == 0  # type: ignore[arg-type]
    changes = [(old, new, cordoned) for _, old, new, cordoned in kube.judged if old != new]
    assert {c for c in changes if not c[2]} == {(None, "device-plugin", False)}
    assert {c for c in changes if c[2]} == {(None, "dra", True), ("device-plugin", None, True)}
    assert all(kube.objects[f"/api/v1/nodes/{n}"]["metadata"]["labels"][KEY] == "dra" for n in NODES)


def test_a_hand_relabel_of_a_schedulable_node_is_refused_and_changes_nothing() -> None:
    kube = _guarded()
    path = f"/api/v1/nodes/{NODES[0]}"
    kube.merge_patch(path, {"metadata": {"labels": {KEY: "device-plugin"}}})
    for attempt in ("dra", None):
        with pytest.raises(KubeApiError, match="cannot change which allocator serves it"):
            kube.merge_patch(path, {"metadata": {"labels": {KEY: attempt}}})
        assert kube.objects[path]["metadata"]["labels"][KEY] == "device-plugin"
    kube.merge_patch(path, {"spec": {"unschedulable": True}})
    kube.merge_patch(path, {"metadata": {"labels": {KEY: "dra"}}})  # cordoned: the node's own move
    assert kube.objects[path]["metadata"]["labels"][KEY] == "dra"


def test_a_schedulable_host_with_another_allocator_value_is_refused_before_the_label_phase(project: Path) -> None:
    _keeping(project)
    kube = _guarded()
    stack = migrate.read_stack_file("t", project)
    kube.objects["/api/v1/nodes/gpu-2"]["metadata"]["labels"][KEY] = "dra"  # left by an earlier move
    before = copy.deepcopy(kube.objects)
    with pytest.raises(migrate.MigrateRefused) as refused:
        migrate.migrate(kube, stack, _args(project, "--timeout", "5"), UpKeeping(kube))  # type: ignore[arg-type]
    text = str(refused.value)
    assert f"gpu-2 ({KEY}=dra): the move one node at a time labels each host {KEY}=device-plugin first" in text
    assert f"`kubectl label node NODE {KEY}-`" in text
    assert "nothing was changed" in text
    assert "gpu-1" not in text.split(":")[1]  # a host without the label is no stray
    assert {p: o for p, o in kube.objects.items() if "/leases/" not in p} == {
        p: o for p, o in before.items() if "/leases/" not in p
    }
    kube.objects["/api/v1/nodes/gpu-2"]["spec"]["unschedulable"] = True  # cordoned, the guard lets the phase change it
    assert migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project)) is not None  # type: ignore[arg-type]


def test_an_interrupted_move_resumes_at_the_node_it_was_moving(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _keeping(project)
    kube = _guarded()  # the resumed node is cordoned again before its label changes
    stack = migrate.read_stack_file("t", project)
    up = UpKeeping(kube)
    real = kube.merge_patch

    def stops_at_gpu_2(path: str, body: dict[str, Any]) -> dict[str, Any]:
        found = real(path, body)
        if path == "/api/v1/nodes/gpu-2" and body.get("metadata", {}).get("labels") == {KEY: None}:
            raise KeyboardInterrupt
        return found

    kube.merge_patch = stops_at_gpu_2  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        migrate.migrate(kube, stack, _args(project, "--timeout", "5"), up)  # type: ignore[arg-type]
    record = _record(kube)
    assert (record["phase"], record["moved"], record["toSelector"]) == ("move-nodes", ["gpu-1"], MOVED)
    stopped = kube.objects["/api/v1/nodes/gpu-2"]
    assert stopped["spec"]["unschedulable"] is True
    assert KEY not in stopped["metadata"]["labels"]  # between its two owners, neither selects it
    kube.merge_patch = real  # type: ignore[method-assign]
    capsys.readouterr()
    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5"), up) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert (
        "resuming the migration recorded in the cluster: cohort plugin from device-plugin to dra one node at a "
        "time, phase move-nodes, 1 of 2 node(s) moved" in out
    )
    assert "[node 1/2]" not in out
    assert "[node 2/2] gpu-2: device-plugin -> dra" in out
    assert "cordoned gpu-1" not in out
    assert up.calls == ["install", "remove"]
    assert all(len(allocators) <= 1 for sample in kube.samples for allocators, _ in sample.values())
    assert not kube.objects["/api/v1/nodes/gpu-2"]["spec"].get("unschedulable")


def test_a_mapping_class_that_never_comes_moves_no_node(project: Path) -> None:
    _keeping(project)
    kube = _fleet()
    up = UpKeeping(kube)
    stack = migrate.read_stack_file("t", project)

    def without_mapping(why: str) -> None:
        up(why)
        kube.objects.pop(f"{DEVICE_CLASSES}/gpu.nvidia.com", None)

    with pytest.raises(WaitTimedOut, match=r"DeviceClass gpu\.nvidia\.com maps nvidia\.com/gpu: not after 1 s"):
        migrate.migrate(kube, stack, _args(project, "--timeout", "1"), without_mapping)  # type: ignore[arg-type]
    assert _record(kube)["phase"] == "install"
    assert not any(kube.objects[f"/api/v1/nodes/{n}"]["spec"].get("unschedulable") for n in NODES)


def test_hosts_already_selected_by_the_allocator_label_move_as_a_cohort_at_once(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _keeping(project)
    kube = _cluster()
    stack = migrate.read_stack_file("t", project)
    ledger = json.loads(kube.objects[LEDGER]["data"]["ownership.json"])
    ledger["cohorts"]["plugin"]["nodeSelector"] = MOVED
    kube.objects[LEDGER]["data"]["ownership.json"] = json.dumps(ledger)
    for node in NODES:
        kube.objects[f"/api/v1/nodes/{node}"]["metadata"]["labels"][KEY] = "dra"
    planned = migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project))  # type: ignore[arg-type]
    assert planned is not None
    assert (planned.per_node, planned.phase) == (False, "cordon")
    assert f"already holds {KEY}, which a move one node at a time changes" in capsys.readouterr().out


def test_each_phase_installs_the_old_owner_the_new_beside_it_or_the_new_alone() -> None:
    raw = {
        "cohorts": [{"name": "plugin", "owner": "dra", "nodeSelector": HOSTS}],
        "dra": {"extendedResourceName": NAME, "featureGates": {}},
    }
    moving = Migration("plugin", "device-plugin", "dra", "install", HOSTS, NODES, to_selector=MOVED)
    for phase, owner, selector, beside in (
        ("label", "device-plugin", HOSTS, None),
        ("install", "device-plugin", OLD, MOVED),
        ("move-nodes", "device-plugin", OLD, MOVED),
        ("remove", "dra", MOVED, None),
        ("uncordon", "dra", MOVED, None),
    ):
        changed, problems = apply_to_raw(raw, moving.at(phase))
        assert problems == []
        assert (changed["cohorts"][0]["owner"], changed["cohorts"][0]["nodeSelector"]) == (owner, selector), phase
        assert ("extendedResourceName" in changed["dra"]) is (owner == "dra"), phase
        other = beside_raw(raw, moving.at(phase))
        if beside is None:
            assert other is None, phase
            continue
        assert other is not None
        assert other["cohorts"][0] == {"name": "plugin", "owner": "dra", "nodeSelector": MOVED}
        assert other["dra"]["extendedResourceName"] == NAME
    again = parse_migration(moving.at("move-nodes").as_json(), "record")
    assert again == moving.at("move-nodes")


def test_the_phases_before_install_carry_no_mapping_and_install_keeps_it() -> None:
    raw = {
        "cohorts": [{"name": "plugin", "owner": "dra", "nodeSelector": HOSTS}],
        "dra": {"extendedResourceName": NAME, "featureGates": {}},
    }
    for phase, kept in (("cordon", False), ("remove", False), ("install", True), ("wait-published", True)):
        changed, problems = apply_to_raw(raw, Migration("plugin", "device-plugin", "dra", phase, HOSTS))
        assert problems == []
        assert ("extendedResourceName" in changed["dra"]) is kept, phase
        assert changed["dra"].get("featureGates") == {}
    assert raw["dra"]["extendedResourceName"] == NAME  # the file's values are left alone


def test_a_taint_or_a_required_affinity_that_shuts_the_pod_out_is_no_place() -> None:
    tainted = _node("c", "v1.37.2", {NAME: "4"})
    tainted["spec"] = {"taints": [{"key": NAME, "effect": "NoSchedule"}]}
    assert stranded([_pod("t-1", "a")], ["a"], [tainted], None) == [
        "ai/t-1 (ReplicaSet trainer-5d9) asks nvidia.com/gpu"
    ]
    tolerant = _pod("t-1", "a")
    tolerant["spec"]["tolerations"] = [{"key": NAME, "operator": "Exists"}]
    assert stranded([tolerant], ["a"], [tainted], None) == []
    pinned = _pod("t-1", "a")
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]}]}
    pinned["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    open_node = _node("c", "v1.37.2", {NAME: "4"})
    assert stranded([pinned], ["a"], [open_node], None) == ["ai/t-1 (ReplicaSet trainer-5d9) asks nvidia.com/gpu"]
    open_node["metadata"]["labels"]["kubernetes.io/hostname"] = "b"
    assert stranded([pinned], ["a"], [open_node], None) == []


@pytest.mark.parametrize(
    ("server", "kubelet", "classes", "says"),
    [
        ("v1.37.2", "v1.34.4-eks-3", [MAPPING], "Kubernetes 1.34 (the older of server and kubelet) has it off"),
        ("v1.37.2", "v1.37.2-eks-1", [MAPPING], None),
        ("v1.34.4", "v1.34.4-eks-3", [], None),  # no class maps a name: nothing to keep
        (None, "v1.37.2-eks-1", [MAPPING], "what cannot be read is not passed"),
    ],
)
def test_move_host_into_dra_where_a_class_maps_a_name_needs_the_gate_on_that_node(
    server: str | None, kubelet: str, classes: list[dict[str, Any]], says: str | None
) -> None:
    kube = FakeKube()
    if server is not None:
        kube.objects["/version"] = {"gitVersion": server}
    for found in classes:
        kube.objects[f"{DEVICE_CLASSES}/{found['metadata']['name']}"] = found
    state = NodeState(_node("gpu-1", kubelet), (), (), {}, (), ())
    if says is None:
        refuse_unkept_name(kube, state, "dra")  # type: ignore[arg-type]
        return
    with pytest.raises(MoveRefused) as refused:
        refuse_unkept_name(kube, state, "dra")  # type: ignore[arg-type]
    assert str(refused.value).startswith("node gpu-1 into cohort dra (dra): cohort dra cannot keep nvidia.com/gpu")
    assert says in str(refused.value)
    assert kube.writes == []


def test_the_stack_file_gets_the_hosts_new_selector_with_its_comments_kept() -> None:
    text = (
        "config:\n"
        "  eks-hybrid-gpu:cohorts:\n"
        "    - name: plugin  # the training fleet\n"
        "      owner: device-plugin\n"
        "      nodeSelector: {eks.amazonaws.com/compute-type: hybrid,\n"
        "        workload.example.com/gpu-allocation: device-plugin}\n"
        "      hostDriverVerified: true  # checked by hostcheck\n"
    )
    result = edited(text, "plugin", "dra", MOVED)
    assert result is not None
    assert "# the training fleet" in result
    assert "# checked by hostcheck" in result
    entry = yaml.safe_load(result)["config"]["eks-hybrid-gpu:cohorts"][0]
    assert entry == {"name": "plugin", "owner": "dra", "nodeSelector": MOVED, "hostDriverVerified": True}
