"""The main job on the local default: local cluster with simulated GPU nodes + `pulumi up` of the local stack.

`local up` starts the loopback control plane with the workload controllers, kube-scheduler and kwok, writes
the simulated hybrid GPU nodes the stack's cohorts select (plus one EKS Auto Mode node), and runs `pulumi
up` with the policy pack: the stack awaits its DaemonSets and preflights the live nodes as on EKS. It then
prints the ownership map and which pods run on which node, and fails when a pod runs off its cohort.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.records.ledger import ledger_namespace
from components.config import ClusterConfig, StackConfig
from eks_hybrid_gpu import (
    chartmirror,
    cluster_access,
    engine,
    engine_tools,
    localcluster,
    localnodes,
    localprocs,
    placement,
    projectdir,
    simulate,
)
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.confirm import DECLINED_EXIT_CODE, NO_TERMINAL_EXIT_CODE, Confirm, add_yes_option, asker, refusal
from eks_hybrid_gpu.engine import engine_state_dir
from eks_hybrid_gpu.engine_up import planned_up
from eks_hybrid_gpu.localpaths import local_state_dir
from eks_hybrid_gpu.options import add_output_option, serialized
from eks_hybrid_gpu.stackfile import stack_config
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import LEDGER_NAME

LOCAL_STACK = "local"
NODES_READY_TIMEOUT_SECONDS = 60.0
PLAN_ONLY = "run it on a terminal to see the plan and answer"


def _shown(path: Path) -> str:
    """`path` relative to the project when it lies inside it (policy/analyzer), else in full (the shipped pack)."""
    project = projectdir.current()
    return str(path.relative_to(project)) if path.is_relative_to(project) else str(path)


def _print(message: str) -> None:
    print(message, flush=True)


def ownership_table(ownership: dict[str, Any]) -> str:
    """The cohort -> owner map as a plain-text table."""
    rows = [("cohort", "owner", "sharing", "namespace", "node selector")]
    for name, entry in sorted(ownership.get("cohorts", {}).items()):
        selector = ",".join(f"{k}={v}" for k, v in sorted(entry["nodeSelector"].items()))
        rows.append((name, entry["owner"], entry["sharing"], entry["namespace"], selector))
    lines = table_lines(rows)
    mode = ownership.get("operatorMode")
    lines.append(f"GPU Operator: {mode or 'none'}")
    return "\n".join(lines)


def created_objects(deployment: Mapping[str, Any] | None) -> list[str]:
    """`kind namespace/name` of every Kubernetes object in the stack's state, sorted."""
    objects = []
    for resource in (deployment or {}).get("resources", []):
        outputs = resource.get("outputs") or {}
        kind, metadata = outputs.get("kind"), outputs.get("metadata") or {}
        if not resource.get("custom") or not kind or not isinstance(metadata, dict):
            continue
        where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
        objects.append(f"{kind} {where}{metadata.get('name')}")
    return sorted(objects)


def start_cluster(
    cluster_dir: Path, toolchain: engine.Toolchain, config: ClusterConfig | None = None
) -> localcluster.LocalCluster:
    """The running local cluster with kwok, or a new one: control plane, workload controllers, scheduler, kwok.

    A new one runs the stack's declared `kubernetesVersion` (by its minor) with its `featureGates`.
    """
    toolchain.activate()
    try:
        cluster = localcluster.attach(cluster_dir)
    except localprocs.LocalClusterError:
        return localcluster.start(
            cluster_dir,
            controllers=localcluster.WORKLOAD_CONTROLLERS,
            kwok=True,
            kubernetes_version=config.kubernetes_version if config else None,
            feature_gates=config.feature_gates if config else None,
        )
    missing = set(localcluster.WORKLOAD_CONTROLLERS) - set(localcluster.controllers_of(cluster_dir))
    if missing or "kube-scheduler" not in localcluster.running(cluster_dir):
        msg = (
            f"the local cluster running from {cluster_dir} was started without the scheduler or the workload "
            "controllers kwok's nodes need; run `scripts/local-up.sh down`, then `scripts/local-up.sh` again"
        )
        raise localprocs.LocalClusterError(msg)
    _print(f"using the running local cluster at {cluster.server}")
    if "kwok" not in localcluster.running(cluster_dir):
        localnodes.start_kwok(cluster)
    elif "device-manager" not in localcluster.running(cluster_dir):
        localnodes.start_device_manager(cluster)
    return cluster


