"""The live read at scale (issue 29): the preflight's and `inspect`'s reads as the cluster grows around 5 GPU nodes.

One local cluster (`eks_hybrid_gpu.localcluster` with kwok) holds the local stack's simulated fleet: 5 GPU nodes.
`grow` adds kwok nodes (no GPU, no cohort label) and plain pods created bound to them (`spec.nodeName` set; kwok
makes them Running, so each carries the status a kubelet writes), up to each size of `SIZES` in nodes/pods. At
each size every read runs in a fresh interpreter (`bench.live_worker`), the scoped one and the whole-cluster one
it replaced, and the answers of both must be the same. The idle device manager's requests per second are counted
over `IDLE_SECONDS` at the smallest and the largest size (`bench.devicemanager_idle`), the working tree's
(watches) against the one before it (listing four times a second), taken from git. Then, at the largest size, the
GPU nodes get more pods (`GPU_NODE_PODS`: plain pods bound to them, holding nothing) and the scoped reads run
again, for the growth exponent against the GPU nodes' pods: what the scoped read's cost must follow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.stats import fit_exponent, summarize
from cluster.client.kube_http import WATCH_SECONDS
from policy.gpu_allocation.vocab.owners import DEVICE_PLUGIN_KIND

ROOT = Path(__file__).resolve().parents[1]
SIZES: tuple[tuple[int, int], ...] = ((5, 4), (55, 512), (205, 4034), (505, 15079))
"""(nodes, unfinished pods) of the cluster, GPU nodes included: the sizes issue 29 measured."""
MODES = ("preflight-whole", "preflight-scoped", "inspect-whole", "inspect-scoped")
NAMESPACE = "bench-apps"
PADDING_LABEL = "bench.eks-hybrid-gpu.io/padding"
"""On the kwok nodes the bench adds: no GPU, no cohort."""
GPU_POD_LABEL = "bench.eks-hybrid-gpu.io/gpu-node-pod"
EXTRA_GPU_POD_LABEL = "bench.eks-hybrid-gpu.io/gpu-node-extra"
"""On the plain pods the GPU-node series adds to the GPU nodes (removed again after the series)."""
GPU_NODE_PODS: tuple[int, ...] = (4, 104, 504, 2004)
"""Unfinished pods on the 5 GPU nodes in the GPU-node series: the 4 planted ones, then plain pods added."""
SCOPED_MODES = ("preflight-scoped", "inspect-scoped")
DEVICE_MANAGER = "eks_hybrid_gpu/simulate/devicemanager.py"
MIB = 1024 * 1024
IDLE_SECONDS = WATCH_SECONDS + 5.0
"""How long an idle device manager is counted: every informer's watch ends and is sent again once within it."""


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """`NODES/PODS,NODES/PODS,...` (as `--live-sizes` takes them) as pairs."""
    sizes = []
    for size in filter(None, (part.strip() for part in text.split(","))):
        nodes, _, pods = size.partition("/")
        sizes.append((int(nodes), int(pods)))
    return sizes


