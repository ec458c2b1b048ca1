"""The preview's cost as the cluster grows around the same GPU cohorts: `pulumi preview` at 5 and 505 nodes.

The local cluster (kwok, the local stack's simulated fleet) is grown with padding kwok nodes and plain bound pods
as section 5 grows it (`bench.live_read.grow`); the GPU nodes' extra pods that section 5 plants to give the reads
something to find are removed again, so the preview is the one a platform team runs on a healthy cluster. Each
preview is the real engine with the policy pack and the program's preflight, in this process. Run alone:
`python -m bench.preview_at_scale [NODES/PODS ...]` (default 5/4 505/15079, 3 previews each).

Each size is timed twice: with kwok and the simulated device manager running (every simulated kubelet
heartbeating on the same 2 cores as the engine) and with both paused (SIGSTOP) for the timed rounds, as a CI
runner sees an EKS control plane: the cluster's objects are all there, its kubelets' CPU is elsewhere. Nothing
changes the cluster while paused (no node-lifecycle controller runs). The preflight's own time inside each
preview comes from the program's `preflight: judged ... in S s` line.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bench import live_read
from eks_hybrid_gpu import projectdir

SIZES = ((5, 4), (505, 15079))
REPEATS = 3
SIMULATORS = ("kwok", "device-manager")
"""The processes that play the kubelets: paused in the `paused` mode."""
MODES = ("running", "paused")
PREFLIGHT_LINE = re.compile(r"preflight: judged .*? in ([0-9.]+) s")


@contextlib.contextmanager
def _paused(state: Path, pause: bool) -> Iterator[None]:
    """The simulated kubelets stopped (SIGSTOP) inside the block when `pause`; continued however it ends."""
    from eks_hybrid_gpu import localprocs

    pids = [pid for name in SIMULATORS if pause and (pid := localprocs.pid_of(state, name)) is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def preflight_seconds(output: str) -> float | None:
    """The preflight's own seconds from a preview's output (`components.program.preflight_line`)."""
    found = PREFLIGHT_LINE.search(output)
    return float(found.group(1)) if found else None


def remove_planted_pods(kube: Any) -> None:
    """Delete the pods section 5 plants on the GPU nodes: the previews judge a healthy cluster."""
    for pod in kube.items("/api/v1/pods", labelSelector=f"{live_read.GPU_POD_LABEL}=true"):
        meta = pod["metadata"]
        kube.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", gracePeriodSeconds=0)
    deadline = time.monotonic() + 120
    while kube.items("/api/v1/pods", labelSelector=f"{live_read.GPU_POD_LABEL}=true") and time.monotonic() < deadline:
        time.sleep(1)


def _charts() -> dict[str, Any]:
    """The local stack's charts through the chain `local up` takes them by (mirror variable, `../shared/charts`,
    the user cache)."""
    from eks_hybrid_gpu import chartmirror
    from eks_hybrid_gpu.stackfile import stack_config

    overrides: dict[str, Any] = chartmirror.choose(stack_config("local")).overrides or {}
    return overrides


def _control_project(folder: Path) -> Path:
    """The local stack with `cluster.preflight: false`: the same preview without the live read, as a control."""
    folder.mkdir(parents=True)
    (folder / "stacks").mkdir()
    (folder / "Pulumi.yaml").write_text((projectdir.SHIPPED / "Pulumi.yaml").read_text())
    document = yaml.safe_load(projectdir.stack_file("local", projectdir.SHIPPED).read_text())
    document["config"]["eks-hybrid-gpu:cluster"]["preflight"] = False
    projectdir.stack_file("control", folder).write_text(yaml.safe_dump(document, sort_keys=False))
    return folder


def preview_stacks(tmp: Path, kubeconfig: Path) -> dict[str, Any]:
    """The local stack ("preflight") and its control without the preflight, on the engine of the toolchain."""
    from eks_hybrid_gpu import engine

    env = engine.prepare(tmp / "engine", kubeconfig, engine.ensure_toolchain())
    return {
        "preflight": engine.stack(env, "local", work_dir=projectdir.SHIPPED, charts=_charts()),
        "control": engine.stack(env, "control", work_dir=_control_project(tmp / "control"), charts=_charts()),
    }


def timed_previews(stacks: dict[str, Any], state: Path, repeats: int, *, pause: bool) -> dict[str, Any]:
    """`repeats` interleaved rounds of every stack's preview after one warm-up round: walls and the preflight's own."""
    from eks_hybrid_gpu import engine

    walls: dict[str, list[float]] = {name: [] for name in stacks}
    preflight: list[float] = []
    with _paused(state, pause):
        for rep in range(repeats + 1):  # the first round warms the plugin cache: not counted
            for name, stack in stacks.items():
                started = time.perf_counter()
                result = stack.preview(color="never", policy_packs=engine.policy_packs())
                wall = time.perf_counter() - started
                seconds = preflight_seconds(result.stdout)
                if rep:
                    walls[name].append(wall)
                    if name == "preflight" and seconds is not None:
                        preflight.append(seconds)
    return {"walls": walls, "preflight_s": statistics.median(preflight) if preflight else None}


def run(sizes: tuple[tuple[int, int], ...] = SIZES, repeats: int = REPEATS) -> list[dict[str, Any]]:
    """Median preview wall seconds at each size, with the preflight and without (the control), interleaved."""
    from eks_hybrid_gpu import cluster_access, engine, local, localcluster
    from eks_hybrid_gpu.stackfile import stack_config

    engine.ensure_toolchain().activate()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-preview-") as tmp:
        state = Path(tmp) / "cluster"
        cluster = localcluster.start(state, controllers=localcluster.WORKLOAD_CONTROLLERS, kwok=True)
        try:
            kube = cluster_access.connect(str(cluster.kubeconfig), None)
            local.simulate_nodes(kube, stack_config("local"))
            stacks = preview_stacks(Path(tmp), cluster.kubeconfig)
            for nodes, pods in sizes:
                print(f"[preview] growing the cluster to {nodes} nodes / {pods} pods", file=sys.stderr, flush=True)
                live_read.grow(kube, nodes, pods)
                remove_planted_pods(kube)
                for mode in MODES:
                    found = timed_previews(stacks, state, repeats, pause=mode == "paused")
                    print(f"[preview] {nodes}/{pods} {mode}: {found['walls']}", file=sys.stderr, flush=True)
                    medians = {name: statistics.median(w) for name, w in found["walls"].items()}
                    rows.append({"nodes": nodes, "pods": pods, "mode": mode, "median": medians, **found})
        finally:
            localcluster.stop(state)
    for row in rows:
        first = next(r for r in rows if r["mode"] == row["mode"])
        row["extra"] = {name: row["median"][name] / first["median"][name] - 1 for name in row["median"]}
        row["preflight_extra"] = (row["median"]["preflight"] - row["median"]["control"]) - (
            first["median"]["preflight"] - first["median"]["control"]
        )
    return rows


def lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per size and mode: the preview with the preflight and without, median [range], extra over the smallest."""
    out = [
        "`pulumi preview` of the local stack (engine, policy pack) as the cluster grows around the same GPU nodes;",
        "  control = the same stack with cluster.preflight false (no live read); simulators running = kwok and the",
        "  device manager heartbeat on the same cores, paused = SIGSTOPped for the timed rounds (as a CI runner sees",
        "  an EKS control plane); preflight = its own time inside the preview (the program's log line);",
        "  preflight's share = (with - control) here minus the same at the smallest size",
        f"  {'nodes/pods':12} {'simulators':10} {'with preflight':>26} {'control':>26} {'preflight':>10} {'share':>8}",
    ]
    for r in rows:
        cells = [
            f"{r['median'][n]:.2f} s [{min(r['walls'][n]):.2f}–{max(r['walls'][n]):.2f}] {r['extra'][n] * 100:+.0f}%"
            for n in ("preflight", "control")
        ]
        inside = "?" if r["preflight_s"] is None else f"{r['preflight_s']:.2f} s"
        share = f"{r['preflight_extra']:+.2f} s"
        size = f"{r['nodes']}/{r['pods']}"
        out.append(f"  {size:12} {r['mode']:10} {cells[0]:>26} {cells[1]:>26} {inside:>10} {share:>8}")
    return out


if __name__ == "__main__":
    chosen = tuple(live_read.parse_sizes(",".join(sys.argv[1:]))) if sys.argv[1:] else SIZES
    print("\n".join(lines(run(chosen))))
