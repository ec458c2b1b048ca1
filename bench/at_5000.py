"""The live read and the preview on a cluster of 5,000 nodes and 150,000 pods around the same 5 GPU nodes.

Section 5's kwok padding cannot reach this size on 2 cores (kwok would heartbeat 5,000 nodes and run 150,000 pods),
so the padding here is static: nodes created with the status a kubelet of an EKS node writes (conditions, addresses,
nodeInfo, the 50 images a kubelet reports: about 11 KiB of JSON each, 3 times a kwok node), no kubelet behind them,
and plain web pods bound to them that therefore stay Pending, which keeps them unfinished, as the whole-cluster read
counted them. The GPU nodes are the local stack's simulated fleet, run by kwok and the simulated device manager as
everywhere else. Then, each in a fresh interpreter, 3 runs: the preflight's scoped read and check, `inspect`'s
scoped read and report, and `pulumi preview` of the local stack with and without the preflight (simulated kubelets
paused for the timed previews, as `bench.preview_at_scale` does).

`python -m bench.at_5000 [NODES/PODS] [--against CHECKOUT]` (default 5005/150000: about 9 minutes to grow on 2
cores, 4 GiB of memory for the API server and etcd); `--against` runs another checkout's scoped reads beside
these, interleaved. Opt-in from `python -m bench --at-5000`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import live_read, preview_at_scale
from cluster.judge.scoped_read import UNFINISHED

SIZE = (5005, 150_000)
REPEATS = 3
SCOPED_MODES = live_read.SCOPED_MODES
STATIC_LABEL = "bench.eks-hybrid-gpu.io/static-padding"
"""On the static padding nodes (with `live_read.PADDING_LABEL`): no kubelet behind them."""
IMAGES = 50
"""Images a kubelet reports in status (its default `nodeStatusMaxImages`)."""


def static_node(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Node to create, the status a kubelet of an EKS m6i node would write for it)."""
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    now = "2026-12-01T00:00:00Z"
    conditions = [
        {"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": f"kubelet has {reason.lower()}"}
        for kind, reason in (("MemoryPressure", "SufficientMemory"), ("DiskPressure", "NoDiskPressure"))
    ] + [
        {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "sufficient PID"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
    ]
    images = [
        {
            "names": [f"registry.example.com/team-{i}/service@sha256:{i:02d}" + "ef" * 31, f"team-{i}/service:1.{i}"],
            "sizeBytes": 50_000_000 + i,
        }
        for i in range(IMAGES)
    ]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m6i.4xlarge",
                "topology.kubernetes.io/zone": "us-west-2a",
                "eks.amazonaws.com/nodegroup": "general",
                live_read.PADDING_LABEL: "true",
                STATIC_LABEL: "true",
            },
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-{zlib.crc32(name.encode()):017x}"},
    }
    status = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{**c, "lastHeartbeatTime": now, "lastTransitionTime": now} for c in conditions],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "ec2" + "0" * 29,
                "systemUUID": "ec2" + "0" * 33,
                "bootID": "0" * 36,
                "kernelVersion": "6.1.119-129.201.amzn2023.x86_64",
                "osImage": "Amazon Linux 2023.6.20241212",
                "containerRuntimeVersion": "containerd://1.7.25",
                "kubeletVersion": "v1.34.2-eks-1234567",
                "kubeProxyVersion": "v1.34.2-eks-1234567",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        }
    }
    return node, status


def grow_static(kube: Any, nodes: int, pods: int) -> None:
    """Static padding nodes and Pending web pods bound to them until the cluster holds `nodes` and `pods`.

    The 4 pods section 5 plants on the GPU nodes come first (`live_read.grow` to no padding), so the reads find
    what they find there.
    """
    live_read.grow(kube, 0, 0)
    existing = live_read._count(kube, "/api/v1/nodes")
    static = live_read._count(kube, "/api/v1/nodes", labelSelector=f"{STATIC_LABEL}=true")
    names = [f"static-node-{i:05d}" for i in range(static, static + max(0, nodes - existing))]

    def create_node(name: str) -> None:
        node, status = static_node(name)
        kube.create("/api/v1/nodes", node)
        kube.merge_patch(f"/api/v1/nodes/{name}/status", status)

    live_read._namespace(kube, live_read.NAMESPACE)
    with ThreadPoolExecutor(max_workers=12) as pool:
        for done, _ in enumerate(pool.map(create_node, names), 1):
            if done % 1000 == 0:
                live_read._progress(f"at 5000: {done}/{len(names)} static nodes")
        padding = [f"static-node-{i:05d}" for i in range(static + len(names))]
        unfinished = live_read._count(kube, "/api/v1/pods", fieldSelector=UNFINISHED)
        ours = live_read._count(kube, f"/api/v1/namespaces/{live_read.NAMESPACE}/pods")
        indexes = range(ours, ours + max(0, pods - unfinished))

        def create_pod(index: int) -> None:
            kube.create(
                f"/api/v1/namespaces/{live_read.NAMESPACE}/pods", live_read._pod(index, padding[index % len(padding)])
            )

        for done, _ in enumerate(pool.map(create_pod, indexes), 1):
            if done % 10_000 == 0:
                live_read._progress(f"at 5000: {done}/{len(indexes)} pods")


