"""The main job on the local default: local API server + `pulumi up` of the local stack with the policy pack."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from components.cluster import local_state_dir
from eks_hybrid_gpu import engine, localcluster

LOCAL_STACK = "local"


def engine_state_dir() -> Path:
    """Pulumi home and file backend of the local default (beside the cluster's state)."""
    return local_state_dir().parent / "local-engine"


def _print(message: str) -> None:
    print(message, flush=True)


def ownership_table(ownership: dict[str, Any]) -> str:
    """The cohort -> owner map as a plain-text table."""
    rows = [("cohort", "owner", "sharing", "namespace", "node selector")]
    for name, entry in sorted(ownership.get("cohorts", {}).items()):
        selector = ",".join(f"{k}={v}" for k, v in sorted(entry["nodeSelector"].items()))
        rows.append((name, entry["owner"], entry["sharing"], entry["namespace"], selector))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
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


def up(stack_name: str = LOCAL_STACK) -> int:
    """Bring up the local cluster (if needed) and run `pulumi up` of the stack with the policy pack."""
    cluster_dir = local_state_dir()
    toolchain = engine.ensure_toolchain()
    try:
        cluster = localcluster.attach(cluster_dir)
        _print(f"using the running local cluster at {cluster.server}")
    except localcluster.LocalClusterError:
        _with_path(toolchain)
        cluster = localcluster.start(cluster_dir)
    env = engine.prepare(engine_state_dir(), cluster.kubeconfig, toolchain)
    stack = engine.stack(env, stack_name)
    _print(f"pulumi up of stack {stack_name} with the policy pack {engine.POLICY_PACK.relative_to(engine.ROOT)}")
    try:
        result = stack.up(on_output=_print, color="never", policy_packs=engine.policy_packs())
    except auto.CommandError as error:
        _print(f"pulumi up failed: {error}")
        return 1
    ownership = result.outputs["ownership"].value
    _print("\nOwnership map (also ConfigMap gpu-system/gpu-allocation-ledger):")
    _print(ownership_table(ownership))
    objects = created_objects(stack.export_stack().deployment)
    counts = Counter(line.split(" ", 1)[0] for line in objects)
    _print(
        f"\n{len(objects)} Kubernetes objects under management: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    )
    for line in objects:
        _print(f"  {line}")
    _print(f"\nkubeconfig: {cluster.kubeconfig}\nstate: {engine_state_dir()}")
    return 0


def down(stack_name: str = LOCAL_STACK) -> int:
    """Destroy the local stack's resources, then stop the local cluster and remove its state."""
    cluster_dir = local_state_dir()
    try:
        cluster = localcluster.attach(cluster_dir)
    except localcluster.LocalClusterError as error:
        _print(str(error))
        return 0
    env = engine.prepare(engine_state_dir(), cluster.kubeconfig)
    stack = engine.stack(env, stack_name)
    stack.destroy(on_output=_print, color="never")
    stack.workspace.remove_stack(stack_name)
    stopped = localcluster.stop(cluster_dir)
    _print(f"stopped {', '.join(stopped) or 'nothing'}; removed {cluster_dir}")
    return 0


def status() -> int:
    """Say whether the local cluster runs, and print its ledger when it does."""
    try:
        cluster = localcluster.attach(local_state_dir())
    except localcluster.LocalClusterError as error:
        _print(str(error))
        return 1
    _print(json.dumps({"server": cluster.server, "kubeconfig": str(cluster.kubeconfig)}, indent=2))
    return 0


def _with_path(toolchain: engine.Toolchain) -> None:
    import os

    os.environ["PATH"] = os.pathsep.join([*toolchain.path_entries, os.environ.get("PATH", "")])


def main(argv: list[str]) -> int:
    """`eks-hybrid-gpu local up|down|status`."""
    commands = {"up": up, "down": down, "status": status}
    if len(argv) != 1 or argv[0] not in commands:
        print("usage: eks-hybrid-gpu local up|down|status", file=sys.stderr)
        return 2
    return commands[argv[0]]()