def _same_minor(running: str, declared: str | None) -> bool:
    """Whether the running server is of the declared minor (any, when none is declared)."""
    if declared is None:
        return True
    return running.removeprefix("v").split(".")[:2] == declared.removeprefix("v").split(".")[:2]


def simulate_nodes(kube: kubeclient.Kube, config: StackConfig, timeout: float = NODES_READY_TIMEOUT_SECONDS) -> None:
    """Write the stack's simulated fleet and wait until kwok reports every node Ready."""
    fleet = simulate.fleet_for(config)
    simulate.apply(kube, fleet)
    wanted = {n.name for n in fleet.nodes}
    deadline = time.monotonic() + timeout
    while True:
        nodes = kube.items("/api/v1/nodes", labelSelector=f"{simulate.SIMULATED_LABEL}=true")
        ready = {n["metadata"]["name"] for n in nodes if _node_ready(n)}
        if wanted <= ready:
            return
        if time.monotonic() > deadline:
            msg = f"simulated nodes not Ready after {timeout:.0f} s: {', '.join(sorted(wanted - ready))}; see kwok.log"
            raise localprocs.LocalClusterError(msg)
        time.sleep(0.5)


def _node_ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def up(stack_name: str = LOCAL_STACK, chart_mirror: Path | None = None, confirm: Confirm | None = None) -> int:
    """Bring up the local cluster (if needed) and run `pulumi up` of the stack with the policy pack.

    `confirm`: asked after the plan (the preview) is printed; None (`--yes`) updates without a preview or question.
    """
    started = time.monotonic()
    config = stack_config(stack_name)
    try:
        charts = chartmirror.choose(config, chart_mirror)
    except chartmirror.ChartMirrorError as error:
        print(f"local up: {error}", file=sys.stderr)
        return 2
    for notice in charts.notices:
        _print(notice)
    cluster_dir = local_state_dir()
    try:
        toolchain = engine_tools.choose(engine_tools.LOCAL_CLUSTER_TOOLS)
    except engine.EngineUnavailable as error:
        print(f"local up: {error}", file=sys.stderr)
        return 1
    try:
        cluster = start_cluster(cluster_dir, toolchain, config.cluster)
    except localprocs.LocalClusterError as error:
        print(f"local up: {error}", file=sys.stderr)
        return 1
    kube = cluster_access.connect(str(cluster.kubeconfig))
    running = str(kube.get("/version").get("gitVersion", ""))
    _print(f"Kubernetes {running} (the stack declares {config.cluster.kubernetes_version or 'no version'})")
    if not _same_minor(running, config.cluster.kubernetes_version):
        print(
            f"local up: the running local cluster is {running}, the stack declares "
            f"{config.cluster.kubernetes_version}; run `eks-hybrid-gpu local down`, then `local up` again",
            file=sys.stderr,
        )
        return 1
    simulate_nodes(kube, config)
    _print(
        "\nSimulated nodes (kwok and the simulated device manager play their kubelet; no GPU exists behind them;"
        " a node advertises what the allocator pods running on it publish):"
    )
    nodes = kube.items("/api/v1/nodes")
    standing = placement.operand_standing(config, nodes)
    _print(placement.node_table(nodes, config.cohort_label_key, placement.slice_devices(kube), standing))
    if standing:
        _print(placement.operand_line(standing))
    env = engine.prepare(engine_state_dir(), cluster.kubeconfig, toolchain)
    # The in-process program's preflight reads the loopback server, whose certificate is self-signed at start.
    warnings.filterwarnings("ignore", message="Unverified HTTPS request is being made to host '127.0.0.1'")
    stack = engine.stack(env, stack_name, charts=charts.overrides)
    _print(f"\npulumi up of stack {stack_name} with the policy pack {_shown(projectdir.policy_pack())}")
    try:
        result = planned_up(stack, confirm, _print, f"the local cluster at {cluster.server}")
    except auto.CommandError as error:
        _print(f"pulumi up failed: {error}")
        return 1
    if result is None:
        print(
            "local up: not updated (answered no): the stack is as it was; the local cluster stays up "
            "(`eks-hybrid-gpu local down` stops it)",
            file=sys.stderr,
        )
        return DECLINED_EXIT_CODE
    ownership = result.outputs["ownership"].value
    _print(f"\nOwnership map (also ConfigMap {ledger_namespace(config.namespaces)}/{LEDGER_NAME}):")
    _print(ownership_table(ownership))
    nodes, rows = placement.read(kube)
    _print("\nSimulated nodes after pulumi up (their allocators now publish):")
    _print(placement.node_table(nodes, config.cohort_label_key, placement.slice_devices(kube), standing))
    _print("\nPods by node:")
    _print(placement.pod_table(rows))
    wrong = placement.problems(config, nodes, rows)
    objects = created_objects(stack.export_stack().deployment)
    counts = Counter(line.split(" ", 1)[0] for line in objects)
    _print(
        f"\n{len(objects)} Kubernetes objects under management: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    )
    for line in objects:
        _print(f"  {line}")
    _print(f"\nkubeconfig: {cluster.kubeconfig}\nstate: {engine_state_dir()}")
    if wrong:
        _print(f"\n{len(wrong)} pod(s) run where they must not:")
        for line in wrong:
            _print(f"  - {line}")
        return 1
    _print(f"every pod runs on its cohort's nodes; none on the Auto Mode node ({time.monotonic() - started:.0f} s)")
    return 0


def down(stack_name: str = LOCAL_STACK) -> int:
    """Stop the local cluster and remove its state, and the local stack's state with it.

    Every object of the local stack lives in that cluster (source local: Kubernetes objects only), so they go with
    its etcd data. Destroying them one by one first only waits on the cluster's controllers for objects about to
    vanish: a Namespace's deletion waits for its content, and one such wait held a `local down` past 300 s.
    """
    cluster_dir = local_state_dir()
    try:
        cluster = localcluster.attach(cluster_dir)
    except localprocs.LocalClusterError as error:
        _print(str(error))
        return 0
    try:
        env = engine.prepare(engine_state_dir(), cluster.kubeconfig)
    except engine.EngineUnavailable as error:
        print(f"local down: {error}", file=sys.stderr)
        return 1
    stack = engine.stack(env, stack_name)
    objects = len((stack.export_stack().deployment or {}).get("resources") or [])
    stack.workspace.remove_stack(stack_name, force=True)
    stopped = localcluster.stop(cluster_dir)
    _print(
        f"removed stack {stack_name} ({objects} resources in its state; its objects lived in the local cluster); "
        f"stopped {', '.join(stopped) or 'nothing'}; removed {cluster_dir}"
    )
    return 0


def status(output: str = "json") -> int:
    """Say where the local cluster is and which of its processes run, as a LocalStatus report (-o json|yaml)."""
    try:
        cluster = localcluster.attach(local_state_dir())
    except localprocs.LocalClusterError as error:
        _print(str(error))
        return 1
    document = {
        "server": cluster.server,
        "kubeconfig": str(cluster.kubeconfig),
        "running": localcluster.running(local_state_dir()),
    }
    _print(serialized("LocalStatus", document, output))
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu local up [--chart-mirror DIR] | down | status`."""
    sub = parser.add_subparsers(dest="local_command", required=True)
    start = sub.add_parser("up", help="start the local cluster and its simulated nodes, then pulumi up the local stack")
    start.add_argument(
        "--chart-mirror",
        type=Path,
        help="a folder of <chart>-<version>.tgz archives to install from, instead of ../shared/charts and upstream "
        f"(default: ${chartmirror.CHART_MIRROR_ENV}); see docs/charts.md",
    )
    add_yes_option(start, "update the stack")
    sub.add_parser("down", help="stop the local cluster and remove it with the local stack's state")
    status_p = sub.add_parser("status", help="where the local cluster is and which of its processes run")
    add_output_option(status_p, ("json", "yaml"), default="json")


def main(argv: list[str]) -> int:
    """`eks-hybrid-gpu local ARGV...`."""
    return run_command("local", argv)


def run(args: argparse.Namespace) -> int:
    """Run `local up`, `down` or `status`."""
    if args.local_command == "up":
        stop = refusal("local up", yes=args.yes, dry_run=False, plan_only=PLAN_ONLY)
        if stop is not None:
            print(stop, file=sys.stderr)
            return NO_TERMINAL_EXIT_CODE
        return up(chart_mirror=args.chart_mirror, confirm=None if args.yes else asker())
    return down() if args.local_command == "down" else status(args.output)
