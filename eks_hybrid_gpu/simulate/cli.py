"""`eks-hybrid-gpu simulate`: start, stop, apply, fleet, clear, show, finish, reap, and the rehearsal commands."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from cluster.client import kubeclient, names
from cluster.findings import show
from eks_hybrid_gpu import cluster_access
from eks_hybrid_gpu.chartmirror import CHART_MIRROR_ENV
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.confirm import add_yes_option
from eks_hybrid_gpu.options import UsageError, add_output_option, read_text_argument, serialized
from eks_hybrid_gpu.simulate.cluster import apply, clear, describe
from eks_hybrid_gpu.simulate.kubelet import finish_pods, reap_pods
from eks_hybrid_gpu.simulate.model import SIMULATION_CONTROLLERS, SimulationError, default_simulation, load
from eks_hybrid_gpu.simulate.rehearse import Rehearsal, run_pulumi
from eks_hybrid_gpu.terminal import fitted, terminal_width
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import (
    COMPUTE_TYPE_LABEL,
    DEFAULT_COHORT_LABEL_KEY,
)


def _loopback_only(kube: kubeclient.Kube) -> None:
    host = urlparse(kube.server).hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        msg = (
            f"simulate writes fake Node objects and only targets a loopback API server; {kube.where} is not one. "
            "Start the simulated cluster with `eks-hybrid-gpu simulate start`"
        )
        raise kubeclient.KubeAccessError(msg)


def _default_kubeconfig() -> str:
    from eks_hybrid_gpu.localpaths import local_kubeconfig

    return str(local_kubeconfig())


def _start(_: argparse.Namespace) -> int:
    from eks_hybrid_gpu import engine, localcluster, localprocs
    from eks_hybrid_gpu.localpaths import local_state_dir

    state = local_state_dir()
    try:
        toolchain = engine.ensure_toolchain(("etcd", "kube"))  # a control plane only: `simulate up` finds its engine
    except engine.EngineUnavailable as error:
        print(f"simulate start: {error}", file=sys.stderr)
        return 1
    toolchain.activate()
    try:
        cluster = localcluster.start(state, controllers=SIMULATION_CONTROLLERS, scheduler=True)
    except localprocs.LocalClusterError as error:
        print(f"simulate start: {error}", file=sys.stderr)
        return 1
    print(f"simulated cluster at {cluster.server} (kube-scheduler, {', '.join(SIMULATION_CONTROLLERS)})")
    print(f"kubeconfig: {cluster.kubeconfig}")
    return 0


def _stop(_: argparse.Namespace) -> int:
    from eks_hybrid_gpu import localcluster
    from eks_hybrid_gpu.localpaths import local_state_dir

    stopped = localcluster.stop(local_state_dir())
    print(f"stopped {', '.join(stopped) or 'nothing'}")
    return 0


def _apply(args: argparse.Namespace) -> int:
    if args.file:
        text = read_text_argument(args.file, "--file", "a cohorts YAML file (`simulate fleet` prints one)")
        simulation = load(text, f"--file {show(args.file)}")
    else:
        simulation = default_simulation()
    kube = cluster_access.connect(args.kubeconfig or _default_kubeconfig(), args.context, args.request_timeout)
    _loopback_only(kube)
    result = apply(kube, simulation)
    print(f"simulated nodes: {', '.join(result.nodes)}")
    print(f"ResourceSlices ({DRIVER_DOMAIN}): {', '.join(result.slices) or 'none'}")
    if result.pruned:
        print(f"removed simulated nodes no longer in the file: {', '.join(result.pruned)}")
    _print_table(describe(kube))
    return 0


def _fleet(args: argparse.Namespace) -> int:
    """The fleet `local up` writes for a stack, as a cohorts file to edit and `simulate apply --file`."""
    from components.refusals import StackConfigError
    from eks_hybrid_gpu import projectdir
    from eks_hybrid_gpu.simulate.fleet import fleet_for
    from eks_hybrid_gpu.stackfile import stack_config
    from policy.gpu_allocation.vocab.stack_files import stack_file_name

    stack_file = stack_file_name(names.stack_name(args.stack))
    if not (projectdir.current() / stack_file).is_file():
        known = ", ".join(projectdir.stack_names()) or "none"
        msg = f"--stack {show(args.stack)}: {stack_file} does not exist; pass a stack of stacks/ ({known})"
        raise UsageError(msg)
    try:
        fleet = fleet_for(stack_config(args.stack))
    except StackConfigError as error:
        print(f"simulate fleet: {error}", file=sys.stderr)
        return 1
    nodes = [
        {
            **node.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
            "kubeletVersion": node.kubelet_version,
            "containerRuntimeVersion": node.container_runtime_version,
        }
        for node in fleet.nodes
    ]
    print(f"# The simulated fleet of {stack_file}, as `local up` writes it: edit a node (an old")
    print("# kubeletVersion rehearses an old host), then `eks-hybrid-gpu simulate apply --file THIS_FILE`.")
    print(yaml.safe_dump({"cohortLabelKey": fleet.cohort_label_key, "nodes": nodes}, sort_keys=False), end="")
    return 0


def _clear(args: argparse.Namespace) -> int:
    kube = cluster_access.connect(args.kubeconfig or _default_kubeconfig(), args.context, args.request_timeout)
    _loopback_only(kube)
    removed = clear(kube)
    print(f"removed simulated nodes: {', '.join(removed) or 'none'}")
    return 0


def _show(args: argparse.Namespace) -> int:
    kube = cluster_access.connect(args.kubeconfig or _default_kubeconfig(), args.context, args.request_timeout)
    rows = describe(kube)
    if args.output in ("json", "yaml"):
        print(serialized("SimulatedNodeList", {"items": rows}, args.output))
    else:
        _print_table(rows, terminal_width(args.output))
    return 0


def _finish(args: argparse.Namespace) -> int:
    kube = cluster_access.connect(args.kubeconfig or _default_kubeconfig(), args.context, args.request_timeout)
    _loopback_only(kube)
    done = finish_pods(kube, args.namespace, succeeded=not args.failed)
    print(f"reported {'failed' if args.failed else 'succeeded'}: {', '.join(done) or 'no bound, unfinished pods'}")
    return 0


def _reap(args: argparse.Namespace) -> int:
    kube = cluster_access.connect(args.kubeconfig or _default_kubeconfig(), args.context, args.request_timeout)
    _loopback_only(kube)
    reaped = reap_pods(kube, args.namespace)
    print(f"removed terminating pods: {', '.join(reaped) or 'none'}")
    return 0


def _print_table(rows: Sequence[dict[str, Any]], width: int | None = None) -> None:
    table = [("node", "compute-type", "cohort label", "GPU resources", "DRA devices")]
    for row in rows:
        labels = row["labels"]
        cohort = next((v for k, v in labels.items() if k == DEFAULT_COHORT_LABEL_KEY), "-")
        resources = ",".join(f"{k}={v}" for k, v in row["gpuResources"].items()) or "-"
        table.append(
            (row["name"], labels.get(COMPUTE_TYPE_LABEL, "-"), cohort, resources, ",".join(row["draDevices"]) or "-")
        )
    print("\n".join(fitted(table, width)))


def add_arguments(root: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu simulate ...` subcommands and their options."""
    sub = root.add_subparsers(dest="simulate_command", required=True)

    def with_cluster(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        cluster_access.add_cluster_options(p, kubeconfig_help="default: the local cluster's kubeconfig")
        return p

    sub.add_parser("start", help="start the local cluster with kube-scheduler and the Job/claim controllers")
    sub.add_parser("stop", help="stop the local cluster and remove its state")
    apply_p = with_cluster(sub.add_parser("apply", help="create/update/prune the simulated nodes and slices"))
    apply_p.add_argument("--file", help="cohorts YAML; default: the built-in fleet (see DEFAULT_COHORTS)")
    fleet_p = sub.add_parser("fleet", help="print the fleet `local up` writes for a stack, as a cohorts file")
    fleet_p.add_argument("--stack", default="local", help="stacks/Pulumi.<stack>.yaml of the repository")
    with_cluster(sub.add_parser("clear", help="delete every simulated node and ResourceSlice"))
    show_p = with_cluster(sub.add_parser("show", help="list the simulated nodes"))
    add_output_option(show_p)
    finish_p = with_cluster(sub.add_parser("finish", help="report bound pods as exited (the kubelet's part)"))
    cluster_access.add_namespace_option(finish_p, "the pods to finish")
    finish_p.add_argument("--failed", action="store_true", help="exit code 1 instead of 0")
    reap_p = with_cluster(sub.add_parser("reap", help="remove terminating pods (the kubelet's part)"))
    reap_p.add_argument("--namespace", default=None, help="default: all namespaces")
    for action in ("preview", "up", "destroy"):
        p = sub.add_parser(action, help=f"pulumi {action} of a stack file against the simulated cluster")
        p.add_argument("--stack", default="local", help="stacks/Pulumi.<stack>.yaml of the repository")
        p.add_argument("--stack-file", help="any stack file, e.g. a rehearsal copy; the stack is named after it")
        if action != "destroy":
            p.add_argument(
                "--chart-mirror",
                type=Path,
                default=None,
                help="a folder of <chart>-<version>.tgz archives, instead of ../shared/charts and upstream "
                f"(default: ${CHART_MIRROR_ENV}); the chain of `local up`, see docs/charts.md",
            )
        if action == "up":
            add_yes_option(p, "update the stack")
        p.set_defaults(action=action)


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu simulate ARGV...`."""
    return run_command("simulate", argv)


def _rehearse(args: argparse.Namespace) -> int:
    return run_pulumi(Rehearsal.from_args(args))


def run(args: argparse.Namespace) -> int:
    """Run one simulate command; usage and access problems exit 2 with one line, a file's content problems exit 1."""
    handlers = {
        "start": _start,
        "stop": _stop,
        "apply": _apply,
        "fleet": _fleet,
        "clear": _clear,
        "show": _show,
        "finish": _finish,
        "reap": _reap,
        "preview": _rehearse,
        "up": _rehearse,
        "destroy": _rehearse,
    }
    handler = handlers[args.simulate_command]
    return cluster_access.run_reporting(
        f"simulate {args.simulate_command}", lambda: handler(args), (SimulationError, kubeclient.KubeApiError, OSError)
    )
