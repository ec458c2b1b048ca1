"""`migrate --merge-into` with a GPU in use, on the local default: real engine, policy pack, scheduler, DaemonSet
controller, kwok and the simulated device manager (publications follow the allocator pods).

The module's stack `mrg` is the local stack with two cohorts: `plugin` (device plugin, sim-plugin-0/1) and `dra`
(DRA driver, sim-dra-0/1). The DRA chart installs once per cluster, so `plugin` cannot become a second DRA cohort:
its hosts are merged into `dra`, one at a time, in move-host's order, while a pod holds sim-plugin-0's GPU through
the device plugin. The real run must do what its `--dry-run` showed (it once refused what the dry run planned), and
a sampler on both hosts must never see two allocators, nor the holder beside the DRA driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.judge.node_state import TRANSIT_ANNOTATION
from eks_hybrid_gpu import engine, localcluster, migrate, movehost
from tests.integration.helpers import stack_up, work_dir_with_stack
from tests.integration.test_in_transit import WORKLOADS, consumer, delete_pod, gpu_status
from tests.integration.test_migrate import KEY, PLUGIN, sampled, samplers_ok, snapshot
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN_NODES = ("sim-plugin-0", "sim-plugin-1")
DRA_NODES = ("sim-dra-0", "sim-dra-1")
DRA = {"name": "dra", "owner": "dra", "hostDriverVerified": True}
HOLDER = "busy-merge"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return work_dir_with_stack(tmp_path_factory.mktemp("merge"), "mrg", {"cohorts": [PLUGIN, DRA]})


@pytest.fixture(scope="module")
def mrg_stack(engine_env: engine.EngineEnv, kube: kubeclient.Kube, work: Path) -> Iterator[auto.Stack]:
    with stack_up(engine_env, kube, work, "mrg", (*PLUGIN_NODES, *DRA_NODES)) as stack:
        yield stack


def _argv(work: Path, env: engine.EngineEnv, cluster: localcluster.LocalCluster, *extra: str) -> list[str]:
    return [
        "--stack", "mrg", "--cohort", "plugin", "--to", "dra", "--merge-into", "dra", "--drain", "--timeout", "120",
        "--project", str(work), "--state-dir", str(env.state_dir), "--kubeconfig", str(cluster.kubeconfig), "--yes",
        *extra,
    ]  # fmt: skip


def _serves_plugin(kube: kubeclient.Kube, node: str) -> bool:
    return gpu_status(kube, node)[1].get("nvidia.com/gpu", "0") != "0"


def _serves_dra(kube: kubeclient.Kube, node: str) -> bool:
    _, allocatable, has_slice = gpu_status(kube, node)
    return has_slice and allocatable.get("nvidia.com/gpu", "0") == "0"


def test_merge_into_moves_a_busy_cohort_host_by_host_as_its_dry_run_showed(
    mrg_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for node in PLUGIN_NODES:
        wait_for(lambda n=node: _serves_plugin(kube, n) or None, f"{node} publishes nvidia.com/gpu")
    for node in DRA_NODES:
        wait_for(lambda n=node: _serves_dra(kube, n) or None, f"{node} has its slice")
    consumer(kube, HOLDER, PLUGIN_NODES[0])
    try:
        before = snapshot(kube)
        assert not mid_move(kube)
        assert migrate.main(_argv(work, engine_env, cluster, "--dry-run")) == 0
        planned = capsys.readouterr().out
        assert "merge: 2 host(s) of cohort plugin into cohort dra (dra), one at a time" in planned
        assert "--dry-run: nothing was changed" in planned
        assert snapshot(kube) == before  # the dry run changed nothing

        code, seconds, samplers = sampled(kube, _argv(work, engine_env, cluster), PLUGIN_NODES)
        out = capsys.readouterr().out
        assert code == 0, out
        assert "every host of cohort plugin serves cohort dra" in out
        figures = samplers_ok(samplers, "device-plugin", "dra")  # never two allocators, never the holder beside DRA
        holder_seen = [t for t, _, holders in samplers[0].samples if HOLDER in holders]
        assert holder_seen  # the sampler saw the GPU in use before the move
        moves = [line for line in out.splitlines() if line.startswith("[host ")]
        assert moves == [f"[host 1/2] {PLUGIN_NODES[0]}", f"[host 2/2] {PLUGIN_NODES[1]}"], out
        for node in PLUGIN_NODES:
            assert kube.get(f"/api/v1/nodes/{node}")["metadata"]["labels"][KEY] == "dra"
            assert _serves_dra(kube, node)
            assert not kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")
        assert kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/{HOLDER}") is None  # drained, not run beside
        # One host after the other: the second host still served the device plugin while the first moved.
        first_dra = min(t for t, a, _ in samplers[0].samples if any(x.startswith("dra:") for x in a))
        second_plugin = [t for t, a, _ in samplers[1].samples if any(x.startswith("device-plugin:") for x in a)]
        assert second_plugin, figures
        assert max(second_plugin) > first_dra, figures
        with capsys.disabled():
            print(f"\nmerge-into with a GPU in use: {seconds:.1f} s; {figures}")
    finally:
        if kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/{HOLDER}") is not None:
            delete_pod(kube, HOLDER)
        for node in PLUGIN_NODES:  # back into their cohort, in move-host's order, for the tests after this one
            if kube.get(f"/api/v1/nodes/{node}")["metadata"]["labels"].get(KEY) != "device-plugin":
                assert movehost.main([node, "--to", "plugin", "--kubeconfig", str(cluster.kubeconfig)]) == 0


def mid_move(kube: kubeclient.Kube) -> list[str]:
    """The module's hosts mid-move (an earlier test's record would make this one continue a move, not start one)."""
    return [
        n
        for n in (*PLUGIN_NODES, *DRA_NODES)
        if TRANSIT_ANNOTATION in (kube.get(f"/api/v1/nodes/{n}")["metadata"].get("annotations") or {})
    ]