def run(size: tuple[int, int] = SIZE, repeats: int = REPEATS, against: Sequence[Path] = ()) -> dict[str, Any]:
    """Grow the cluster, measure the scoped reads and the previews, stop it.

    `against`: other checkouts (a change's worktree) whose scoped reads run too, interleaved, as `MODE@FOLDER`.
    """
    trees = {"": live_read.ROOT, **{f"@{tree.name}": tree.resolve() for tree in against}}
    from eks_hybrid_gpu import cluster_access, engine, local, localcluster
    from eks_hybrid_gpu.stackfile import stack_config

    toolchain = engine.ensure_toolchain()
    toolchain.activate()
    with tempfile.TemporaryDirectory(prefix="bench-5000-") as tmp:
        state = Path(tmp) / "cluster"
        cluster = localcluster.start(state, controllers=localcluster.WORKLOAD_CONTROLLERS, kwok=True)
        try:
            kubeconfig = str(cluster.kubeconfig)
            kube = cluster_access.connect(kubeconfig, None)
            local.simulate_nodes(kube, stack_config("local"))
            live_read._progress(f"at 5000: growing the cluster to {size[0]} nodes / {size[1]} pods (static padding)")
            started = time.perf_counter()
            grow_static(kube, *size)
            grown_s = time.perf_counter() - started
            reads: dict[str, list[dict[str, Any]]] = {}
            for _ in range(repeats):  # interleaved, so the trees share the machine's load
                for label, root in trees.items():
                    for mode in SCOPED_MODES:
                        found = live_read._worker("bench.live_worker", mode, kubeconfig, root=root)
                        reads.setdefault(f"{mode}{label}", []).append(found)
            preview_at_scale.remove_planted_pods(kube)
            stacks = preview_at_scale.preview_stacks(Path(tmp), cluster.kubeconfig)
            previews = preview_at_scale.timed_previews(stacks, state, repeats, pause=True)
        finally:
            localcluster.stop(state)
    return {
        "nodes": size[0],
        "pods": size[1],
        "grow_s": grown_s,
        "reads": {mode: live_read.read_figures(runs) for mode, runs in reads.items()},
        "previews": previews,
    }


def lines(report: dict[str, Any] | None) -> list[str]:
    """The 5,000-node table."""
    if not report:
        return []
    out = [
        f"At {report['nodes']} nodes / {report['pods']} pods (static padding nodes with an EKS kubelet's status, "
        f"Pending pods bound to them; grown in {report['grow_s']:.0f} s), the same 5 GPU nodes:",
        f"  {'read':<30} {live_read.READ_COLUMNS} {'requests':>9} {'kept nodes/pods':>16}",
    ]
    for mode, m in report["reads"].items():
        out.append(
            f"  {mode:<30} {live_read.read_cells(m)} {m['requests']:>9} {m['kept']['nodes']:>7}/{m['kept']['pods']:<8}"
        )
    walls = report["previews"]["walls"]
    cells = ", ".join(
        f"{name} {statistics.median(w):.2f} s [{min(w):.2f}–{max(w):.2f}]" for name, w in walls.items() if w
    )
    inside = report["previews"].get("preflight_s")
    out.append(
        f"  pulumi preview (simulated kubelets paused): {cells}; the preflight inside it "
        + ("?" if inside is None else f"{inside:.2f} s")
    )
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("size", nargs="?", default=f"{SIZE[0]}/{SIZE[1]}", help="NODES/PODS (default %(default)s)")
    parser.add_argument(
        "--against", type=Path, action="append", default=[], help="another checkout whose scoped reads run too"
    )
    options = parser.parse_args()
    print("\n".join(lines(run(live_read.parse_sizes(options.size)[0], against=options.against))))
