"""`migrate` against an in-memory API: the plan, its refusals, the phase order, --dry-run and resuming.

The fake `pulumi up` does what the real one does to the allocator pods (the integration test runs the real
engine): the remove phase deletes the old owner's pods and publication, the install phase starts the new one's.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.client.kubeclient import SLICES
from cluster.judge.node_state import TRANSIT_ANNOTATION
from cluster.records.ledger import LedgerError
from cluster.records.migration import parse_migration
from components.config import StackConfig
from components.mid_migration import apply_to_raw
from components.ownership_ledger import ownership_map
from eks_hybrid_gpu import migrate
from eks_hybrid_gpu.cli import parser
from policy.gpu_allocation.vocab.labels import COHORT_LABEL, OWNER_LABEL
from testkit.fake_kube import FakeKube
from tests.support.configs import DRA_COHORT, PLUGIN_COHORT, _base_config, cohort, hybrid_node

pytestmark = pytest.mark.unit

NS = "gpu-system"
LEDGER = f"/api/v1/namespaces/{NS}/configmaps/gpu-allocation-ledger"
RECORD = f"/api/v1/namespaces/{NS}/configmaps/gpu-allocation-migration"
NODES = ("gpu-1", "gpu-2")


def _pod(node: str, owner: str) -> tuple[str, dict[str, Any]]:
    name = f"{owner}-{node}"
    binary = "nvidia-device-plugin" if owner == "device-plugin" else "gpu-kubelet-plugin"
    pod = {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": name,
            "labels": {OWNER_LABEL: owner, COHORT_LABEL: "plugin"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "plugin", "image": "x", "command": [binary]}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    return f"/api/v1/pods/{name}", pod


def publish(kube: FakeKube, owner: str | None) -> None:
    """What the kubelet shows with `owner`'s allocator on each node (None: no allocator)."""
    for node in NODES:
        for other in ("device-plugin", "dra"):
            kube.objects.pop(_pod(node, other)[0], None)
            kube.objects.pop(f"{SLICES}/{node}-slice", None)
        allocatable = {"nvidia.com/gpu": "4" if owner == "device-plugin" else "0"}
        kube.objects[f"/api/v1/nodes/{node}"]["status"] = {"allocatable": allocatable}
        if owner is not None:
            path, pod = _pod(node, owner)
            kube.objects[path] = pod
        if owner == "dra":
            kube.objects[f"{SLICES}/{node}-slice"] = {
                "metadata": {"name": f"{node}-slice"},
                "spec": {"nodeName": node, "driver": "gpu.nvidia.com"},
            }


def cluster() -> FakeKube:
    kube = FakeKube()
    for node in NODES:
        kube.objects[f"/api/v1/nodes/{node}"] = {**hybrid_node(node, "device-plugin"), "spec": {}}
    ledger = ownership_map(StackConfig.model_validate(_base_config(cohorts=[cohort(PLUGIN_COHORT)])))
    kube.objects[LEDGER] = {
        "metadata": {"name": "gpu-allocation-ledger", "namespace": NS},
        "data": {"ownership.json": json.dumps(ledger)},
    }
    publish(kube, "device-plugin")
    return kube


def _args(project: Path, *extra: str, to: str = "dra") -> migrate.MigrateRequest:
    argv = ["migrate", "--stack", "t", "--cohort", "plugin", "--to", to, "--project", str(project), *extra]
    return migrate.MigrateRequest.from_args(parser("migrate").parse_args(argv))


class FakeUp:
    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.calls: list[str] = []

    def __call__(self, why: str) -> None:
        phase = json.loads(self.kube.objects[RECORD]["data"]["migration.json"])["phase"]
        self.calls.append(phase)
        publish(self.kube, None if phase == "remove" else "dra")


def test_dry_run_prints_the_plan_and_writes_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kube = cluster()
    before = copy.deepcopy(kube.objects)
    up = FakeUp(kube)
    stack = migrate.read_stack_file("t", project)

    assert migrate.migrate(kube, stack, _args(project, "--dry-run"), up) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert kube.objects == before
    assert kube.writes == []
    assert up.calls == []
    assert "1. [cordon] cordon gpu-1, gpu-2 and wait for the pods holding their GPUs" in out
    assert "4. [install] `pulumi up` with cohort plugin owned by dra" in out
    assert "--dry-run: nothing was changed" in out