def _progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _node(name: str) -> dict[str, Any]:
    from eks_hybrid_gpu.localnodes import KWOK_NODE_ANNOTATION

    key, value = KWOK_NODE_ANNOTATION
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.4xlarge",
                "topology.kubernetes.io/zone": "us-west-2a",
                PADDING_LABEL: "true",
            },
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def _pod(index: int, node: str) -> dict[str, Any]:
    """A plain web pod of the size real ones have: two containers with env, probes, resources and mounts."""
    env = [{"name": f"SETTING_{i}", "value": f"value-{index}-{i}"} for i in range(8)]
    app = {
        "name": "app",
        "image": "registry.example.com/shop/web@sha256:" + "ab" * 32,
        "args": ["--port=8080", "--log-format=json"],
        "env": env,
        "ports": [{"containerPort": 8080, "name": "http"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
    }
    sidecar = {
        "name": "log-shipper",
        "image": "registry.example.com/ops/shipper@sha256:" + "cd" * 32,
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{index:05d}",
            "namespace": NAMESPACE,
            "labels": {"app": "web", "tier": "frontend", "release": "stable", "pod-index": str(index)},
            "annotations": {"example.com/owner": "shop-team", "example.com/build": f"build-{index % 97}"},
        },
        "spec": {
            "nodeName": node,
            "containers": [app, sidecar],
            "volumes": [{"name": "config", "emptyDir": {}}],
        },
    }


def _gpu_node_pods() -> list[dict[str, Any]]:
    """What the checks must find on the GPU nodes, as on a cluster that GPU hosts joined: 4 pods, at every size.

    A static NVIDIA device plugin (kube-system) on a dra cohort node and another team's on a plugin cohort node
    (second publishers: the preflight refuses both), and pods holding GPUs on a cohort node and on the Auto Mode
    node, which no cohort selects. The device manager publishes what the plugins advertise, so both reads judge
    real publications, and the answers they must agree on are not empty.
    """
    (image,) = DEVICE_PLUGIN_KIND.images
    plugin = {"name": "plugin", "image": f"nvcr.io/nvidia/{image}:v0.17.1"}  # NVIDIA's static manifest
    holder = {
        "name": "train",
        "image": "registry.example.com/ml/train:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    placed = (
        ("kube-system", "nvidia-device-plugin-static", "sim-dra-0", plugin),
        ("team-x", "nvidia-device-plugin-team-x", "sim-plugin-1", plugin),
        ("research", "gpu-holder-plugin", "sim-plugin-0", holder),
        ("research", "gpu-holder-auto", "sim-auto-l4-0", holder),
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {GPU_POD_LABEL: "true"}},
            "spec": {"nodeName": node, "containers": [container]},
        }
        for namespace, name, node, container in placed
    ]


def _count(kube: Any, path: str, **query: str) -> int:
    """Items of a list: one item and the server's remainingItemCount, else (a selector) every page counted."""
    document = kube.get(path, limit="1", **query)
    meta = document.get("metadata") or {}
    if "remainingItemCount" in meta or not meta.get("continue"):
        return len(document.get("items") or []) + int(meta.get("remainingItemCount") or 0)
    counted, token = 0, ""
    while True:  # the API server gives no remainingItemCount for a list with a selector
        page = kube.get(path, limit="500", **query, **({"continue": token} if token else {}))
        counted += len(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return counted


def _namespace(kube: Any, name: str) -> None:
    if not kube.get_or_none(f"/api/v1/namespaces/{name}"):
        kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def grow(kube: Any, nodes: int, pods: int) -> None:
    """Add padding kwok nodes and plain bound pods until the cluster holds `nodes` nodes and `pods` unfinished pods.

    The GPU nodes' pods (`_gpu_node_pods`) are created first, once; plain pods go to the padding nodes only (to any
    node while there is none), so the GPU nodes' pods stay the same at every size.
    """
    for name in (NAMESPACE, "team-x", "research"):
        _namespace(kube, name)
    if not _count(kube, "/api/v1/pods", labelSelector=f"{GPU_POD_LABEL}=true"):
        for pod in _gpu_node_pods():
            kube.create(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
    existing = _count(kube, "/api/v1/nodes")
    padding = _count(kube, "/api/v1/nodes", labelSelector=f"{PADDING_LABEL}=true")
    new_nodes = [f"bench-node-{i:04d}" for i in range(padding, padding + max(0, nodes - existing))]
    unfinished = _count(kube, "/api/v1/pods", fieldSelector="status.phase!=Succeeded,status.phase!=Failed")
    ours = _count(kube, f"/api/v1/namespaces/{NAMESPACE}/pods")
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda n: kube.create("/api/v1/nodes", _node(n)), new_nodes))
        names = [n["metadata"]["name"] for n in kube.items("/api/v1/nodes", labelSelector=f"{PADDING_LABEL}=true")]
        names = names or [n["metadata"]["name"] for n in kube.items("/api/v1/nodes")]
        indexes = range(ours, ours + max(0, pods - unfinished))
        list(
            pool.map(
                lambda i: kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(i, names[i % len(names)])), indexes
            )
        )
    _wait_running(kube)


def _gpu_nodes(kube: Any) -> list[str]:
    """The simulated fleet's GPU nodes: every node the bench did not add."""
    return sorted(
        n["metadata"]["name"]
        for n in kube.items("/api/v1/nodes")
        if (n["metadata"].get("labels") or {}).get(PADDING_LABEL) != "true"
    )


def _wait_running(kube: Any) -> None:
    deadline = time.monotonic() + 600
    while _count(kube, "/api/v1/pods", fieldSelector="status.phase=Pending") and time.monotonic() < deadline:
        time.sleep(2)  # kwok is still making the new pods Running: reads measured now would race its writes


