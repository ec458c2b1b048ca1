"""The simulated kubelet's device manager: a node publishes what the allocator pods running on it publish.

kwok plays the kubelet's pod lifecycle; it knows nothing of devices. This process plays the part of the kubelet
that does: it watches the simulated nodes and the pods bound to them, and

- while a Ready device-plugin pod (ours, the GPU Operator's, anyone's: recognised by what it runs) is on a node,
  the node's `nvidia.com/*` capacity and allocatable are what that plugin advertises for the host's GPUs under
  its own config (the chart's config-manager selection: the node's `nvidia.com/device-plugin.config` label, else
  `DEFAULT_CONFIG`, else the `default` or only entry; `MIG_STRATEGY` env over the file's `flags.migStrategy`);
- when that pod leaves, allocatable drops to 0 and capacity stays, as the real kubelet marks a gone plugin's
  devices unhealthy (kubernetes/kubernetes #92396);
- while a Ready DRA kubelet-plugin pod is on a node, the node has a `gpu.nvidia.com` ResourceSlice of the host's
  GPUs; when it leaves, the slice goes (the real kubelet removes it after a short grace period; here at the next
  pass);
- a host-level allocator of the fleet file (the Auto Mode node's AWS plugin) publishes with no pod, and pods that
  hold GPUs keep them whatever happens to their allocator.

The hardware comes from each node's fleet entry (annotation `eks-hybrid-gpu.io/simulated-host`), never from a
stack config. What it does not simulate: device health, plugin registration delays, the kubelet's admission of
pods against allocatable, and device preparation (no container starts).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from components.publishers import pod_ready
from eks_hybrid_gpu.kubeclient import Kube, KubeAccessError, KubeApiError, connect, segment
from eks_hybrid_gpu.simulate.model import HOST_ANNOTATION, PUBLISHED_BY_LABEL, SIMULATED_LABEL, SLICE_API, SimNode
from eks_hybrid_gpu.simulate.objects import (
    PluginSharing,
    extended_resources,
    plugin_resources,
    resource_slice,
    slice_name,
)
from policy.gpu_allocation.vocab.allocators import pod_owner
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA

CONFIG_NODE_LABEL = "nvidia.com/device-plugin.config"
INTERVAL_SECONDS = 0.25
Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Publication:
    """What a node publishes: extended resources (name -> count) and whether its ResourceSlice exists."""

    resources: Mapping[str, str]
    slice: bool


def _env(container: Obj) -> dict[str, str]:
    return {
        str(e.get("name")): str(e.get("value", ""))
        for e in container.get("env") or []
        if isinstance(e, Mapping) and "value" in e
    }


def _containers(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") or {}
    return [c for f in ("initContainers", "containers") for c in spec.get(f) or [] if isinstance(c, Mapping)]


def _mounts_config(pod: Obj) -> bool:
    """A device-plugin pod with a config-manager: its sharing is in a ConfigMap to read."""
    found = pod_owner(pod.get("spec") or {}, (pod.get("metadata") or {}).get("labels") or {})
    manager = any("config-manager" in (c.get("command") or []) for c in _containers(pod))
    return found is not None and found[0] == DEVICE_PLUGIN and manager


def _serving(pod: Obj) -> bool:
    """Ready and not asked to stop: a terminating plugin is unregistering."""
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and pod_ready(pod)


def _selected_config(pod: Obj, node_labels: Mapping[str, str], configmaps: Mapping[str, Obj]) -> dict[str, Any]:
    """The config file the chart's config-manager would write for this node, parsed; {} when it has none."""
    manager = next((c for c in _containers(pod) if "config-manager" in (c.get("command") or [])), None)
    volume = next(
        (v["configMap"]["name"] for v in (pod.get("spec") or {}).get("volumes") or [] if (v.get("configMap") or {})),
        None,
    )
    if manager is None or volume is None:
        return {}
    namespace = (pod.get("metadata") or {}).get("namespace")
    data = (configmaps.get(f"{namespace}/{volume}") or {}).get("data") or {}
    env = _env(manager)
    key = node_labels.get(env.get("NODE_LABEL", CONFIG_NODE_LABEL)) or env.get("DEFAULT_CONFIG") or ""
    if not key:
        strategies = env.get("FALLBACK_STRATEGIES", "named,single").split(",")
        key = "default" if "named" in strategies and "default" in data else ""
        key = key or (next(iter(data)) if "single" in strategies and len(data) == 1 else "")
    try:
        parsed = yaml.safe_load(data.get(key) or "") or {}
    except yaml.YAMLError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def plugin_sharing(pod: Obj, node_labels: Mapping[str, str], configmaps: Mapping[str, Obj]) -> PluginSharing:
    """The sharing a device-plugin pod applies on this node, read from its config and env as the plugin reads them."""
    config = _selected_config(pod, node_labels, configmaps)
    flags = _dict(config.get("flags"))
    slicing = _dict(_dict(config.get("sharing")).get("timeSlicing"))
    replicas = next(
        (
            int(r["replicas"])
            for r in slicing.get("resources") or []
            if isinstance(r, dict) and r.get("name") == "nvidia.com/gpu" and str(r.get("replicas", "")).isdigit()
        ),
        None,
    )
    plugin_env: dict[str, str] = {}
    for container in _containers(pod):
        plugin_env.update(_env(container))
    strategy = plugin_env.get("MIG_STRATEGY") or str(flags.get("migStrategy") or "none")
    mig: Literal["none", "single", "mixed"] = "none"
    if strategy in ("single", "mixed"):
        mig = "single" if strategy == "single" else "mixed"
    return PluginSharing(replicas if replicas and replicas > 1 else None, slicing.get("renameByDefault") is True, mig)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def publication(
    host: SimNode, node_labels: Mapping[str, str], pods: Sequence[Obj], configmaps: Mapping[str, Obj]
) -> Publication:
    """What the node publishes now: its host-level allocator's, plus every Ready allocator pod's on it."""
    resources = dict(extended_resources(host))
    has_slice = host.host_publisher == DRA
    for pod in pods:
        found = pod_owner(pod.get("spec") or {}, (pod.get("metadata") or {}).get("labels") or {})
        if found is None or found[1] != "allocator" or not _serving(pod):
            continue
        if found[0] == DEVICE_PLUGIN:
            resources.update(plugin_resources(host, plugin_sharing(pod, node_labels, configmaps)))
        elif found[0] == DRA:
            has_slice = True
    return Publication(resources, has_slice)


