"""A teammate's plain `pulumi up` beside a running `migrate` on the local default (#45): real engine, policy pack,
scheduler, kwok and the simulated device manager.

The module's stack `held` is the local stack with one cohort, `plugin` (device plugin), on sim-plugin-0/1. A
`migrate` of it runs in its own process and is held in phase wait-unpublished by a publication nobody explains; a
plain `pulumi up` of the stack started then is refused, naming the migration; the migration finishes; a plain
`pulumi up` after it succeeds. A sampler watches both nodes' pods, another the cohort's Lease.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi import automation as auto

from cluster.client import kubeclient
from eks_hybrid_gpu import engine, localcluster
from tests.integration.helpers import LeaseWatch, command_process, refused_up, stack_up, work_dir_with_stack
from tests.integration.test_in_transit import Sampler
from tests.integration.test_migrate import KEY, NODES, PLUGIN, RECORD, samplers_ok
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

STACK = "held"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases"
COHORT_LEASE = f"{LEASES}/gpu-allocation-cohort.plugin"
LEDGER = "/api/v1/namespaces/gpu-system/configmaps/gpu-allocation-ledger"
STALE = "/apis/resource.k8s.io/v1/resourceslices/stale-held-sim-plugin-1"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return work_dir_with_stack(tmp_path_factory.mktemp("plain-up"), STACK, {"cohorts": [PLUGIN]})


@pytest.fixture(scope="module")
def held_stack(engine_env: engine.EngineEnv, kube: kubeclient.Kube, work: Path) -> Iterator[auto.Stack]:
    with stack_up(engine_env, kube, work, STACK, NODES, cleanup=[RECORD]) as stack:
        yield stack


def _phase(kube: kubeclient.Kube) -> str | None:
    found = kube.get_or_none(RECORD)
    return json.loads(found["data"]["migration.json"])["phase"] if found else None


def test_a_pulumi_up_beside_a_running_migrate_is_refused_naming_it_and_the_migration_finishes(
    held_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
) -> None:
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": STALE.rsplit("/", 1)[1]},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "sim-plugin-1",
            "pool": {"name": "sim-plugin-1-stale", "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }
    migrate = [
        "--stack", STACK, "--cohort", "plugin", "--to", "dra", "--timeout", "120", "--project", str(work),
        "--state-dir", str(engine_env.state_dir), "--kubeconfig", str(cluster.kubeconfig), "--yes",
    ]  # fmt: skip
    samplers = [Sampler(kube, node) for node in NODES]
    for sampler in samplers:
        sampler.__enter__()
    with LeaseWatch(kube, COHORT_LEASE) as watch:
        started = time.monotonic()
        process = command_process("migrate", *migrate)
        try:
            wait_for(lambda: _phase(kube) == "remove" or None, "phase remove", timeout=120)
            kube.create("/apis/resource.k8s.io/v1/resourceslices", stale)
            wait_for(lambda: _phase(kube) == "wait-unpublished" or None, "phase wait-unpublished", timeout=180)
            ledger = kube.get(LEDGER)["data"]
            up_at = time.monotonic() - started
            text = refused_up(engine.stack(engine_env, STACK, work_dir=work))
            refused_in = time.monotonic() - started - up_at
            assert _phase(kube) == "wait-unpublished"  # the migration's own config and record were left alone
            assert kube.get(LEDGER)["data"] == ledger  # and the ledger
        except BaseException:
            process.kill()
            raise
        finally:
            kube.delete(STALE)
        output = process.communicate(timeout=300)[0]
        finished = time.monotonic() - started
        for sampler in samplers:
            sampler.__exit__()
        assert process.returncode == 0, output
        after = engine.stack(engine_env, STACK, work_dir=work).up(color="never", policy_packs=engine.policy_packs())
        wait_for(lambda: not kube.items(LEASES) or None, "no Lease left", timeout=5)

    flat = " ".join(text.split())
    assert "pulumi up of stack held refused, nothing was changed: cohort plugin is held by " in flat, text
    assert "running `eks-hybrid-gpu migrate --stack held --cohort plugin --to dra" in flat, text
    assert "it has held cohort plugin since " in flat, text
    assert "run `eks-hybrid-gpu migrate --stack held --cohort plugin --to dra" in flat, text
    assert "cohort plugin is owned by dra" in output
    assert "pulumi up failed" not in output  # its own pulumi up runs are the holder's, never refused
    assert after.summary.result == "succeeded"
    figures = samplers_ok(samplers, "device-plugin", "dra")
    for node in NODES:
        assert kube.get(f"/api/v1/nodes/{node}")["metadata"]["labels"][KEY] == "device-plugin"
    commands = set(watch.holders.values())
    assert any(c.startswith("eks-hybrid-gpu migrate --stack held") for c in commands), watch.holders
    assert "pulumi up --stack held" in commands, watch.holders  # the plain up after it held the Lease itself
    assert max(watch.longest.values()) < 30, watch.longest
    refusal = next(line.strip() for line in text.splitlines() if "refused, nothing was changed" in line)
    print(
        f"\nplain pulumi up started {up_at:.1f} s into migrate (phase wait-unpublished), refused in {refused_in:.1f} s:"
    )
    print(f"  {refusal}")
    print(f"migrate finished in {finished:.1f} s (exit 0); samplers: {figures}")
    print("longest a Lease went unrenewed, by holder: " + ", ".join(
        f"{watch.holders[h]!r} {s:.1f} s" for h, s in watch.longest.items()
    ))  # fmt: skip
    print(f"plain pulumi up after it: {after.summary.result}, {after.summary.resource_changes}")