def grow_gpu_node_pods(kube: Any, total: int) -> None:
    """Add plain pods bound to the GPU nodes (round robin) until they hold `total` unfinished pods, planted ones too."""
    nodes = _gpu_nodes(kube)
    have = len(_gpu_node_pods()) + _count(kube, "/api/v1/pods", labelSelector=f"{EXTRA_GPU_POD_LABEL}=true")
    start = _count(kube, f"/api/v1/namespaces/{NAMESPACE}/pods")

    def create(index: int) -> None:
        pod = _pod(100_000 + start + index, nodes[index % len(nodes)])
        pod["metadata"]["labels"][EXTRA_GPU_POD_LABEL] = "true"
        kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)

    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(create, range(max(0, total - have))))
    _wait_running(kube)


def remove_gpu_node_pods(kube: Any) -> None:
    """Delete the series' pods, so the GPU nodes hold the 4 planted pods again."""
    selector = f"{EXTRA_GPU_POD_LABEL}=true"
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(
            pool.map(
                lambda p: kube.delete(
                    f"/api/v1/namespaces/{NAMESPACE}/pods/{p['metadata']['name']}", gracePeriodSeconds=0
                ),
                kube.items(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=selector),
            )
        )
    deadline = time.monotonic() + 120
    while _count(kube, "/api/v1/pods", labelSelector=selector) and time.monotonic() < deadline:
        time.sleep(1)


def gpu_node_series(kube: Any, kubeconfig: str, repeats: int, counts: Sequence[int] = GPU_NODE_PODS) -> dict[str, Any]:
    """The scoped reads as the GPU nodes' pods grow at the current cluster size, and the exponent against them."""
    rows: list[dict[str, Any]] = []
    try:
        for total in counts:
            _progress(f"live read: {total} unfinished pods on the GPU nodes")
            grow_gpu_node_pods(kube, total)
            runs = {
                mode: [_worker("bench.live_worker", mode, kubeconfig) for _ in range(repeats)] for mode in SCOPED_MODES
            }
            rows.append(
                {
                    "gpu_node_pods": total,
                    "modes": {mode: read_figures(runs[mode]) for mode in SCOPED_MODES},
                }
            )
    finally:
        remove_gpu_node_pods(kube)
    return {"rows": rows, "growth": series_growth(rows)}


def series_growth(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Least-squares exponent of each scoped read's figures against the GPU nodes' pods (log-log)."""
    xs = [float(r["gpu_node_pods"]) for r in rows]

    def figure(row: dict[str, Any], mode: str, key: str) -> float:
        found = row["modes"][mode][key]
        return float(found["median"] if isinstance(found, dict) else found)

    exponents: dict[str, dict[str, float]] = {}
    if len(rows) > 1:
        for mode in SCOPED_MODES:
            exponents[mode] = {
                key: fit_exponent(xs, [figure(r, mode, key) for r in rows]).exponent
                for key in ("wall_s", "peak_rss_bytes", "bytes_read")
            }
    return exponents


def _worker(module: str, *args: str, root: Path = ROOT) -> dict[str, Any]:
    """`python -m MODULE ARGS` in a fresh interpreter, with `root`'s code first on the path; its last JSON line."""
    result = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=root, check=False, capture_output=True, text=True, timeout=900
    )
    if result.returncode != 0:
        msg = f"{module} {' '.join(args)} exited {result.returncode}; its stderr ends with:\n{result.stderr[-3000:]}"
        raise RuntimeError(msg)
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def _tree_before(folder: Path) -> Path | None:
    """The whole tree of the commit before the device manager watched, from git; None outside a checkout.

    The old device manager runs with its own commit's modules (the house has moved the ones it imports since), and
    the counting worker of today beside it.
    """
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "eks_hybrid_gpu/simulate/informers.py"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    if not added:
        return None
    tree = folder / "before"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", f"{added[-1]}^"], cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    (tree / "bench").mkdir(exist_ok=True)
    (tree / "bench" / "__init__.py").touch()
    shutil.copy(ROOT / "bench" / "devicemanager_idle.py", tree / "bench" / "devicemanager_idle.py")
    return tree


