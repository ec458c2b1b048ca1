"""The simulated kubelet's device manager: a node publishes what the allocator pods running on it publish.

kwok plays the kubelet's pod lifecycle; it knows nothing of devices. This process plays the part of the kubelet
that does: it watches (`simulate.informers`) the simulated nodes (label selector), the pods bound to each of them
(field selector `spec.nodeName`), the slices it published and the ConfigMaps the plugins mount, never the rest of
the cluster, and on each batch of events

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
import functools
import queue
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from cluster.client.kubeclient import Kube, KubeAccessError, KubeApiError, segment
from cluster.judge.publishers import pod_ready
from eks_hybrid_gpu.cluster_access import connect
from eks_hybrid_gpu.simulate.informers import Caches, Informer, Update
from eks_hybrid_gpu.simulate.model import HOST_ANNOTATION, PUBLISHED_BY_LABEL, SIMULATED_LABEL, SLICE_API, SimNode
from eks_hybrid_gpu.simulate.objects import (
    PluginSharing,
    extended_resources,
    plugin_resources,
    resource_slice,
    slice_name,
)
from policy.gpu_allocation.vocab.allocators import pod_owner
from policy.gpu_allocation.vocab.grammar import is_dns_label, is_dns_subdomain
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA

CONFIG_NODE_LABEL = "nvidia.com/device-plugin.config"
RESYNC_SECONDS = 30.0
"""A pass with no event: judges the caches again (no request), as an informer's resync does."""
RETRY_SECONDS = 1.0
"""After a pass whose write failed: the next one comes this soon, event or not."""
NODES = "nodes"
SLICES = "slices"
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


@dataclass(frozen=True)
class View:
    """What one pass judges: the simulated nodes, the pods bound to each, our slices and the mounted ConfigMaps."""

    nodes: Sequence[Obj]
    pods_by_node: Mapping[str, Sequence[Obj]]
    slices: MutableMapping[str, dict[str, Any]]
    """Slice name -> the slice this process published (label `published-by=pod`); `sync` records its own writes."""
    configmaps: Mapping[str, Obj]
    """`NAMESPACE/NAME` -> ConfigMap, for the device-plugin pods that mount their config."""


def sync(kube: Kube, view: View) -> list[str]:
    """One pass over every simulated node of `view`: publish what runs there. Returns what changed, for the log."""
    changed: list[str] = []
    for node in view.nodes:
        meta = node["metadata"]
        try:
            host = SimNode.model_validate_json((meta.get("annotations") or {}).get(HOST_ANNOTATION) or "")
        except ValidationError:
            continue  # written before the simulated kubelet existed, or by hand: not ours to publish
        pods = view.pods_by_node.get(meta["name"], [])
        published = publication(host, meta.get("labels") or {}, pods, view.configmaps)
        patch = status_patch(node, published)
        if patch is not None:
            kube.merge_patch(f"/api/v1/nodes/{segment(meta['name'])}/status", patch)
            changed.append(f"{meta['name']}: {patch['status']['allocatable']}")
        name = slice_name(meta["name"])
        wanted = published.slice and host.host_publisher != DRA  # a host-level driver's slice is `apply`'s
        if wanted and name not in view.slices:
            body = resource_slice(host, meta.get("uid"), 1, {PUBLISHED_BY_LABEL: "pod"})
            if body is not None:
                try:
                    view.slices[name] = kube.create(SLICE_API, body)
                    changed.append(f"{meta['name']}: ResourceSlice {name} published")
                except KubeApiError as error:
                    if error.status != 409:
                        raise
        elif not wanted and name in view.slices:
            kube.delete(f"{SLICE_API}/{segment(name)}")
            view.slices.pop(name, None)
            changed.append(f"{meta['name']}: ResourceSlice {name} removed")
    return changed


def config_refs(pods: Sequence[Obj]) -> set[tuple[str, str]]:
    """(namespace, name) of the ConfigMaps the device-plugin pods with a config-manager mount."""
    refs = set()
    for pod in pods:
        if not _mounts_config(pod):
            continue
        namespace = str((pod.get("metadata") or {}).get("namespace"))
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            name = (volume.get("configMap") or {}).get("name") if isinstance(volume, Mapping) else None
            if name:
                refs.add((namespace, str(name)))
    return refs