def status_patch(node: Obj, published: Publication) -> dict[str, Any] | None:
    """The merge patch that makes the node's GPU resources what is published; None when nothing changes.

    A resource no longer published keeps its capacity and gets allocatable 0, as the kubelet keeps a gone plugin's
    resource (its devices unhealthy).
    """
    status = node.get("status") or {}
    capacity = {k: str(v) for k, v in (status.get("capacity") or {}).items() if k.startswith("nvidia.com/")}
    allocatable = {k: str(v) for k, v in (status.get("allocatable") or {}).items() if k.startswith("nvidia.com/")}
    want_capacity = {**capacity, **published.resources}
    want_allocatable = {k: published.resources.get(k, "0") for k in want_capacity}
    if want_capacity == capacity and want_allocatable == allocatable:
        return None
    return {"status": {"capacity": want_capacity, "allocatable": want_allocatable}}


def sync(kube: Kube) -> list[str]:
    """One pass over every simulated node: publish what runs there. Returns what changed, for the log."""
    nodes = kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true")
    pods_by_node: dict[str, list[Obj]] = {}
    for pod in kube.items("/api/v1/pods", fieldSelector="spec.nodeName!="):
        pods_by_node.setdefault(str(pod["spec"].get("nodeName")), []).append(pod)
    slices = {s["metadata"]["name"]: s for s in kube.items(SLICE_API, labelSelector=f"{PUBLISHED_BY_LABEL}=pod")}
    configmaps: dict[str, Obj] | None = None
    changed: list[str] = []
    for node in nodes:
        meta = node["metadata"]
        try:
            host = SimNode.model_validate_json((meta.get("annotations") or {}).get(HOST_ANNOTATION) or "")
        except ValidationError:
            continue  # written before the simulated kubelet existed, or by hand: not ours to publish
        pods = pods_by_node.get(meta["name"], [])
        if configmaps is None and any(_mounts_config(p) for p in pods):
            configmaps = {
                f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in kube.items("/api/v1/configmaps")
            }
        published = publication(host, meta.get("labels") or {}, pods, configmaps or {})
        patch = status_patch(node, published)
        if patch is not None:
            kube.merge_patch(f"/api/v1/nodes/{segment(meta['name'])}/status", patch)
            changed.append(f"{meta['name']}: {patch['status']['allocatable']}")
        name = slice_name(meta["name"])
        wanted = published.slice and host.host_publisher != DRA  # a host-level driver's slice is `apply`'s
        if wanted and name not in slices:
            body = resource_slice(host, meta.get("uid"), 1, {PUBLISHED_BY_LABEL: "pod"})
            if body is not None:
                try:
                    kube.create(SLICE_API, body)
                    changed.append(f"{meta['name']}: ResourceSlice {name} published")
                except KubeApiError as error:
                    if error.status != 409:
                        raise
        elif not wanted and name in slices:
            kube.delete(f"{SLICE_API}/{segment(name)}")
            changed.append(f"{meta['name']}: ResourceSlice {name} removed")
    return changed


def run(kubeconfig: str, interval: float = INTERVAL_SECONDS) -> int:
    """Sync forever; a pass that fails (the API server restarting) is logged and retried."""
    kube = connect(kubeconfig)
    print(f"simulated device manager for {kube.server}: every {interval} s", flush=True)
    while True:
        try:
            for line in sync(kube):
                print(f"{datetime.now(UTC):%H:%M:%S.%f} {line}", flush=True)
        except (KubeAccessError, KubeApiError, OSError) as error:
            print(f"{datetime.now(UTC):%H:%M:%S} pass failed: {error}", file=sys.stderr, flush=True)
        time.sleep(interval)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eks_hybrid_gpu.simulate.devicemanager --kubeconfig PATH`: what `local up` starts beside kwok."""
    parser = argparse.ArgumentParser(prog="eks-hybrid-gpu-simulated-device-manager", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=INTERVAL_SECONDS)
    args = parser.parse_args(argv)
    return run(args.kubeconfig, args.interval)


if __name__ == "__main__":
    sys.exit(main())