def test_the_phases_run_in_order_and_the_stack_file_gets_the_new_owner(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = cluster()
    kube.objects["/api/v1/nodes/gpu-2"]["spec"]["unschedulable"] = True  # cordoned by someone else
    up = FakeUp(kube)
    stack = migrate.read_stack_file("t", project)

    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5"), up) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert up.calls == ["remove", "install"]
    recorded = [line.split("]")[0].removeprefix("[phase ") for line in out.splitlines() if "recorded in" in line]
    assert recorded == ["cordon", "remove", "wait-unpublished", "install", "wait-published", "uncordon"]
    assert RECORD not in kube.objects
    assert not kube.objects["/api/v1/nodes/gpu-1"]["spec"].get("unschedulable")
    assert kube.objects["/api/v1/nodes/gpu-2"]["spec"]["unschedulable"] is True  # not ours to uncordon
    for node in NODES:
        assert TRANSIT_ANNOTATION not in (kube.objects[f"/api/v1/nodes/{node}"]["metadata"].get("annotations") or {})
    text = (project / "stacks" / "Pulumi.t.yaml").read_text()
    assert text.startswith("# the team's stack\n")
    entry = yaml.safe_load(text)["config"]["eks-hybrid-gpu:cohorts"][0]
    assert entry["owner"] == "dra"
    assert entry["nodeSelector"] == {
        "eks.amazonaws.com/compute-type": "hybrid",
        "workload.example.com/gpu-allocation": "device-plugin",
    }
    assert "cohort plugin is owned by dra" in out


def test_a_rerun_resumes_from_the_recorded_phase(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kube = cluster()
    stack = migrate.read_stack_file("t", project)
    record = {
        "cohort": "plugin",
        "from": "device-plugin",
        "to": "dra",
        "phase": "wait-unpublished",
        "nodeSelector": {
            "eks.amazonaws.com/compute-type": "hybrid",
            "workload.example.com/gpu-allocation": "device-plugin",
        },
        "nodes": list(NODES),
        "cordonedByUs": list(NODES),
        "drain": False,
    }
    kube.objects[RECORD] = {
        "metadata": {"name": "gpu-allocation-migration", "namespace": NS},
        "data": {"migration.json": json.dumps(record)},
    }
    publish(kube, None)  # the killed run had removed the old owner
    up = FakeUp(kube)

    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5"), up) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert (
        "resuming the migration recorded in the cluster: cohort plugin from device-plugin to dra, "
        "phase wait-unpublished" in out
    )
    assert up.calls == ["install"]
    assert RECORD not in kube.objects


@pytest.mark.parametrize(
    ("to", "extra", "says"),
    [
        ("gpu-operator", (), "`eks-hybrid-gpu migrate` changes device-plugin <-> dra only"),
        ("device-plugin", (), None),
    ],
)
def test_unsupported_and_no_op_targets(project: Path, to: str, extra: tuple[str, ...], says: str | None) -> None:
    kube = cluster()
    stack = migrate.read_stack_file("t", project)
    args = _args(project, *extra, to=to)
    if says is None:
        assert migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), args) is None  # type: ignore[arg-type]
        return
    with pytest.raises(migrate.MigrateRefused, match=says):
        migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), args)  # type: ignore[arg-type]


def test_gpus_in_use_are_refused_without_drain(project: Path) -> None:
    kube = cluster()
    kube.objects["/api/v1/pods/train"] = {
        "metadata": {"name": "train", "namespace": "ai", "uid": "t"},
        "spec": {
            "nodeName": "gpu-1",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    stack = migrate.read_stack_file("t", project)
    with pytest.raises(migrate.MigrateRefused) as refused:
        migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project))  # type: ignore[arg-type]
    assert "pod ai/train holds nvidia.com/gpu=1 (container main) through the device plugin" in str(refused.value)
    assert "--drain` (PodDisruptionBudgets respected)" in str(refused.value)
    planned = migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project, "--drain"))  # type: ignore[arg-type]
    assert planned is not None
    assert planned.drain is True
    assert kube.writes == []