class DeviceManager:
    """Informers on the simulated nodes, the pods of each (field selector), our slices and the mounted ConfigMaps.

    Each batch of events is applied to the caches, then one pass (`sync`) judges them and writes only what
    changed; idle, the watches cost a request per informer every few minutes, not a LIST per collection per pass.
    """

    def __init__(self, kube: Kube) -> None:
        """Nothing started: `start` does."""
        self.kube = kube
        self.updates: queue.Queue[Update] = queue.Queue()
        self.caches = Caches()
        self.synced: set[str] = set()
        """Informers whose first list arrived: a node is judged only once everything it depends on is listed."""
        self._generation = 0

    def _informer(self, name: str, path: str, **query: str) -> Informer:
        return Informer(self.kube, name, path, self.updates, **query)

    def start(self) -> None:
        """List and watch the simulated nodes and our slices; the pods' informers follow the nodes."""
        self.caches.ensure(
            NODES, lambda: self._informer(NODES, "/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true")
        )
        self.caches.ensure(SLICES, lambda: self._informer(SLICES, SLICE_API, labelSelector=f"{PUBLISHED_BY_LABEL}=pod"))

    def _named(self, prefix: str, wanted: set[str]) -> None:
        """Keep one informer per wanted name under `prefix` (`pods NODE`, `configmap NS/NAME`), stop the others."""
        running = {n.split(" #", 1)[0]: n for n in self.caches.informers if n.startswith(prefix)}
        for what, informer in running.items():
            if what not in wanted:
                self.caches.drop(informer)
                self.synced.discard(informer)
        for what in sorted(wanted - set(running)):
            self._generation += 1
            name = f"{what} #{self._generation}"  # a late event of a stopped informer never reaches a new cache
            target = what.removeprefix(prefix)
            if prefix == "pods ":
                path, query = "/api/v1/pods", {"fieldSelector": f"spec.nodeName={target}"}
            else:
                namespace, _, configmap = target.partition("/")
                path = f"/api/v1/namespaces/{segment(namespace)}/configmaps"
                query = {"fieldSelector": f"metadata.name={configmap}"}
            self.caches.ensure(name, functools.partial(self._informer, name, path, **query))

    def follow(self) -> None:
        """Start the informers the caches now call for: a pod informer per simulated node, one per mounted ConfigMap."""
        nodes = self.caches.objects.get(NODES, {})
        self._named("pods ", {f"pods {name}" for name in nodes if is_dns_subdomain(name)})
        refs = {ref for pods in self.view_pods().values() for ref in config_refs(pods)}
        valid = {f"configmap {ns}/{name}" for ns, name in refs if is_dns_label(ns) and is_dns_subdomain(name)}
        self._named("configmap ", valid)

    def view_pods(self) -> dict[str, list[Obj]]:
        """Node name -> the pods its informer holds."""
        found: dict[str, list[Obj]] = {}
        for name, cache in self.caches.objects.items():
            if name.startswith("pods "):
                found[name.removeprefix("pods ").split(" #", 1)[0]] = list(cache.values())
        return found

    def view(self) -> View:
        """The nodes whose every informer has listed, with their pods, our slices and the ConfigMaps."""
        ready = {n.removeprefix("pods ").split(" #", 1)[0] for n in self.synced if n.startswith("pods ")}
        configs_listed = all(n in self.synced for n in self.caches.informers if n.startswith("configmap "))
        nodes = [n for k, n in sorted(self.caches.objects.get(NODES, {}).items()) if k in ready and configs_listed]
        configmaps = {
            k: c for n, cache in self.caches.objects.items() if n.startswith("configmap ") for k, c in cache.items()
        }
        return View(nodes, self.view_pods(), self.caches.objects.setdefault(SLICES, {}), configmaps)

    def step(self, timeout: float) -> list[str]:
        """Wait up to `timeout` for events, apply every one queued, then run one pass; what changed, for the log."""
        try:
            batch = [self.updates.get(timeout=timeout)]
        except queue.Empty:
            batch = []
        while True:
            try:
                batch.append(self.updates.get_nowait())
            except queue.Empty:
                break
        for update in batch:
            if update.kind == "failed":
                print(
                    f"{datetime.now(UTC):%H:%M:%S} watch failed, retrying: {update.message}",
                    file=sys.stderr,
                    flush=True,
                )
            elif self.caches.apply(update) and update.kind == "relisted":
                self.synced.add(update.informer)
        self.follow()
        if NODES not in self.synced or SLICES not in self.synced:
            return []
        return sync(self.kube, self.view())

    def stop(self) -> None:
        """Stop every informer."""
        self.caches.stop_all()


def run(kubeconfig: str, resync: float = RESYNC_SECONDS) -> int:
    """Watch and publish forever; a pass that fails (the API server restarting) is logged and retried."""
    kube = connect(kubeconfig, say_waits=False)  # a background process: its requests are no one's wait
    print(
        f"simulated device manager for {kube.server}: watching the simulated nodes, resync every {resync} s", flush=True
    )
    manager = DeviceManager(kube)
    manager.start()
    wait = resync
    while True:
        try:
            for line in manager.step(wait):
                print(f"{datetime.now(UTC):%H:%M:%S.%f} {line}", flush=True)
            wait = resync
        except (KubeAccessError, KubeApiError, OSError) as error:
            print(f"{datetime.now(UTC):%H:%M:%S} pass failed: {error}", file=sys.stderr, flush=True)
            wait = RETRY_SECONDS  # judge again soon even if no event comes


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eks_hybrid_gpu.simulate.devicemanager --kubeconfig PATH`: what `local up` starts beside kwok."""
    parser = argparse.ArgumentParser(prog="eks-hybrid-gpu-simulated-device-manager", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--resync", type=float, default=RESYNC_SECONDS, help="seconds between passes with no event")
    args = parser.parse_args(argv)
    return run(args.kubeconfig, args.resync)


if __name__ == "__main__":
    sys.exit(main())
