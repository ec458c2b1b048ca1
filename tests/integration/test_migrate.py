"""A cohort's owner changed in order on the local default: real engine, policy pack, scheduler, DaemonSet controller,
kwok and the simulated device manager (publications follow the allocator pods).

The module's stack `mig` is the local stack with one cohort, `plugin` (device plugin), on sim-plugin-0/1. It is
migrated to DRA and back with a sampler on both nodes, refused as a one-step flip, dry-run, and killed mid-phase.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from cluster.client import kubeclient, waits
from cluster.judge.node_state import TRANSIT_ANNOTATION
from eks_hybrid_gpu import engine, engine_lock, localcluster, localprocs, migrate, projectdir
from tests.integration.helpers import stack_up, work_dir_with_stack
from tests.integration.test_in_transit import Sampler, consumer, delete_pod, gpu_status
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

KEY = "workload.example.com/gpu-allocation"
NODES = ("sim-plugin-0", "sim-plugin-1")
RECORD = "/api/v1/namespaces/gpu-system/configmaps/gpu-allocation-migration"
HOSTS = {"eks.amazonaws.com/compute-type": "hybrid", KEY: "device-plugin"}
PLUGIN = {"name": "plugin", "owner": "device-plugin", "hostDriverVerified": True}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return work_dir_with_stack(tmp_path_factory.mktemp("migrate"), "mig", {"cohorts": [PLUGIN]})


@pytest.fixture(scope="module")
def mig_stack(engine_env: engine.EngineEnv, kube: kubeclient.Kube, work: Path) -> Iterator[auto.Stack]:
    with stack_up(engine_env, kube, work, "mig", NODES, cleanup=[RECORD]) as stack:
        yield stack


def argv(work: Path, env: engine.EngineEnv, cluster: localcluster.LocalCluster, to: str, *extra: str) -> list[str]:
    return [
        "--stack", "mig", "--cohort", "plugin", "--to", to, "--timeout", "120", "--project", str(work),
        "--state-dir", str(env.state_dir), "--kubeconfig", str(cluster.kubeconfig), "--yes", *extra,
    ]  # fmt: skip


def owner_in_file(work: Path) -> dict[str, Any]:
    document = yaml.safe_load((work / "stacks" / "Pulumi.mig.yaml").read_text())
    entry: dict[str, Any] = document["config"]["eks-hybrid-gpu:cohorts"][0]
    return entry


def snapshot(kube: kubeclient.Kube) -> dict[str, Any]:
    """Every object a migration could touch, without the fields the cluster changes by itself."""
    nodes = {
        n["metadata"]["name"]: (n["metadata"].get("labels"), n["metadata"].get("annotations"), n.get("spec"))
        for n in kube.items("/api/v1/nodes")
    }
    configmaps = {c["metadata"]["name"]: c.get("data") for c in kube.items("/api/v1/namespaces/gpu-system/configmaps")}
    daemonsets = sorted(d["metadata"]["name"] for d in kube.items("/apis/apps/v1/daemonsets"))
    pods = sorted(p["metadata"]["name"] for p in kube.items("/api/v1/pods"))
    return {"nodes": nodes, "configmaps": configmaps, "daemonsets": daemonsets, "pods": pods}


def sampled(kube: kubeclient.Kube, args: list[str], nodes: tuple[str, ...] = NODES) -> tuple[int, float, list[Sampler]]:
    """Run `migrate` with a sampler on each node: exit code, seconds, the samplers."""
    samplers = [Sampler(kube, node) for node in nodes]
    for sampler in samplers:
        sampler.__enter__()
    started = time.monotonic()
    try:
        code = migrate.main(args)
    finally:
        for sampler in samplers:
            sampler.__exit__()
    return code, time.monotonic() - started, samplers


def samplers_ok(samplers: list[Sampler], old: str, new: str) -> str:
    """Assert the sampler figures; return them in words for the report."""
    figures = []
    for sampler in samplers:
        assert sampler.samples
        assert max(len(a) for _, a, _ in sampler.samples) <= 1, sampler.report()
        assert not [s for s in sampler.samples if s[2] and any(a.startswith(f"{new}:") for a in s[1])]
        old_seen = [t for t, a, _ in sampler.samples if any(x.startswith(f"{old}:") for x in a)]
        new_seen = [t for t, a, _ in sampler.samples if any(x.startswith(f"{new}:") for x in a)]
        assert old_seen
        assert new_seen
        assert max(old_seen) < min(new_seen)
        gap = min(new_seen) - max(old_seen)
        figures.append(f"{sampler.report()}, {gap:.1f} s with no allocator")
    return "; ".join(figures)


def test_a_one_step_owner_flip_is_refused_at_preview_with_the_command_named(
    mig_stack: auto.Stack, engine_env: engine.EngineEnv, kube: kubeclient.Kube, tmp_path: Path
) -> None:
    consumer(kube, "busy-flip", "sim-plugin-0")
    flipped = work_dir_with_stack(tmp_path, "mig", {"cohorts": [{**PLUGIN, "owner": "dra", "nodeSelector": HOSTS}]})
    try:
        with pytest.raises(auto.CommandError) as refused:
            engine.stack(engine_env, "mig", work_dir=flipped).preview(color="never", policy_packs=engine.policy_packs())
        text = " ".join(str(refused.value).split())
        assert "changes cohort plugin's owner in one step, device-plugin -> dra" in text
        assert "on nodes sim-plugin-0, sim-plugin-1" in text
        assert "pod ai-workloads/busy-flip holds nvidia.com/gpu=1 (container train) through the device plugin" in text
        assert "`eks-hybrid-gpu migrate --stack mig --cohort plugin --to dra --drain`" in text
    finally:
        delete_pod(kube, "busy-flip")
    # Refused before anything was registered: no DRA driver was started beside the device plugin.
    assert not [d for d in kube.items("/apis/apps/v1/daemonsets") if "dra" in d["metadata"]["name"]]


def test_dry_run_leaves_every_object_unchanged(
    mig_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = snapshot(kube)
    file_before = (work / "stacks" / "Pulumi.mig.yaml").read_text()
    assert migrate.main(argv(work, engine_env, cluster, "dra", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "--dry-run: nothing was changed" in out
    assert "2. [remove] `pulumi up` with no owner for cohort plugin" in out
    assert snapshot(kube) == before
    assert (work / "stacks" / "Pulumi.mig.yaml").read_text() == file_before


def test_device_plugin_to_dra_and_back_never_has_two_allocators_on_a_node(
    mig_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for node in NODES:
        wait_for(lambda n=node: gpu_status(kube, n)[1] == {"nvidia.com/gpu": "4"} or None, f"{node} published")
    consumer(kube, "busy-migrate", "sim-plugin-0")
    code, to_dra, samplers = sampled(kube, argv(work, engine_env, cluster, "dra", "--drain"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "evicting pod ai-workloads/busy-migrate" in out
    figures_to_dra = samplers_ok(samplers, "device-plugin", "dra")
    for node in NODES:
        assert gpu_status(kube, node) == ({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "0"}, True)
        state = kube.get(f"/api/v1/nodes/{node}")
        assert not state["spec"].get("unschedulable")
        assert TRANSIT_ANNOTATION not in (state["metadata"].get("annotations") or {})
        assert state["metadata"]["labels"][KEY] == "device-plugin"  # the hosts kept their label: only the owner moved
    assert kube.get_or_none(RECORD) is None
    assert owner_in_file(work) == {**PLUGIN, "owner": "dra", "nodeSelector": HOSTS}
    ledger = json.loads(
        kube.get("/api/v1/namespaces/gpu-system/configmaps/gpu-allocation-ledger")["data"]["ownership.json"]
    )
    assert ledger["cohorts"]["plugin"]["owner"] == "dra"
    phases_dra = [line for line in out.splitlines() if line.startswith("[phase ") and "done in" in line]
    # A plain preview of the edited stack file is clean now: the repository and the cluster agree.
    engine.stack(engine_env, "mig", work_dir=work).preview(color="never", policy_packs=engine.policy_packs())

    code, back, samplers = sampled(kube, argv(work, engine_env, cluster, "device-plugin"))
    out = capsys.readouterr().out
    assert code == 0, out
    figures_back = samplers_ok(samplers, "dra", "device-plugin")
    for node in NODES:
        assert gpu_status(kube, node) == ({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}, False)
    assert owner_in_file(work)["owner"] == "device-plugin"
    phases_back = [line for line in out.splitlines() if line.startswith("[phase ") and "done in" in line]
    print(f"\nmigrate to dra {to_dra:.1f} s: {phases_dra}; samplers: {figures_to_dra}")
    print(f"migrate back {back:.1f} s: {phases_back}; samplers: {figures_back}")


STALE = "/apis/resource.k8s.io/v1/resourceslices/stale-sim-plugin-1"


def test_a_migration_killed_mid_phase_is_finished_by_the_same_command(
    mig_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A publication the old owner left behind (a ResourceSlice no pod explains) holds phase 3, wait-unpublished,
    # so the kill lands there: the old owner is removed, the new one not yet installed.
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "stale-sim-plugin-1"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "sim-plugin-1",
            "pool": {"name": "sim-plugin-1-stale", "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }
    command = [sys.executable, "-m", "eks_hybrid_gpu", "migrate", *argv(work, engine_env, cluster, "dra")]
    process = subprocess.Popen(
        command, cwd=projectdir.SHIPPED, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )

    def phase() -> str | None:
        found = kube.get_or_none(RECORD)
        return json.loads(found["data"]["migration.json"])["phase"] if found else None

    try:
        wait_for(lambda: phase() == "remove" or None, "phase remove", timeout=120)
        kube.create("/apis/resource.k8s.io/v1/resourceslices", stale)
        wait_for(lambda: phase() == "wait-unpublished" or None, "phase wait-unpublished", timeout=180)
        time.sleep(waits.PROGRESS_SECONDS + 2)  # one progress line, naming what is left
    finally:
        process.kill()
        output = process.communicate()[0]
        kube.delete(STALE)
    assert phase() == "wait-unpublished", output
    assert "waiting until the old allocator has left sim-plugin-1 and its publication ended" in output
    assert "ResourceSlice stale-sim-plugin-1" in output  # the progress line names what is left
    for node in NODES:
        assert kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable") is True
        names = [p["metadata"]["name"] for p in kube.items("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")]
        assert not [n for n in names if "dra" in n or "device-plugin" in n], names  # neither owner runs there
    assert owner_in_file(work)["owner"] == "device-plugin"
    # Mid-migration, a plain preview says so and would install neither owner (the stack file still says the old).
    preview = engine.stack(engine_env, "mig", work_dir=work).preview(color="never", policy_packs=engine.policy_packs())
    assert "mid-migration: cohort plugin from device-plugin to dra, phase wait-unpublished" in preview.stdout
    assert "installs no owner for cohort plugin" in preview.stdout
    assert not [line for line in preview.stdout.splitlines() if "+ " in line and "owners:" in line], preview.stdout

    assert migrate.main(argv(work, engine_env, cluster, "dra")) == 0
    out = capsys.readouterr().out
    assert "resuming the migration recorded in the cluster: cohort plugin from device-plugin to dra, phase " in out
    assert "phase wait-unpublished" in out
    assert "remove device-plugin from cohort plugin" not in out  # resumed after phase 2, not from the start
    assert "install dra for cohort plugin" in out
    assert kube.get_or_none(RECORD) is None
    for node in NODES:
        assert not kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")
        assert gpu_status(kube, node)[2] is True
    assert owner_in_file(work)["owner"] == "dra"


def _engine_children(home: Path, parent: int) -> list[engine_lock.Process]:
    return [p for p in engine_lock.engine_processes(home) if p.ppid == parent and p.name == "pulumi"]


def test_a_migration_killed_inside_its_pulumi_up_is_finished_by_the_same_command_leaving_nothing_running(
    mig_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    to = "device-plugin" if owner_in_file(work)["owner"] == "dra" else "dra"
    command = [sys.executable, "-m", "eks_hybrid_gpu", "migrate", *argv(work, engine_env, cluster, to)]
    process = subprocess.Popen(
        command, cwd=projectdir.SHIPPED, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(
            lambda: _engine_children(engine_env.pulumi_home, process.pid) or None, "migrate's pulumi up", timeout=180
        )
        time.sleep(2)  # inside the update: its provider and analyzer are up
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        output = process.communicate()[0]
    assert "pulumi up of stack mig with the policy pack" in output, output

    assert migrate.main(argv(work, engine_env, cluster, to)) == 0
    out = capsys.readouterr().out
    assert "resuming the migration recorded in the cluster" in out
    assert "took over Lease gpu-system/gpu-allocation-cohort.plugin" in out  # the killed run's, at once
    assert kube.get_or_none(RECORD) is None
    assert owner_in_file(work)["owner"] == to
    assert engine_lock.left_behind(engine_lock.engine_processes(engine_env.pulumi_home)) == []
    assert engine_lock.stack_locks(engine_env.state_dir / "backend", "eks-hybrid-gpu", "mig") == []
    assert not kube.items("/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases")
    cleared = [line for line in out.splitlines() if "stopping pid" in line or "stale lock" in line]
    print(f"\nafter kill -9 inside pulumi up: {cleared}")


def test_a_migration_killed_with_its_engine_while_installing_is_finished_by_the_same_command(
    mig_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A call's time limit kills migrate's whole process group (engine and provider too) while the install phase's
    `pulumi up` is creating the new owner's DaemonSet: the object is in the cluster, the state holds only a pending
    create. The same command run again finishes the move.

    kwok (the simulated kubelets) is stopped (SIGSTOP) from the install phase until the kill, so the DaemonSet's pods
    cannot become ready and the provider is still waiting on it when the kill lands, however loaded the machine.
    """
    to = "device-plugin" if owner_in_file(work)["owner"] == "dra" else "dra"
    namespace = "gpu-dra-system" if to == "dra" else "gpu-system"
    kwok = localprocs.pid_of(cluster.state_dir, "kwok")
    assert kwok is not None
    command = [sys.executable, "-m", "eks_hybrid_gpu", "migrate", *argv(work, engine_env, cluster, to)]
    process = subprocess.Popen(
        command,
        cwd=projectdir.SHIPPED,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in process.stdout or ():
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def phase() -> str | None:
        found = kube.get_or_none(RECORD)
        return json.loads(found["data"]["migration.json"])["phase"] if found else None

    def the_daemonset_created() -> bool | None:
        return bool(kube.items(f"/apis/apps/v1/namespaces/{namespace}/daemonsets")) or None

    try:
        wait_for(lambda: phase() == "install" or None, "phase install", timeout=240)
        os.kill(kwok, signal.SIGSTOP)
        wait_for(the_daemonset_created, f"the install phase's DaemonSet in {namespace}", timeout=120)
        time.sleep(1)  # the provider now waits for the DaemonSet's pods, which cannot become ready
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        os.kill(kwok, signal.SIGCONT)
        process.wait()
        reader.join(timeout=10)
    output = "".join(lines)
    assert "install " + to in output, output

    code = migrate.main(argv(work, engine_env, cluster, to))
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "resuming the migration recorded in the cluster" in out
    settled = [line for line in out.splitlines() if "pending create" in line or "killed update" in line]
    daemonset = f"DaemonSet {namespace}/"
    assert daemonset in settled[0], out  # the object whose second create the API server refused as a field conflict
    assert settled[-1].startswith("dropped "), out
    assert kube.get_or_none(RECORD) is None
    assert owner_in_file(work)["owner"] == to
    for node in NODES:
        assert not kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")
        assert gpu_status(kube, node)[2] is (to == "dra")
    pending = (mig_stack.export_stack().deployment or {}).get("pending_operations") or []
    assert pending == [], pending
    print("\nkilled while creating the DaemonSet; the same command then said:\n" + "\n".join(settled))


def test_a_pod_disruption_budget_holds_the_drain_before_anything_is_removed(
    mig_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if owner_in_file(work)["owner"] == "dra":  # after the kill test: back first, so a plain pod holds a GPU
        assert migrate.main(argv(work, engine_env, cluster, "device-plugin")) == 0
    capsys.readouterr()
    to = "dra"
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": "ai-workloads"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    consumer(kube, "guarded", "sim-plugin-0")
    kube.create("/apis/policy/v1/namespaces/ai-workloads/poddisruptionbudgets", pdb)
    args = argv(work, engine_env, cluster, to, "--drain")
    args[args.index("120")] = "8"
    try:
        assert migrate.main(args) == 1
        captured = capsys.readouterr()
        assert "not evicted yet" in captured.out
        assert "no pod holds a GPU on sim-plugin-0: not after 8 s" in captured.err
        assert json.loads(kube.get(RECORD)["data"]["migration.json"])["phase"] == "cordon"
        assert kube.get("/api/v1/nodes/sim-plugin-0")["spec"].get("unschedulable") is True
        assert gpu_status(kube, "sim-plugin-0")[1] == {"nvidia.com/gpu": "4"}  # the old owner was left in place
    finally:
        kube.delete("/apis/policy/v1/namespaces/ai-workloads/poddisruptionbudgets/guarded")
    args[args.index("8")] = "120"
    assert migrate.main(args) == 0
    assert kube.get_or_none("/api/v1/namespaces/ai-workloads/pods/guarded") is None
    assert owner_in_file(work)["owner"] == to