def _idle(kubeconfig: str, before: Path | None, seconds: float) -> dict[str, Any]:
    found = {"after": _worker("bench.devicemanager_idle", str(ROOT / DEVICE_MANAGER), kubeconfig, str(seconds))}
    if before is not None:
        found["before"] = _worker(
            "bench.devicemanager_idle", str(before / DEVICE_MANAGER), kubeconfig, str(seconds), root=before
        )
    return found


def run(
    sizes: Sequence[tuple[int, int]],
    repeats: int,
    idle_at_largest: bool = True,
    gpu_node_pods: Sequence[int] = GPU_NODE_PODS,
) -> dict[str, Any]:
    """Start the cluster, grow it size by size, measure every read `repeats` times at each; stop it.

    The idle device managers are counted at the smallest size, and at the largest when `idle_at_largest`; the
    GPU-node series (`gpu_node_series`, none when `gpu_node_pods` is empty) runs at the largest size.
    """
    idle_seconds = IDLE_SECONDS
    from eks_hybrid_gpu import cluster_access, engine, local, localcluster
    from eks_hybrid_gpu.stackfile import stack_config

    engine.ensure_toolchain().activate()  # etcd, kube-apiserver and kwok from the toolchain cache
    rows: list[dict[str, Any]] = []
    idle: dict[str, Any] = {}
    series: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        state = Path(tmp) / "state"
        before = _tree_before(Path(tmp))
        _progress("live read: starting the local cluster with kwok and the local stack's simulated fleet")
        cluster = localcluster.start(state, controllers=localcluster.WORKLOAD_CONTROLLERS, kwok=True)
        try:
            kubeconfig = str(cluster.kubeconfig)
            kube = cluster_access.connect(kubeconfig, None)
            local.simulate_nodes(kube, stack_config("local"))
            for index, (nodes, pods) in enumerate(sizes):
                _progress(f"live read: growing the cluster to {nodes} nodes / {pods} pods")
                started = time.perf_counter()
                grow(kube, nodes, pods)
                grown_s = time.perf_counter() - started
                if index == 0 or (idle_at_largest and index == len(sizes) - 1):
                    _progress(f"live read: idle device manager at {nodes}/{pods}, {idle_seconds:.0f} s each")
                    idle[f"{nodes}/{pods}"] = _idle(kubeconfig, before, idle_seconds)
                runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
                for rep in range(repeats):
                    for mode in MODES:
                        _progress(f"live read: {mode} at {nodes}/{pods}, run {rep + 1}/{repeats}")
                        runs[mode].append(_worker("bench.live_worker", mode, kubeconfig))
                rows.append(_row(nodes, pods, grown_s, runs))
            series = gpu_node_series(kube, kubeconfig, repeats, gpu_node_pods) if gpu_node_pods else None
        finally:
            localcluster.stop(state)
    report = {"sizes": rows, "growth": growth(rows), "idle_device_manager": idle, "repeats": repeats}
    if series is not None:
        report["gpu_node_series"] = {"nodes": sizes[-1][0], "pods": sizes[-1][1], **series}
    return report


def read_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One read's runs as the tables show them: median [min–max] of the timed figures, the last run's counts."""
    last = runs[-1]
    timed = ("wall_s", "cpu_s", "peak_rss_bytes", "rss_after_imports_bytes")
    return {
        **{key: summarize([r[key] for r in runs]).as_dict() for key in timed},
        **{key: last[key] for key in ("bytes_read", "requests", "answers", "kept")},
    }


def _row(nodes: int, pods: int, grown_s: float, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    same = {
        kind: len({r["digest"] for mode in MODES if mode.startswith(kind) for r in runs[mode]}) == 1
        for kind in ("preflight", "inspect")
    }
    return {
        "nodes": nodes,
        "pods": pods,
        "grow_s": grown_s,
        "same_answers": same,
        "modes": {mode: read_figures(runs[mode]) for mode in MODES},
    }


def growth(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Least-squares exponent of each figure against the cluster's pods (log-log), per mode."""
    if len(rows) < 2:
        return {}
    xs = [float(row["pods"]) for row in rows]
    found: dict[str, Any] = {}
    for mode in MODES:
        found[mode] = {
            "wall_s": fit_exponent(xs, [row["modes"][mode]["wall_s"]["median"] for row in rows]).exponent,
            "peak_rss_bytes": fit_exponent(
                xs, [row["modes"][mode]["peak_rss_bytes"]["median"] for row in rows]
            ).exponent,
            "bytes_read": fit_exponent(xs, [float(row["modes"][mode]["bytes_read"]) for row in rows]).exponent,
        }
    return found