def test_another_migration_under_way_is_finished_first(project: Path) -> None:
    kube = cluster()
    record = {"cohort": "other", "from": "dra", "to": "device-plugin", "phase": "remove", "nodeSelector": {}}
    kube.objects[RECORD] = {
        "metadata": {"name": "gpu-allocation-migration", "namespace": NS},
        "data": {"migration.json": json.dumps(record)},
    }
    stack = migrate.read_stack_file("t", project)
    with pytest.raises(migrate.MigrateRefused, match="--cohort other --to device-plugin"):
        migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project))  # type: ignore[arg-type]


def test_the_target_owners_floors_are_checked_before_anything_changes(project: Path) -> None:
    path = project / "stacks" / "Pulumi.t.yaml"
    path.write_text(path.read_text().replace("hostDriverVerified: true", "hostDriverVerified: false"))
    kube = cluster()
    with pytest.raises(migrate.MigrateRefused, match="hostDriverVerified: is false"):
        migrate.plan(kube, migrate.read_stack_file("t", project), migrate.ClusterRecords(kube, NS), _args(project))  # type: ignore[arg-type]


# ---------------------------------------------------------------- relocations: same owner, another DaemonSet


def _stack_with(project: Path, cohorts: list[dict[str, Any]], namespaces: dict[str, str]) -> None:
    config = _base_config(cohorts=cohorts, namespaces=namespaces)
    config["cluster"]["preflight"] = True
    document = {"config": {f"eks-hybrid-gpu:{k}": v for k, v in config.items()}}
    (project / "stacks" / "Pulumi.t.yaml").write_text(yaml.safe_dump(document))


def _dra_cluster() -> FakeKube:
    """Cohort `plugin` owned by dra (its pods are stamped `plugin`), recorded by the ledger in gpu-dra-system."""
    kube = cluster()
    ledger = ownership_map(StackConfig.model_validate(_base_config(cohorts=[cohort(DRA_COHORT, name="plugin")])))
    kube.objects[LEDGER]["data"] = {"ownership.json": json.dumps(ledger)}
    for node in NODES:
        kube.objects[f"/api/v1/nodes/{node}"] = {**hybrid_node(node, "dra"), "spec": {}}
    publish(kube, "dra")
    return kube


