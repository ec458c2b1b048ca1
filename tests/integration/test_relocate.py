"""Edits that replace an allocator without saying "owner", on the local default: real engine, policy pack,
scheduler, DaemonSet controller, kwok and the simulated device manager.

The module's stack `reloc` is the local stack with one cohort, `dra` (DRA driver), on sim-dra-0/1. A move of
`namespaces.draDriver` and a cohort rename are refused at preview (nothing new is started), then run by `migrate`
as relocations with a sampler on both nodes: no sample may show two allocator pods on a node.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from cluster.client import kubeclient
from eks_hybrid_gpu import engine, localcluster
from tests.integration.helpers import stack_up, work_dir_with_stack
from tests.integration.test_migrate import sampled
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

NODES = ("sim-dra-0", "sim-dra-1")
DRA = {"name": "dra", "owner": "dra", "hostDriverVerified": True}
KUBELET_PLUGIN = "dra-driver-nvidia-gpu-kubelet-plugin"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return work_dir_with_stack(tmp_path_factory.mktemp("relocate"), "reloc", {"cohorts": [DRA]})


@pytest.fixture(scope="module")
def reloc_stack(engine_env: engine.EngineEnv, kube: kubeclient.Kube, work: Path) -> Iterator[auto.Stack]:
    with stack_up(engine_env, kube, work, "reloc", NODES) as stack:
        yield stack


def _edit(work: Path, **config: Any) -> None:
    """Set `eks-hybrid-gpu:<key>` values in the module's stack file, as a person edits it."""
    path = work / "stacks" / "Pulumi.reloc.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"].update({f"eks-hybrid-gpu:{k}": v for k, v in config.items()})
    path.write_text(yaml.safe_dump(document))


def _kubelet_plugins(kube: kubeclient.Kube) -> list[str]:
    """`NAMESPACE/NAME` of every DRA kubelet-plugin DaemonSet in the cluster."""
    return sorted(
        f"{d['metadata']['namespace']}/{d['metadata']['name']}"
        for d in kube.items("/apis/apps/v1/daemonsets")
        if d["metadata"]["name"].endswith(KUBELET_PLUGIN)
    )


def _published(kube: kubeclient.Kube, node: str) -> bool:
    slices = kube.items("/apis/resource.k8s.io/v1/resourceslices", fieldSelector=f"spec.nodeName={node}")
    return any(s["spec"].get("driver") == "gpu.nvidia.com" for s in slices)


def _argv(work: Path, env: engine.EngineEnv, cluster: localcluster.LocalCluster, cohort: str) -> list[str]:
    return [
        "--stack", "reloc", "--cohort", cohort, "--to", "dra", "--timeout", "120", "--project", str(work),
        "--state-dir", str(env.state_dir), "--kubeconfig", str(cluster.kubeconfig), "--yes",
    ]  # fmt: skip


def _relocated(kube: kubeclient.Kube, argv: list[str], old: str, new: str) -> str:
    """Run `migrate` with a sampler on each node; assert one allocator at a time, the old pod gone before the new.

    The old pods are those of the first sample, the new those of the last (a renamed release keeps the DaemonSet's
    name, so only the pods tell them apart); `old` and `new` prefix them (`OWNER:NAMESPACE:`).
    """
    code, seconds, samplers = sampled(kube, argv, NODES)
    assert code == 0
    figures = [f"{seconds:.1f} s"]
    for sampler in samplers:
        assert sampler.samples
        assert max(len(a) for _, a, _ in sampler.samples) <= 1, sampler.report()
        first, last = set(sampler.samples[0][1]), set(sampler.samples[-1][1])
        assert len(first) == len(last) == 1, sampler.report()
        assert not first & last
        assert next(iter(first)).startswith(old)
        assert next(iter(last)).startswith(new)
        old_seen = [t for t, a, _ in sampler.samples if first & set(a)]
        new_seen = [t for t, a, _ in sampler.samples if last & set(a)]
        assert max(old_seen) < min(new_seen)
        figures.append(f"{sampler.report()}, {min(new_seen) - max(old_seen):.1f} s with no allocator")
    return "; ".join(figures)


def _refused_preview(engine_env: engine.EngineEnv, work: Path) -> str:
    with pytest.raises(auto.CommandError) as refused:
        engine.stack(engine_env, "reloc", work_dir=work).preview(color="never", policy_packs=engine.policy_packs())
    return " ".join(str(refused.value).split())


def test_a_dra_namespace_move_is_refused_at_preview_then_migrate_moves_it_one_allocator_at_a_time(
    reloc_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for node in NODES:
        wait_for(lambda n=node: _published(kube, n) or None, f"{node} publishes")
    _edit(work, namespaces={"draDriver": "team-dra"})

    text = _refused_preview(engine_env, work)
    assert "namespaces.draDriver: moves cohort dra's dra from namespace gpu-dra-system" in text
    assert "`eks-hybrid-gpu migrate --stack reloc --cohort dra --to dra`" in text
    assert _kubelet_plugins(kube) == [f"gpu-dra-system/{KUBELET_PLUGIN}"]  # refused before anything started

    figures = _relocated(kube, _argv(work, engine_env, cluster, "dra"), "dra:gpu-dra-system:", "dra:team-dra:")
    out = capsys.readouterr().out
    assert "relocated: namespace gpu-dra-system -> the stack's" in out
    assert _kubelet_plugins(kube) == [f"team-dra/{KUBELET_PLUGIN}"]
    for node in NODES:
        assert _published(kube, node)
        assert not kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")
    engine.stack(engine_env, "reloc", work_dir=work).preview(color="never", policy_packs=engine.policy_packs())
    phases = [line for line in out.splitlines() if line.startswith("[phase ") and "done in" in line]
    print(f"\nnamespace move: {figures}; {phases}")


def test_a_cohort_rename_is_refused_at_preview_then_migrate_renames_it_one_allocator_at_a_time(
    reloc_stack: auto.Stack,
    engine_env: engine.EngineEnv,
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hosts = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "dra"}
    _edit(work, cohorts=[{**DRA, "name": "h200", "nodeSelector": hosts}])

    text = _refused_preview(engine_env, work)
    assert "would start dra's allocator for cohort h200" in text
    assert "`eks-hybrid-gpu migrate --stack reloc --cohort h200 --to dra`" in text

    namespace = _kubelet_plugins(kube)[0].split("/")[0]
    figures = _relocated(kube, _argv(work, engine_env, cluster, "h200"), f"dra:{namespace}:", f"dra:{namespace}:")
    out = capsys.readouterr().out
    assert "relocated: renamed from dra" in out
    ledger = kube.get("/api/v1/namespaces/gpu-system/configmaps/gpu-allocation-ledger")["data"]["ownership.json"]
    assert sorted(json.loads(ledger)["cohorts"]) == ["h200"]
    engine.stack(engine_env, "reloc", work_dir=work).preview(color="never", policy_packs=engine.policy_packs())
    print(f"\ncohort rename: {figures}")