READ_COLUMNS = f"{'wall s':>20} {'CPU s':>6} {'peak RSS MiB':>14} {'MiB read':>9}"
"""The headers of `read_cells`."""


def read_cells(figures: dict[str, Any]) -> str:
    """One read's wall median [min–max], its CPU, peak RSS MiB and MiB read: the columns every live-read table shares.

    CPU is the reading process's own (a run recorded before it was measured shows `–`).
    """
    wall = figures["wall_s"]
    cpu = f"{figures['cpu_s']['median']:.3f}" if "cpu_s" in figures else "–"
    return (
        f"{wall['median']:>8.3f} [{wall['min']:.3f}–{wall['max']:.3f}] {cpu:>6} "
        f"{figures['peak_rss_bytes']['median'] / MIB:>14.0f} {figures['bytes_read'] / MIB:>9.2f}"
    )


def lines(report: dict[str, Any] | None) -> list[str]:
    """The table's section 5."""
    if not report:
        return ["5. live read at scale skipped (--no-live-read)"]
    out = [
        "5. Live read at scale: the local cluster with the local stack's 5 simulated GPU nodes, grown with kwok nodes "
        f"and plain pods bound to them; each read in a fresh interpreter, {report['repeats']} run(s) per size",
        "   whole = one unpaginated list per kind, kept whole (before); scoped = GPU nodes first, then their pods "
        "(after). Peak RSS is the process's (interpreter and imports included).",
        f"{'nodes/pods':>12} {'read':<18} {READ_COLUMNS} {'requests':>9} {'kept nodes/pods':>16} {'same answers':>13}",
    ]
    for row in report["sizes"]:
        for mode in MODES:
            m = row["modes"][mode]
            out.append(
                f"{row['nodes']:>5}/{row['pods']:<6} {mode:<18} {read_cells(m)} {m['requests']:>9} "
                f"{m['kept']['nodes']:>7}/{m['kept']['pods']:<8} "
                f"{'yes' if row['same_answers'][mode.split('-')[0]] else 'NO':>13}"
            )
    growth = report.get("growth") or {}
    if growth:
        out.append("growth exponent against the cluster's pods (least squares, log-log):")
        for mode, figures in growth.items():
            out.append(
                f"  {mode:<18} wall {figures['wall_s']:.2f}, peak RSS {figures['peak_rss_bytes']:.2f}, "
                f"bytes read {figures['bytes_read']:.2f}"
            )
    for size, found in (report.get("idle_device_manager") or {}).items():
        cells = [
            f"{label} {found[key]['requests_per_s']:.2f} req/s "
            f"({found[key]['requests']} in {found[key]['seconds']:.0f} s)"
            for key, label in (("before", "before (lists every 0.25 s)"), ("after", "after (watches)"))
            if key in found
        ]
        out.append(f"idle simulated device manager at {size}: " + "; ".join(cells))
    out += gpu_node_lines(report.get("gpu_node_series"))
    out.append("")
    return out


def gpu_node_lines(series: dict[str, Any] | None) -> list[str]:
    """The GPU-node series: the scoped reads as the GPU nodes' pods grow, and their exponent against those pods."""
    if not series:
        return []
    out = [
        f"scoped reads as the 5 GPU nodes' pods grow, at {series['nodes']} nodes "
        f"(plain pods bound to the GPU nodes added to the {series['pods']} of the cluster):",
        f"  {'GPU-node pods':>13} {'read':<18} {READ_COLUMNS} {'kept pods':>10}",
    ]
    for row in series["rows"]:
        for mode in SCOPED_MODES:
            m = row["modes"][mode]
            out.append(f"  {row['gpu_node_pods']:>13} {mode:<18} {read_cells(m)} {m['kept']['pods']:>10}")
    for mode, figures in (series.get("growth") or {}).items():
        out.append(
            f"  exponent against the GPU nodes' pods, {mode}: wall {figures['wall_s']:.2f}, "
            f"peak RSS {figures['peak_rss_bytes']:.2f}, bytes read {figures['bytes_read']:.2f}"
        )
    return out