def test_a_dra_namespace_move_runs_as_a_relocation_keeping_the_old_namespace_until_install(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stack_with(project, [cohort(DRA_COHORT, name="plugin")], {"draDriver": "team-dra"})
    kube = _dra_cluster()
    stack = migrate.read_stack_file("t", project)
    recorded: list[dict[str, Any]] = []

    class Up(FakeUp):
        def __call__(self, why: str) -> None:
            recorded.append(json.loads(self.kube.objects[RECORD]["data"]["migration.json"]))
            super().__call__(why)

    up = Up(kube)
    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5", to="dra"), up) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "migrate: cohort plugin (dra) relocated: namespace gpu-dra-system -> the stack's, phase cordon" in out
    assert "(namespaces kept meanwhile: {'draDriver': 'gpu-dra-system'})" in out
    assert up.calls == ["remove", "install"]
    assert [r["keptNamespaces"] for r in recorded] == [{"draDriver": "gpu-dra-system"}] * 2
    assert RECORD not in kube.objects


def test_a_relocation_keeps_the_namespace_for_the_program_until_install() -> None:
    record = {
        "cohort": "dra", "from": "dra", "to": "dra", "phase": "remove", "nodeSelector": {"k": "v"},
        "keptNamespaces": {"draDriver": "gpu-dra-system"},
    }  # fmt: skip
    relocation = parse_migration(record, "cm")
    assert relocation is not None
    assert relocation.relocation
    raw = {"cohorts": [{"name": "dra", "owner": "dra"}], "namespaces": {"draDriver": "team-dra"}}
    for phase, namespace in [("cordon", "gpu-dra-system"), ("wait-unpublished", "gpu-dra-system"),
                             ("install", "team-dra"), ("wait-published", "team-dra")]:  # fmt: skip
        changed, problems = apply_to_raw(raw, relocation.at(phase))
        assert problems == []
        assert changed["namespaces"]["draDriver"] == namespace, phase
    assert relocation.as_json() == {**record, "nodes": [], "cordonedByUs": [], "drain": False}


@pytest.mark.parametrize(
    ("kept", "says"),
    [
        (["gpu-dra-system"], "cm lacks a usable field"),
        ("gpu-dra-system", "cm lacks a usable field"),
        ({"draDriver": {"a": 1}}, "which `eks-hybrid-gpu migrate` never writes"),
        ({"draDriver": "ns; rm -rf /"}, "which `eks-hybrid-gpu migrate` never writes"),
        ({"devicePlugin": "elsewhere"}, "which `eks-hybrid-gpu migrate` never writes"),
    ],
)
def test_a_relocation_record_of_the_wrong_shape_is_refused(kept: Any, says: str) -> None:
    record = {
        "cohort": "dra",
        "from": "dra",
        "to": "dra",
        "phase": "remove",
        "nodeSelector": {},
        "keptNamespaces": kept,
    }
    with pytest.raises(LedgerError, match=re.escape(says)):
        parse_migration(record, "cm")


def test_a_device_plugin_namespace_move_names_the_two_updates_instead(project: Path) -> None:
    _stack_with(project, [cohort(PLUGIN_COHORT)], {"devicePlugin": "team-gpu"})
    kube = cluster()
    stack = migrate.read_stack_file("t", project)
    with pytest.raises(migrate.MigrateRefused) as refused:
        migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project, to="device-plugin"))  # type: ignore[arg-type]
    assert str(refused.value).startswith(
        "stacks/Pulumi.t.yaml moves namespaces.devicePlugin from gpu-system to team-gpu: namespaces.devicePlugin is "
        "also the home of the ledger and the migration record"
    )
    assert kube.writes == []


def test_a_renamed_cohort_is_migrated_from_the_ledgers_name(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _stack_with(project, [cohort(PLUGIN_COHORT, name="gpus")], {})
    kube = cluster()
    stack = migrate.read_stack_file("t", project)
    argv = ["migrate", "--stack", "t", "--cohort", "gpus", "--to", "device-plugin", "--project", str(project)]
    args = migrate.MigrateRequest.from_args(parser("migrate").parse_args([*argv, "--dry-run"]))

    assert migrate.migrate(kube, stack, args, FakeUp(kube)) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "migrate: cohort gpus (device-plugin) relocated: renamed from plugin, phase cordon" in out
    assert kube.writes == []


# ---------------------------------------------------------------- a second DRA cohort: merge into the one there is


def _two_cohorts(kube: FakeKube) -> None:
    """The ledger of the local default: cohort plugin (device-plugin) on gpu-1/2, cohort dra (dra) elsewhere."""
    cohorts = [cohort(PLUGIN_COHORT), cohort(DRA_COHORT)]
    ledger = ownership_map(StackConfig.model_validate(_base_config(cohorts=cohorts)))
    kube.objects[LEDGER]["data"] = {"ownership.json": json.dumps(ledger)}


def test_a_second_dra_cohort_is_refused_naming_the_merge(project: Path) -> None:
    _stack_with(project, [cohort(PLUGIN_COHORT), cohort(DRA_COHORT)], {})
    kube = cluster()
    _two_cohorts(kube)
    stack = migrate.read_stack_file("t", project)
    with pytest.raises(migrate.MigrateRefused) as refused:
        migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project))  # type: ignore[arg-type]
    assert str(refused.value) == (
        "cohort plugin: device-plugin -> dra: the ledger already has a dra cohort, dra, and dra installs once per "
        "cluster: move cohort plugin's hosts into it one at a time with `eks-hybrid-gpu migrate --stack t --cohort "
        "plugin --to dra --merge-into dra [--drain]`, which runs `eks-hybrid-gpu move-host NODE --to dra` for each of "
        "gpu-1, gpu-2; then remove cohort plugin from the stack file and run `pulumi up`"
    )
    assert kube.writes == []


def test_merge_into_plans_each_host_with_move_hosts_order(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _stack_with(project, [cohort(PLUGIN_COHORT), cohort(DRA_COHORT)], {})
    kube = cluster()
    _two_cohorts(kube)
    stack = migrate.read_stack_file("t", project)
    args = _args(project, "--merge-into", "dra", "--dry-run")

    assert migrate.migrate(kube, stack, args, FakeUp(kube)) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "merge: 2 host(s) of cohort plugin into cohort dra (dra), one at a time" in out
    assert out.index("[host 1/2] gpu-1") < out.index("[host 2/2] gpu-2")
    assert out.count("set workload.example.com/gpu-allocation=dra and wait until dra's allocator is Ready") == 2
    assert kube.writes == []
    with pytest.raises(migrate.MigrateRefused, match="needs both cohort plugin and a cohort other owned by dra"):
        migrate.migrate(kube, stack, _args(project, "--merge-into", "other"), FakeUp(kube))  # type: ignore[arg-type]


def test_a_node_held_by_another_run_refuses_the_migration_before_anything_changes(project: Path) -> None:
    from cluster.records.leases import LeaseHeld, Leases

    kube = cluster()
    other = Leases(kube, NS, "eks-hybrid-gpu move-host gpu-2 --to dra", print)  # type: ignore[arg-type]
    other.acquire("node", ["gpu-2"])
    other._stop.set()
    up = FakeUp(kube)
    stack = migrate.read_stack_file("t", project)
    with pytest.raises(LeaseHeld, match=r"node gpu-2 is held by another run: .* running `eks-hybrid-gpu move-host"):
        migrate.migrate(kube, stack, _args(project, "--timeout", "5"), up)  # type: ignore[arg-type]
    assert up.calls == []
    assert RECORD not in kube.objects
    for node in NODES:
        assert not kube.objects[f"/api/v1/nodes/{node}"]["spec"].get("unschedulable")
    leases = [p.rsplit("/", 1)[1] for p in kube.objects if "/leases/" in p]
    assert leases == ["gpu-allocation-node.gpu-2"]  # the cohort's and gpu-1's were given back


def test_the_migration_holds_its_cohort_and_nodes_while_it_runs_and_gives_them_back(project: Path) -> None:
    kube = cluster()
    seen: list[set[str]] = []

    class Watching(FakeUp):
        def __call__(self, why: str) -> None:
            seen.append({p.rsplit("/", 1)[1] for p in self.kube.objects if "/leases/" in p})
            super().__call__(why)

    stack = migrate.read_stack_file("t", project)
    assert migrate.migrate(kube, stack, _args(project, "--timeout", "5"), Watching(kube)) == 0  # type: ignore[arg-type]
    held = {"gpu-allocation-cohort.plugin", "gpu-allocation-node.gpu-1", "gpu-allocation-node.gpu-2"}
    assert seen == [held, held]
    assert not [p for p in kube.objects if "/leases/" in p]


def test_the_stack_config_is_parsed_once_per_phase(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file once, each phase's config once, however often the planning and the `pulumi up` runner ask for it."""
    parsed: list[object] = []
    load = migrate.planning.load_stack_config

    def counting(raw: Any, *args: Any, **kwargs: Any) -> StackConfig:
        parsed.append(raw)
        return load(raw, *args, **kwargs)

    monkeypatch.setattr(migrate.planning, "load_stack_config", counting)
    kube = cluster()
    stack = migrate.read_stack_file("t", project)
    planned = migrate.plan(kube, stack, migrate.ClusterRecords(kube, NS), _args(project))  # type: ignore[arg-type]
    assert planned is not None
    assert len(parsed) == 3  # the file; the cordon phase (the ledger's selector written out); the install phase
    install = migrate.planning.config_at(stack, planned.at("install"))
    assert migrate.planning.config_at(stack, migrate.runner._target(stack, "plugin", "dra")) is install
    assert migrate.planning.config_at(stack, planned) is migrate.planning.config_at(stack, planned)
    assert len(parsed) == 3
