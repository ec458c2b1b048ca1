#!/usr/bin/env python3
"""The device-plugin cohort for real, on the lent GPU machine: NVIDIA's device plugin publishes the GPU to a real
kubelet, and the program's smoke Job gets `nvidia.com/gpu` and runs the CUDA probe.

Runs there as root, after `scripts/hardware/render.sh device-plugin` here and the unpacking of its stages there:
1. host facts, the driver's libraries in the loader's cache, runc checked on this kernel (as dra_run.py does);
2. the `nvidia` runtime handler the program's RuntimeClass names: NVIDIA's `nvidia-container-runtime` in CDI mode
   (it turns `NVIDIA_VISIBLE_DEVICES` into the CDI devices of `nvidia-ctk cdi generate`'s spec; the legacy mode
   needs libnvidia-container, which is C and not built here), in front of the same runc;
3. containerd with that handler, the bridge CNI, the pause, probe and device-plugin images imported with `ctr`;
4. etcd, kube-apiserver, kube-controller-manager, kube-scheduler; a real kubelet registering the node with the
   labels the program's DaemonSet selects (its nodeSelector, and the chart's default GPU affinity, which GFD/NFD
   would satisfy on a real node: `nvidia.com/gpu.present=true`);
5. the program's rendered objects for the cohort applied as they are (RBAC, RuntimeClass, label guard, the chart's
   DaemonSet), except the DaemonSet's image: the chart's `nvcr.io/nvidia/k8s-device-plugin:v0.20.0` is not
   reachable, so the v0.19.0 image built here is named instead (the report records both);
6. the DaemonSet's pod starts through the `nvidia` handler and registers with the kubelet: node capacity and
   allocatable recorded; then the smoke Job (probe mode) is created, the kubelet allocates `nvidia.com/gpu`, the
   handler injects the GPU, `cuda_probe.py` runs;
7. with `--time-slicing REVIEW`: the DaemonSet is deleted and the time-slicing render's DaemonSet created: its
   config-manager (init container and sidecar) reads the node through the API server, so the run first gives
   pods what a cluster gives them and this control plane does not: the `kubernetes` Service's ClusterIP on `lo`
   forwarded to the API server (kube-proxy's part), `kube-root-ca.crt` in each namespace (the root-CA publisher's)
   and the ServiceAccount token volume in the DaemonSet's pods (the ServiceAccount admission plugin's, which
   `localcluster` turns off); that stack's smoke Job then runs the probe on `nvidia.com/gpu.shared`. With
   `--time-slicing-host` the plugin runs as a host process with the config file instead (the first two runs);
8. with `--move-to-dra REVIEW` (and `--move-back`): `migrate`'s phases done by this script, to the DRA driver
   and its probe, and back to the plugin's DaemonSet and its probe. The DRA driver runs as a host process, or with
   `--dra-daemonset` as the moved render's kubelet-plugin DaemonSet from the image build_images.py built
   (`dra.oci.tar`; the chart's `registry.k8s.io/...:v0.5.0` is swapped for it as the plugin's image is). Without
   `--time-slicing` the holder pod holds `nvidia.com/gpu` of the default render's plugin.

A sampler thread reads the node's pods and published devices every ~100 ms for the whole run and keeps the most
GPU allocators it ever saw on the node at once. One JSON report (each step's result and time, published devices,
sampler maxima, probe JSON) is written to `--report`; log tails to `--logs`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import dra_run as base  # noqa: E402
import runc_check  # noqa: E402
from dra_run import LOGS, STATE, Run, StepFailed, sh, tail, wait  # noqa: E402

from eks_hybrid_gpu import localcluster  # noqa: E402
from policy.gpu_allocation.vocab.allocators import pod_owner  # noqa: E402  (standard library only)

RUNTIME_CONFIG = Path("/etc/nvidia-container-runtime/config.toml")
CDI_SPEC = Path("/var/run/cdi/nvidia.yaml")
PLUGIN_SOCKETS = base.KUBELET_DIR / "device-plugins"
GPU_PRESENT = ("nvidia.com/gpu.present", "true")
"""What GFD (or NFD's PCI rule) writes on a GPU node and the chart's default affinity asks; neither runs here."""
PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "RuntimeClass": "/apis/node.k8s.io/v1/runtimeclasses",
    "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
}
ORDER = tuple(PATHS)
"""Creation order: what a DaemonSet's pod needs exists before it; the Job last, once the GPU is published."""


def node_name_of(nvidia_smi: str) -> str:
    """`h200-0` for 'NVIDIA H200, …', `h100-0` for 'NVIDIA H100 80GB HBM3, …': the node is named after the card."""
    match = re.search(r"\b([A-Z]\d{2,4})\b", nvidia_smi.split(",")[0])
    return f"{match.group(1).lower()}-0" if match else "gpu-0"


def path_of(o: dict[str, Any]) -> str:
    return PATHS[o["kind"]].format(ns=o["metadata"].get("namespace", ""))


def create(run: Run, objects: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[str]:
    """Create the objects of these kinds in ORDER; one that exists already is left as it is."""
    created = []
    for kind in [k for k in ORDER if k in kinds]:
        for o in objects:
            if o["kind"] != kind:
                continue
            code, answer = run.api("POST", path_of(o), o)
            if code not in (200, 201, 409):
                raise StepFailed(f"create {kind} {o['metadata']['name']}: {code} {str(answer)[:300]}")
            created.append(f"{kind}/{o['metadata'].get('namespace', '_cluster')}/{o['metadata']['name']}")
    return created


def published(node: dict[str, Any]) -> dict[str, dict[str, str]]:
    status = node.get("status", {})
    return {
        key: {k: v for k, v in sorted((status.get(key) or {}).items()) if k.startswith("nvidia.com/")}
        for key in ("capacity", "allocatable")
    }


class Sampler(threading.Thread):
    """Every ~100 ms: the node's GPU allocator pods (by what they run, the policy vocabulary's `pod_owner`), host
    plugin processes, its published `nvidia.com/*` allocatable and its ResourceSlices. Keeps maxima and changes."""

    def __init__(self, run: Run, node_name: str) -> None:
        super().__init__(daemon=True)
        self.run_ = run
        self.node_name = node_name
        self.stop_event = threading.Event()
        self.samples = 0
        self.errors = 0
        self.max_allocator_owners = 0
        self.max_allocator_pods = 0
        self.max_allocators_with_host = 0
        self.changes: list[dict[str, Any]] = []
        self.host_allocators: set[str] = set()
        """Allocators running as host processes now (the time-slicing plugin, the DRA plugin): not pods."""
        self.started = time.monotonic()

    def sample(self) -> dict[str, Any]:
        field = f"spec.nodeName%3D{self.node_name}"
        _, pods = self.run_.api("GET", f"/api/v1/pods?fieldSelector={field}")
        _, node = self.run_.api("GET", f"/api/v1/nodes/{self.node_name}")
        _, slices = self.run_.api("GET", "/apis/resource.k8s.io/v1/resourceslices")
        allocators = []
        for pod in (pods or {}).get("items", []):
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            found = pod_owner(pod.get("spec") or {}, pod.get("metadata", {}).get("labels") or {})
            if found is not None and found[1] == "allocator":
                allocators.append(f"{found[0]}:{pod['metadata']['name']}")
        mine = [s for s in (slices or {}).get("items", []) if s.get("spec", {}).get("nodeName") == self.node_name]
        return {
            "allocatorPods": sorted(allocators),
            "hostAllocators": sorted(self.host_allocators),
            "allocatable": published(node or {})["allocatable"],
            "resourceSlices": len(mine),
        }

    def run(self) -> None:
        last: dict[str, Any] | None = None
        while not self.stop_event.is_set():
            try:
                now = self.sample()
            except Exception:
                self.errors += 1
                time.sleep(0.1)
                continue
            self.samples += 1
            owners = {a.split(":", 1)[0] for a in now["allocatorPods"]}
            self.max_allocator_owners = max(self.max_allocator_owners, len(owners))
            self.max_allocator_pods = max(self.max_allocator_pods, len(now["allocatorPods"]))
            with_host = len(now["allocatorPods"]) + len(now["hostAllocators"])
            self.max_allocators_with_host = max(self.max_allocators_with_host, with_host)
            if now != last:
                self.changes.append({"t": round(time.monotonic() - self.started, 2), **now})
                last = now
            time.sleep(0.1)

    def report(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        return {
            "samples": self.samples,
            "errors": self.errors,
            "seconds": round(elapsed, 1),
            "meanIntervalMs": round(1000 * elapsed / max(self.samples, 1), 1),
            "maxAllocatorOwnersOnNode": self.max_allocator_owners,
            "maxAllocatorPodsOnNode": self.max_allocator_pods,
            "maxAllocatorsOnNodeWithHostProcesses": self.max_allocators_with_host,
            "changes": self.changes[-40:],
        }


def nvidia_runtime(hw: Path, adjust: dict[str, Any], detail: dict[str, Any]) -> str:
    """The CDI spec of this host's GPUs and nvidia-container-runtime's config; returns containerd's handler TOML."""
    CDI_SPEC.parent.mkdir(parents=True, exist_ok=True)
    sh(
        str(hw / "nvidia-ctk"),
        "cdi",
        "generate",
        f"--output={CDI_SPEC}",
        f"--nvidia-cdi-hook-path={hw / 'nvidia-cdi-hook'}",
    )
    listed = sh(str(hw / "nvidia-ctk"), "cdi", "list", f"--spec-dir={CDI_SPEC.parent}")
    detail["cdiDevices"] = sorted({line.strip() for line in listed.splitlines() if line.startswith("nvidia.com/gpu=")})
    if not detail["cdiDevices"]:
        raise StepFailed(f"nvidia-ctk cdi generate listed no nvidia.com/gpu device: {listed[-300:]}")
    wrapper = runc_check.logging_wrapper(hw, adjust)
    RUNTIME_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    sh(str(hw / "nvidia-ctk"), "config", "default", f"--output={RUNTIME_CONFIG}")
    settings = {
        "nvidia-container-runtime.mode": "cdi",
        "nvidia-container-runtime.runtimes": str(wrapper),
        "nvidia-container-runtime.debug": str(LOGS / "nvidia-container-runtime.log"),
        "nvidia-container-runtime.log-level": "debug",
        "nvidia-container-runtime.modes.cdi.default-kind": "nvidia.com/gpu",
        "nvidia-ctk.path": str(hw / "nvidia-ctk"),
    }
    sh(
        str(hw / "nvidia-ctk"),
        "config",
        f"--config-file={RUNTIME_CONFIG}",
        "--in-place",
        *[f"--set={k}={v}" for k, v in settings.items()],
    )
    written = RUNTIME_CONFIG.read_text()
    for key, value in (("mode", "cdi"), ("runtimes", str(wrapper))):
        if not re.search(rf"^\s*{key} = .*{re.escape(value)}", written, flags=re.MULTILINE):
            raise StepFailed(f"{RUNTIME_CONFIG} does not set {key} to {value} after nvidia-ctk config --set")
    detail["runtimeConfig"] = [line for line in written.splitlines() if line.strip() and not line.startswith("#")]
    detail["handler"] = str(hw / "nvidia-container-runtime")
    table = "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia"
    return (
        f"\n[{table}]\n  runtime_type = 'io.containerd.runc.v2'\n"
        f"[{table}.options]\n  BinaryName = '{hw / 'nvidia-container-runtime'}'\n"
    )


def rendered_allocator(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The rendered DaemonSet's pod template and the ConfigMaps of its namespace: what the simulated kubelet
    (eks_hybrid_gpu.simulate.devicemanager) reads to decide what the node publishes, kept for the tests."""
    daemonset = daemonset_of(objects)
    namespace = daemonset["metadata"]["namespace"]
    return {
        "podTemplate": daemonset["spec"]["template"],
        "namespace": namespace,
        "configMaps": [
            {"name": o["metadata"]["name"], "data": o.get("data") or {}}
            for o in objects
            if o["kind"] == "ConfigMap" and o["metadata"].get("namespace") == namespace
        ],
    }


def daemonset_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The device plugin's DaemonSet (the chart also renders its MPS control daemon, for `nvidia.com/mps.capable`
    nodes only)."""
    found = [
        o
        for o in objects
        if o["kind"] == "DaemonSet"
        and any(c.get("command") == ["nvidia-device-plugin"] for c in o["spec"]["template"]["spec"]["containers"])
    ]
    if len(found) != 1:
        raise StepFailed(f"the render has {len(found)} device-plugin DaemonSets; the cohort renders one")
    return found[0]


def node_labels(daemonset: dict[str, Any]) -> dict[str, str]:
    """The labels the program's DaemonSet selects, plus the GPU label the chart's default affinity asks."""
    pod = daemonset["spec"]["template"]["spec"]
    labels = dict(pod.get("nodeSelector") or {})
    affinity = json.dumps(pod.get("affinity") or {})
    if GPU_PRESENT[0] in affinity:
        labels[GPU_PRESENT[0]] = GPU_PRESENT[1]
    return labels


def with_built_image(daemonset: dict[str, Any], image: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The DaemonSet with the image built here in every container; and what was replaced, by container."""
    changed = copy.deepcopy(daemonset)
    pod = changed["spec"]["template"]["spec"]
    replaced = {}
    for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
        replaced[container["name"]] = {"rendered": container["image"], "ran": image}
        container["image"] = image
    return changed, replaced


def pods_of(run: Run, namespace: str, selector: str) -> list[dict[str, Any]]:
    _, pods = run.api("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
    return list((pods or {}).get("items", []))


API_VOLUME = "kube-api-access-hw"
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"  # noqa: S105 (a folder, no secret)


def with_api_access(daemonset: dict[str, Any]) -> dict[str, Any]:
    """The DaemonSet with the volume the ServiceAccount admission plugin adds to each of its pods on a real cluster
    (a projected token, the `kube-root-ca.crt` ConfigMap and the namespace), mounted in every container; the local
    control plane runs without that plugin. Pods that opt out (`automountServiceAccountToken: false`) are left."""
    changed = copy.deepcopy(daemonset)
    pod = changed["spec"]["template"]["spec"]
    if pod.get("automountServiceAccountToken") is False:
        return changed
    sources = [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]
    pod.setdefault("volumes", []).append({"name": API_VOLUME, "projected": {"sources": sources}})
    for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
        mount = {"name": API_VOLUME, "mountPath": TOKEN_MOUNT, "readOnly": True}
        container.setdefault("volumeMounts", []).append(mount)
    return changed


class ServiceForwarder(threading.Thread):
    """kube-proxy's part for the one Service the pods here use, `default/kubernetes`: its ClusterIP (added to `lo`)
    port 443, forwarded to the API server's loopback port. No kube-proxy or iptables runs on the GPU machine."""

    def __init__(self, address: str, port: int, target: int) -> None:
        super().__init__(daemon=True)
        self.server = socket.create_server((address, port))
        self.target = target
        self.connections = 0

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def run(self) -> None:
        while True:
            client, _ = self.server.accept()
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.connections += 1
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()


def add_loopback_address(address: str, label: str = "lo:hw") -> None:
    """`ip addr add ADDRESS/32 dev lo` without iproute2, which the GPU machine lacks: the alias ioctls."""
    siocsifaddr, siocsifnetmask = 0x8916, 0x891C
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for request, value in ((siocsifaddr, address), (siocsifnetmask, "255.255.255.255")):
            raw = socket.inet_aton(value)
            ifreq = struct.pack("16sH2s4s8s", label.encode(), socket.AF_INET, b"\0\0", raw, b"\0" * 8)
            fcntl.ioctl(s.fileno(), request, ifreq)


def route_kubernetes_service(run: Run, detail: dict[str, Any]) -> ServiceForwarder:
    """kube-proxy's part for pods that reach the API server in-cluster: the `kubernetes` Service's ClusterIP routed
    to the API server, checked from the host as a pod takes it (TLS verified against the API server's certificate)."""
    assert run.cluster is not None
    _, service = run.api("GET", "/api/v1/namespaces/default/services/kubernetes")
    address, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
    add_loopback_address(address)
    forwarder = ServiceForwarder(address, port, int(run.cluster.server.rsplit(":", 1)[1]))
    forwarder.start()
    context = ssl.create_default_context(cadata=api_server_ca())
    with urllib.request.urlopen(f"https://{address}:{port}/version", context=context, timeout=10) as answer:
        detail["versionThroughService"] = json.loads(answer.read())["gitVersion"]
    detail["service"] = f"{address}:{port}"
    return forwarder


def api_server_ca() -> str:
    """The local API server's self-signed certificate: the root CA its pods are given."""
    return (STATE / "apiserver-certs" / "apiserver.crt").read_text()


def pod_api_access(run: Run, objects: list[dict[str, Any]], detail: dict[str, Any]) -> ServiceForwarder:
    """What a cluster gives pods to reach the API server, which the chart's config-manager needs (in-cluster config):
    the `kubernetes` Service's ClusterIP routed to the API server, and `kube-root-ca.crt` in each namespace."""
    forwarder = route_kubernetes_service(run, detail)
    ca = api_server_ca()
    create(run, objects, ("Namespace",))
    namespaces = sorted({o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"})
    for namespace in namespaces:
        configmap = {"metadata": {"name": "kube-root-ca.crt", "namespace": namespace}, "data": {"ca.crt": ca}}
        code, answer = run.api("POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap)
        if code not in (200, 201, 409):
            raise StepFailed(f"kube-root-ca.crt in {namespace}: {code} {str(answer)[:200]}")
    detail["rootCaIn"] = namespaces
    return forwarder


def daemonset_pod_running(
    run: Run, daemonset: dict[str, Any], node_name: str, what: str, began: float, detail: dict[str, Any]
) -> dict[str, Any]:
    """Waits for the DaemonSet's pod Running on the node; records its log, the time since `began`, and the pod as
    the report reads it (owner, images, runtime class): proof that the owner ran from its DaemonSet."""
    namespace = daemonset["metadata"]["namespace"]
    selector = ",".join(f"{k}%3D{v}" for k, v in daemonset["spec"]["selector"]["matchLabels"].items())

    def running() -> Any:
        pods = pods_of(run, namespace, selector)
        ready = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == node_name]
        if ready:
            return ready[0]
        states = [
            (p["status"].get("initContainerStatuses") or []) + (p["status"].get("containerStatuses") or [])
            or p["status"].get("conditions")
            for p in pods
        ]
        return f"{len(pods)} pod(s): {json.dumps(states)[:300]}"

    try:
        pod: dict[str, Any] = wait(what, running, 120)
    finally:
        for p in pods_of(run, namespace, selector):
            detail["podLog"] = _container_log(namespace, p["metadata"]["name"])[-30:]
    detail["podRunningSeconds"] = round(time.monotonic() - began, 2)
    detail["pod"] = {
        "name": pod["metadata"]["name"],
        "runtimeClassName": pod["spec"].get("runtimeClassName"),
        "images": [c["image"] for c in [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]],
        "ownerKind": pod["metadata"]["ownerReferences"][0]["kind"],
        "owner": list(pod_owner(pod["spec"], pod["metadata"].get("labels") or {}) or ()),
        "serviceAccountName": pod["spec"].get("serviceAccountName"),
    }
    return pod


def plugin_daemonset(
    run: Run,
    node_name: str,
    objects: list[dict[str, Any]],
    image: str,
    detail: dict[str, Any],
    *,
    key: str = "default",
    resource: str = "nvidia.com/gpu",
    api_access: bool = False,
) -> dict[str, Any]:
    """The rendered objects (but the Job) created; the DaemonSet's pod runs and the node publishes `resource`.

    With `api_access`, every DaemonSet pod gets the ServiceAccount token volume (see `with_api_access`)."""
    daemonset, detail["imageReplaced"] = with_built_image(daemonset_of(objects), image)
    # Every rendered DaemonSet is created (the MPS control daemon's selects mps-capable nodes only: none here).
    name = daemonset["metadata"]["name"]
    companions = [
        with_built_image(o, image)[0] for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] != name
    ]
    if api_access:
        daemonset = with_api_access(daemonset)
        companions = [with_api_access(o) for o in companions]
        detail["added"] = f"{API_VOLUME}: the ServiceAccount admission plugin's token volume (not run here)"
    others = [o for o in objects if o["kind"] not in ("DaemonSet", "Job")]
    detail["created"] = create(run, others, ORDER)
    detail["notApplied"] = sorted({o["kind"] for o in objects if o["kind"] not in PATHS})
    began = time.monotonic()
    detail["created"] += create(run, [daemonset, *companions], ("DaemonSet",))
    pod = daemonset_pod_running(run, daemonset, node_name, "the device plugin DaemonSet's pod Running", began, detail)
    namespace = daemonset["metadata"]["namespace"]

    def gpu_published() -> Any:
        _, node = run.api("GET", f"/api/v1/nodes/{node_name}")
        now = published(node or {})
        return now if now["allocatable"].get(resource, "0") not in ("", "0") else f"node: {now}"

    try:
        now = wait(f"the node to publish {resource}", gpu_published, 90)
    finally:
        detail["podLog"] = _container_log(namespace, pod["metadata"]["name"])[-30:]
    detail["publishedSeconds"] = round(time.monotonic() - began, 2)
    run.report.setdefault("published", {})[key] = now
    detail["published"] = now
    detail["sockets"] = sorted(p.name for p in PLUGIN_SOCKETS.glob("*"))
    # Kept now: the pod's log goes with the pod when the time-slicing phase deletes the DaemonSet.
    detail["pluginLog"] = detail.pop("podLog")[-25:]
    return daemonset


def smoke(run: Run, objects: list[dict[str, Any]], detail: dict[str, Any], key: str) -> None:
    """Create the rendered smoke Job; wait for its pod; read the probe's JSON from the container log."""
    job = next((o for o in objects if o["kind"] == "Job"), None)
    if job is None or job["spec"].get("suspend"):
        raise StepFailed("the rendered smoke Job is missing or suspended: render the hardware stack (approvedCohort)")
    began = time.monotonic()
    create(run, [job], ("Job",))
    finish_job(run, job, detail, key, began)


def finish_job(
    run: Run, job: dict[str, Any], detail: dict[str, Any], key: str, began: float, *, delete: bool = True
) -> None:
    """Wait for a created smoke Job's pod to finish; keep the probe's JSON under `probes.<key>`; StepFailed unless
    the probe passed. The Job is then deleted, unless `delete` is False (a Job of the program's: `pulumi up` owns it).
    """
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    limits = container.get("resources", {}).get("limits") or {}
    detail["requests"] = {k: v for k, v in limits.items() if k.startswith("nvidia.com/")}
    detail["claims"] = [c.get("name") for c in job["spec"]["template"]["spec"].get("resourceClaims") or []]
    # A live Job's selector names its uid: a pod of an earlier Job of the same name is not this Job's.
    match = job["spec"].get("selector", {}).get("matchLabels") or {"job-name": name}
    selector = ",".join(f"{k}%3D{v}" for k, v in sorted(match.items()))
    seen: list[str] = []
    allocated: dict[str, Any] = {}

    def finished() -> Any:
        if detail["claims"]:
            base.keep_allocated_claim(run, namespace, allocated)
        items = pods_of(run, namespace, selector)
        if items and items[0]["status"].get("phase") in ("Succeeded", "Failed"):
            return items[0]
        answer = "no pod yet"
        if items:
            statuses = items[0]["status"].get("containerStatuses") or items[0]["status"].get("conditions")
            answer = f"{items[0]['status'].get('phase')}: {json.dumps(statuses)[:300]}"
        if not seen or seen[-1] != answer:
            seen.append(answer)
        return answer

    pod: dict[str, Any] | None = None
    try:
        pod = wait(f"the smoke Job {namespace}/{name}'s pod to finish", finished, 150, interval=0.5)
    finally:
        detail["podStates"] = seen[-12:]
        detail["events"] = base.recent_events(run, namespace)
        if pod is None or pod["status"]["phase"] != "Succeeded":
            detail["runcCalls"] = tail(runc_check.CAPTURED / "calls.log", 12).splitlines()
            detail["nvidiaRuntimeLog"] = tail(LOGS / "nvidia-container-runtime.log", 20).splitlines()
    detail["seconds"] = round(time.monotonic() - began, 2)
    detail["pod"] = {
        "name": pod["metadata"]["name"],
        "phase": pod["status"]["phase"],
        "node": pod["spec"].get("nodeName"),
        "runtimeClassName": pod["spec"].get("runtimeClassName"),
    }
    if allocated:
        detail["allocation"] = base.allocation_of(allocated)
    spec = _probe_spec()
    lines = _container_log(namespace, pod["metadata"]["name"])
    probe = next((json.loads(line) for line in lines if line.startswith('{"probe"')), None)
    run.report.setdefault("probes", {})[key] = probe
    detail["containerLog"] = lines[-5:]
    detail["injected"] = _injected(spec) if spec else None
    detail["runtimeDevices"] = runtime_devices()
    if pod["status"]["phase"] != "Succeeded" or not probe or probe.get("status") != "pass":
        raise StepFailed(f"the probe did not pass: phase {pod['status']['phase']}, probe {json.dumps(probe)[:400]}")
    if not delete:
        return
    run.api("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", {"propagationPolicy": "Background"})

    def gone() -> Any:
        code, _ = run.api("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        left = pods_of(run, namespace, f"job-name%3D{name}")
        return (code == 404 and not left) or f"Job {code}, {len(left)} pod(s) left"

    wait("the smoke Job and its pod deleted", gone, 60)


def _container_log(namespace: str, pod: str) -> list[str]:
    logs = sorted(Path("/var/log/pods").glob(f"{namespace}_{pod}_*/*/*.log"))
    lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()]
    return [re.sub(r"^\S+ (stdout|stderr) \w ", "", line) for line in lines]


def runtime_devices() -> list[str]:
    """The CDI devices nvidia-container-runtime injected, container by container, from its debug log: the
    plugin's `NVIDIA_VISIBLE_DEVICES` turned into CDI names (the runtime then sets the variable to `void`)."""
    log = LOGS / "nvidia-container-runtime.log"
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    found = [re.search(r"Creating CDI modifier for devices: \[([^\]]*)\]", line) for line in lines]
    return [m.group(1) for m in found if m]


def _probe_spec() -> Path | None:
    """The newest OCI spec the runc wrapper kept whose process runs the probe."""
    for path in sorted(runc_check.CAPTURED.glob("*.config.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        with contextlib.suppress(ValueError, OSError):
            if "probe" in " ".join(json.loads(path.read_text()).get("process", {}).get("args", [])):
                return path
    return None


def _injected(spec_path: Path) -> dict[str, Any]:
    """What the `nvidia` handler put into the probe container's OCI spec (the runc wrapper kept it)."""
    spec = json.loads(spec_path.read_text())
    env = [e for e in spec.get("process", {}).get("env", []) if e.startswith("NVIDIA_")]
    devices = [d.get("path") for d in spec.get("linux", {}).get("devices", [])]
    hooks = sorted({a for h in (spec.get("hooks") or {}).values() for x in h for a in x.get("args", [])[1:2]})
    return {"bundle": spec_path.name, "env": env, "devices": devices, "hooks": hooks}


def delete_daemonset(run: Run, node_name: str, daemonset: dict[str, Any], detail: dict[str, Any]) -> None:
    namespace, name = daemonset["metadata"]["namespace"], daemonset["metadata"]["name"]
    began = time.monotonic()
    run.api("DELETE", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", {"propagationPolicy": "Background"})
    match = daemonset["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{k}%3D{v}" for k, v in match.items())
    wait("the plugin pod gone", lambda: not pods_of(run, namespace, selector) or "still there", 60)
    detail["podGoneSeconds"] = round(time.monotonic() - began, 2)

    def released() -> Any:
        _, node = run.api("GET", f"/api/v1/nodes/{node_name}")
        now = published(node or {})
        return now if all(v == "0" for v in now["allocatable"].values()) else f"node: {now}"

    detail["afterRemoval"] = wait("the node's nvidia.com/gpu allocatable back to 0", released, 60)
    detail["releasedSeconds"] = round(time.monotonic() - began, 2)


def binary_from_image(archive: Path, member: str) -> Path:
    """A file of the (one-layer, uncompressed) OCI archive build_images.py wrote, extracted under /opt/hw."""
    with tarfile.open(archive) as oci:
        index = json.load(oci.extractfile("index.json"))  # type: ignore[arg-type]
        digest = index["manifests"][0]["digest"].removeprefix("sha256:")
        manifest = json.load(oci.extractfile(f"blobs/sha256/{digest}"))  # type: ignore[arg-type]
        layer = manifest["layers"][0]["digest"].removeprefix("sha256:")
        with tarfile.open(fileobj=oci.extractfile(f"blobs/sha256/{layer}")) as files:
            data = files.extractfile(member).read()  # type: ignore[union-attr]
    target = Path("/opt/hw") / Path(member).name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    target.chmod(0o755)
    return target


def host_plugin_time_slicing(
    run: Run, images: Path, node_name: str, objects: list[dict[str, Any]], sampler: Sampler, detail: dict[str, Any]
) -> None:
    """The plugin with the program's time-slicing config file, as a host process under the DaemonSet's env."""
    daemonset = daemonset_of(objects)
    pod = daemonset["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if "nvidia-device-plugin" in (c.get("command") or []))
    env = {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}
    configmaps = [o for o in objects if o["kind"] == "ConfigMap" and "time-slicing" in (o.get("data") or {})]
    if len(configmaps) != 1:
        raise StepFailed(f"the time-slicing render has {len(configmaps)} ConfigMaps with a time-slicing entry")
    config = Path("/etc/hw-device-plugin/config.yaml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(configmaps[0]["data"]["time-slicing"])
    env["CONFIG_FILE"] = str(config)
    detail["env"] = env
    detail["config"] = configmaps[0]["data"]["time-slicing"]
    plugin = binary_from_image(images / "device-plugin.oci.tar", "usr/bin/nvidia-device-plugin")
    detail["binary"] = f"{plugin} (from the DaemonSet's image)"
    began = time.monotonic()
    sampler.host_allocators.add("device-plugin")
    run.start("nvidia-device-plugin-host", [str(plugin)], env=env)

    import yaml  # as base.rendered: the GPU machine's python3 has PyYAML

    sharing = (yaml.safe_load(detail["config"]) or {}).get("sharing", {}).get("timeSlicing", {})
    replicas = str(next(r["replicas"] for r in sharing["resources"] if r["name"] == "nvidia.com/gpu"))
    detail["replicas"] = int(replicas)

    def shared() -> Any:
        _, node = run.api("GET", f"/api/v1/nodes/{node_name}")
        now = published(node or {})
        return now if replicas in now["allocatable"].values() else f"node: {now}"

    now = wait("the node to publish the time-sliced GPU", shared, 90)
    detail["publishedSeconds"] = round(time.monotonic() - began, 2)
    detail["published"] = now
    run.report.setdefault("published", {})["timeSlicing"] = now


HOLDER = "gpu-holder"
"""The long-running pod that holds the GPU through the device plugin when the move starts (not the program's)."""


def patch(run: Run, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """A JSON merge patch (the API server refuses application/json for PATCH)."""
    return run.api("PATCH", path, body, content_type="application/merge-patch+json")


def schedulable(run: Run, node_name: str, on: bool) -> None:
    """Uncordon (`on`) or cordon the node, as `migrate` does at either end of a move."""
    code, _ = patch(run, f"/api/v1/nodes/{node_name}", {"spec": {"unschedulable": not on}})
    if code != 200:
        raise StepFailed(f"{'uncordon' if on else 'cordon'} {node_name}: {code}")


def timed(phases: dict[str, float], name: str, began: float) -> None:
    """Record a phase's seconds since `began`, as the report's `phases` holds them."""
    phases[name] = round(time.monotonic() - began, 2)


def holder_pod(run: Run, node_name: str, job: dict[str, Any], resource: str, detail: dict[str, Any]) -> dict[str, Any]:
    """A pod like the smoke Job's (same image, selector, runtime class, security) that sleeps holding `resource`."""
    template = copy.deepcopy(job["spec"]["template"]["spec"])
    container = template["containers"][0]
    # PID 1 ignores SIGTERM unless it handles it: without the handler the eviction would wait out the grace period.
    sleeper = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); time.sleep(3600)"
    container["command"] = ["python3", "-c", sleeper]
    container.pop("volumeMounts", None)
    template.pop("volumes", None)
    for key in ("requests", "limits"):
        container["resources"][key] = {
            **{k: v for k, v in container["resources"][key].items() if not k.startswith("nvidia.com/")},
            resource: "1",
        }
    template["restartPolicy"] = "Always"
    namespace = job["metadata"]["namespace"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": HOLDER, "namespace": namespace}, "spec": template}
    code, answer = run.api("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    if code not in (200, 201):
        raise StepFailed(f"create the holder pod: {code} {str(answer)[:300]}")
    began = time.monotonic()

    def running() -> Any:
        _, now = run.api("GET", f"/api/v1/namespaces/{namespace}/pods/{HOLDER}")
        phase = (now or {}).get("status", {}).get("phase")
        return now if phase == "Running" else f"holder: {phase}"

    now: dict[str, Any] = wait("the holder pod Running on the GPU", running, 60)
    detail["holder"] = {"requests": {resource: "1"}, "node": now["spec"].get("nodeName")}
    detail["holderRunningSeconds"] = round(time.monotonic() - began, 2)
    detail["runtimeDevices"] = runtime_devices()[-1:]
    return now


def kubelet_plugin_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The DRA chart's kubelet-plugin DaemonSet in a render."""
    found = [o for o in objects if o["kind"] == "DaemonSet" and "kubelet-plugin" in o["metadata"]["name"]]
    if len(found) != 1:
        raise StepFailed(f"the moved render has {len(found)} kubelet-plugin DaemonSets; the dra cohort renders one")
    return found[0]


SLICE_POLICY = "resourceslices-policy"
"""The chart's ValidatingAdmissionPolicy for slice writes (named `…-resourceslices-policy`); left out as dra_run
leaves it: it admits a slice only from a token bound to a pod of the slice's node, which the pod here has, but a
refusal would stop the run before the owner change it is for (the report names it not applied)."""


def root_mount_shared(detail: dict[str, Any]) -> None:
    """The DRA plugin's `plugins` mount is Bidirectional and the driver root's HostToContainer: runc refuses both
    unless the host's / is a shared mount, which systemd makes it on a node; a machine booted otherwise is made so."""
    root_mount = next(
        (line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines() if line.split()[4] == "/"),
        [],
    )
    detail["rootMountShared"] = any(field.startswith("shared:") for field in root_mount[6:])
    if not detail["rootMountShared"]:
        sh("mount", "--make-rshared", "/")
        detail["rootMountMadeShared"] = "mount --make-rshared / (systemd's default on a node)"


def label_for_affinity(run: Run, node_name: str, daemonset: dict[str, Any], detail: dict[str, Any]) -> None:
    """The chart's affinity asks NFD's NVIDIA PCI label, which NFD writes on a GPU node; no NFD runs here, so the
    node is given the label the DaemonSet's first required term asks (the kubelet may not set a kubernetes.io one)."""
    terms = (
        daemonset["spec"]["template"]["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    if terms:
        first = terms[0]["matchExpressions"][0]
        label = {first["key"]: first["values"][0]}
        code, _ = patch(run, f"/api/v1/nodes/{node_name}", {"metadata": {"labels": label}})
        if code != 200:
            raise StepFailed(f"label {node_name} with {label}: {code}")
        detail["labelAdded"] = f"{label}: NFD's label the chart's affinity asks (no NFD here)"


def dra_daemonset(
    run: Run, node_name: str, moved: list[dict[str, Any]], image: str, detail: dict[str, Any]
) -> dict[str, Any]:
    """The moved render's kubelet-plugin DaemonSet (image swapped, the ServiceAccount token volume added) and what
    it needs (namespace, ServiceAccount, RBAC); waits for its pod Running and its ResourceSlice of the node."""
    daemonset, detail["imageReplaced"] = with_built_image(kubelet_plugin_of(moved), image)
    daemonset = with_api_access(daemonset)
    detail["added"] = f"{API_VOLUME}: the ServiceAccount admission plugin's token volume (not run here)"
    others = [
        o
        for o in moved
        if o["kind"] in ORDER and o["kind"] not in ("DaemonSet", "Job") and SLICE_POLICY not in o["metadata"]["name"]
    ]
    detail["created"] = create(run, others, ORDER)
    detail["notApplied"] = sorted(
        {o["kind"] for o in moved if o["kind"] not in PATHS}
        | {f"{o['kind']}/{o['metadata']['name']}" for o in moved if SLICE_POLICY in o["metadata"]["name"]}
    )
    root_mount_shared(detail)
    label_for_affinity(run, node_name, daemonset, detail)
    began = time.monotonic()
    detail["created"] += create(run, [daemonset], ("DaemonSet",))
    pod = daemonset_pod_running(
        run, daemonset, node_name, "the DRA kubelet-plugin DaemonSet's pod Running", began, detail
    )
    namespace = daemonset["metadata"]["namespace"]

    def published_slice() -> Any:
        code, slices = run.api("GET", "/apis/resource.k8s.io/v1/resourceslices")
        mine = [s for s in (slices or {}).get("items", []) if s["spec"].get("nodeName") == node_name]
        return mine or f"{code}: no slice of {node_name} yet"

    try:
        slices = wait("the DaemonSet driver's ResourceSlice", published_slice, 120)
    finally:
        detail["podLog"] = _container_log(namespace, pod["metadata"]["name"])[-30:]
    detail["publishedSeconds"] = round(time.monotonic() - began, 2)
    run.report["resourceSlice"] = slices[0]
    device = slices[0]["spec"]["devices"][0]
    detail["device"] = {
        "name": device["name"],
        "attributes": sorted(device.get("attributes", {})),
        "memory": device.get("capacity", {}).get("memory", {}).get("value"),
    }
    detail["driverLog"] = detail.pop("podLog")[-25:]
    return daemonset


DRIVER_TOOLS = Path("/usr/local/nvidia/bin")
"""Where the lent machines keep nvidia-smi (beside /usr/local/nvidia/lib64, `base.DRIVER_LIBRARIES`)."""


def driver_files_inside_the_container(detail: dict[str, Any]) -> None:
    """Make the host's driver files resolve under the container's /driver-root, where the chart's prestart script
    and the plugin look: a link into /usr/local/nvidia must be relative (an absolute target resolves against the
    container's own root) and nvidia-smi a real file in /usr/bin (the script's `find` without -L takes files only).
    A driver installed by its package puts both there; the lent machine keeps them in /usr/local/nvidia."""
    relinked = []
    for library in sorted(base.DRIVER_LIBRARIES.glob("lib*.so*")):
        target = base.STANDARD_LIBRARIES / library.name
        if target.is_symlink() and Path(os.readlink(target)).is_absolute():
            target.unlink()
            target.symlink_to(os.path.relpath(library, target.parent))
            relinked.append(library.name)
    detail["librariesRelinkedRelative"] = len(relinked)
    smi, installed = DRIVER_TOOLS / "nvidia-smi", Path("/usr/bin/nvidia-smi")
    # The lent H200 puts a shell-script wrapper there that calls /usr/local/nvidia/bin/nvidia-smi, which inside the
    # container's /driver-root resolves to nothing: only the binary itself serves the prestart script.
    wrapper = installed.is_file() and not installed.is_symlink() and installed.read_bytes()[:4] != b"\x7fELF"
    if smi.is_file() and (installed.is_symlink() or not installed.exists() or wrapper):
        installed.unlink(missing_ok=True)
        shutil.copy2(smi.resolve(), installed)
        detail["nvidiaSmiCopied"] = f"{smi} -> {installed}"


def delete_and_wait(run: Run, daemonset: dict[str, Any], what: str) -> None:
    """Delete a DaemonSet as `pulumi up` without the owner does, and wait until its pods are gone."""
    namespace, name = daemonset["metadata"]["namespace"], daemonset["metadata"]["name"]
    run.api("DELETE", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", {"propagationPolicy": "Background"})
    selector = ",".join(f"{k}%3D{v}" for k, v in daemonset["spec"]["selector"]["matchLabels"].items())
    wait(f"the {what} pod gone", lambda: not pods_of(run, namespace, selector) or "still there", 90)


def remove_owner(
    run: Run, daemonset: dict[str, Any] | None, what: str, binary: str, allocator: str, sampler: Sampler
) -> None:
    """The owner leaves the node: its DaemonSet deleted (as `pulumi up` without the owner deletes it) and awaited
    gone, or, when it ran as a host process, that process stopped and the sampler told."""
    if daemonset is not None:
        delete_and_wait(run, daemonset, what)
        return
    host = next(p for p in run.processes if binary in str(p.args))
    host.terminate()
    host.wait(timeout=30)
    sampler.host_allocators.discard(allocator)


def move_to_dra(
    run: Run,
    hw: Path,
    node_name: str,
    holder_namespace: str,
    moved: list[dict[str, Any]],
    sampler: Sampler,
    phases: dict[str, float],
    plugin: dict[str, Any] | None = None,
    dra_image: str | None = None,
) -> dict[str, Any] | None:
    """The phases of `migrate --to dra --drain` on this node, done by this script: cordon, evict the GPU's holder
    (Eviction API), remove the device plugin, wait until nothing is published, install the DRA driver (host
    process, or with `dra_image` the moved render's DaemonSet), wait for its slice, uncordon. Returns the DRA
    DaemonSet created, if any."""

    began = time.monotonic()
    schedulable(run, node_name, False)
    timed(phases, "cordon", began)
    began = time.monotonic()
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": HOLDER, "namespace": holder_namespace},
    }
    code, answer = run.api("POST", f"/api/v1/namespaces/{holder_namespace}/pods/{HOLDER}/eviction", eviction)
    if code not in (200, 201):
        raise StepFailed(f"evict the holder: {code} {str(answer)[:300]}")

    def evicted() -> Any:
        code, _ = run.api("GET", f"/api/v1/namespaces/{holder_namespace}/pods/{HOLDER}")
        return code == 404 or f"holder still there ({code})"

    wait("the holder evicted and gone", evicted, 60)
    timed(phases, "drain", began)
    began = time.monotonic()
    remove_owner(run, plugin, "plugin", "nvidia-device-plugin", "device-plugin", sampler)
    timed(phases, "remove", began)
    began = time.monotonic()

    def unpublished() -> Any:
        _, node = run.api("GET", f"/api/v1/nodes/{node_name}")
        now = published(node or {})
        return now if all(v == "0" for v in now["allocatable"].values()) else f"node: {now}"

    run.report.setdefault("published", {})["afterMove"] = wait("nothing published by the plugin", unpublished, 60)
    timed(phases, "wait-unpublished", began)
    began = time.monotonic()
    installed = None
    if dra_image is not None:
        installed = dra_daemonset(run, node_name, moved, dra_image, run.report.setdefault("dra", {}))
    else:
        sampler.host_allocators.add("dra")
        base.dra_plugin(run, hw, moved, run.report.setdefault("dra", {}), node_name=node_name)
    timed(phases, "install+wait-published", began)
    began = time.monotonic()
    schedulable(run, node_name, True)
    timed(phases, "uncordon", began)
    return installed


def move_back(
    run: Run,
    node_name: str,
    dra_job: dict[str, Any],
    objects: list[dict[str, Any]],
    image: str,
    sampler: Sampler,
    phases: dict[str, float],
    detail: dict[str, Any],
    *,
    api_access: bool,
    dra: dict[str, Any] | None = None,
) -> None:
    """The phases of `migrate --to device-plugin --drain`: cordon, the DRA smoke Job (and its claim) deleted, the DRA
    driver stopped, its slice gone (the kubelet wipes an unregistered driver's slices), the plugin's DaemonSet
    (the default render) created and publishing, uncordon."""

    began = time.monotonic()
    schedulable(run, node_name, False)
    timed(phases, "cordon", began)
    began = time.monotonic()
    namespace, name = dra_job["metadata"]["namespace"], dra_job["metadata"]["name"]
    run.api("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", {"propagationPolicy": "Background"})

    def consumers_gone() -> Any:
        code, _ = run.api("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        left = pods_of(run, namespace, f"job-name%3D{name}")
        _, claims = run.api("GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")
        held = len((claims or {}).get("items", []))
        return (code == 404 and not left and not held) or f"Job {code}, {len(left)} pod(s), {held} claim(s)"

    wait("the DRA consumers gone", consumers_gone, 60)
    timed(phases, "drain", began)
    began = time.monotonic()
    remove_owner(run, dra, "DRA kubelet-plugin", "gpu-kubelet-plugin", "dra", sampler)
    timed(phases, "remove", began)
    began = time.monotonic()

    def no_slice() -> Any:
        _, slices = run.api("GET", "/apis/resource.k8s.io/v1/resourceslices")
        mine = [s for s in (slices or {}).get("items", []) if s.get("spec", {}).get("nodeName") == node_name]
        return not mine or f"{len(mine)} slice(s) of {node_name} left"

    wait("the DRA driver's slice wiped", no_slice, 120)
    timed(phases, "wait-unpublished", began)
    began = time.monotonic()
    install: dict[str, Any] = {}
    detail["install"] = install
    plugin_daemonset(run, node_name, objects, image, install, key="back", api_access=api_access)
    timed(phases, "install+wait-published", began)
    began = time.monotonic()
    schedulable(run, node_name, True)
    timed(phases, "uncordon", began)


def prepare_node(run: Run, hw: Path, images: Path, *, dra: bool) -> str:
    """The node's host half, step by step: host facts, the driver's libraries, runc on this kernel, the `nvidia`
    handler, containerd with the pause, probe and device-plugin images (and the DRA driver's with `dra`, the driver's
    files then made visible inside its container). Returns the node's name."""
    with run.step("host") as d:
        base.host_facts(run, d)
        node_name = node_name_of(d["nvidiaSmi"])
        d["node"] = node_name
        run.report["card"] = d["nvidiaSmi"].split(",")[0].strip()
    with run.step("driver libraries in the loader's cache") as d:
        base.driver_libraries(d)
        if dra:
            driver_files_inside_the_container(d)
    with run.step("runc starts a container on this kernel") as d:
        adjust = base.runc_works(hw, d)
    with run.step("nvidia-container-runtime (CDI mode) and this host's CDI spec") as d:
        handler = nvidia_runtime(hw, adjust, d)
    with run.step("containerd with the nvidia handler, runc and the bridge CNI; images imported") as d:
        archives: tuple[str, ...] = ("pause.oci.tar", "probe.oci.tar", "device-plugin.oci.tar")
        if dra:
            archives += ("dra.oci.tar",)
        base.containerd(run, hw, images, adjust, d, archives=archives, extra_config=handler)
    return node_name


def cluster_snapshot(run: Run) -> dict[str, Any]:
    """What a failed step leaves to read once the machine is gone: each DaemonSet's counts, each pod's phase, node,
    waiting reasons and conditions not True, the nodes' taints, and the newest events (a pod that never came)."""
    if run.cluster is None:
        return {}
    _, daemonsets = run.api("GET", "/apis/apps/v1/daemonsets")
    _, pods = run.api("GET", "/api/v1/pods")
    _, nodes = run.api("GET", "/api/v1/nodes")
    _, events = run.api("GET", "/api/v1/events")
    counts = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady", "numberMisscheduled")
    return {
        "daemonSets": {
            f"{d['metadata']['namespace']}/{d['metadata']['name']}": {k: (d.get("status") or {}).get(k) for k in counts}
            for d in (daemonsets or {}).get("items", [])
        },
        "pods": {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": {
                "phase": (p.get("status") or {}).get("phase"),
                "node": (p.get("spec") or {}).get("nodeName"),
                "deleting": "deletionTimestamp" in p["metadata"],
                "waiting": [
                    f"{c['name']}: {c['state']['waiting'].get('reason')} {c['state']['waiting'].get('message', '')}"
                    for c in [
                        *(p.get("status") or {}).get("initContainerStatuses", []),
                        *(p.get("status") or {}).get("containerStatuses", []),
                    ]
                    if "waiting" in (c.get("state") or {})
                ],
                "conditions": [
                    f"{c['type']}={c['status']} {c.get('reason', '')} {c.get('message', '')}".strip()
                    for c in (p.get("status") or {}).get("conditions", [])
                    if c.get("status") != "True"
                ],
            }
            for p in (pods or {}).get("items", [])
        },
        "nodes": {
            n["metadata"]["name"]: {"unschedulable": n["spec"].get("unschedulable"), "taints": n["spec"].get("taints")}
            for n in (nodes or {}).get("items", [])
        },
        "events": [
            f"{e.get('lastTimestamp') or e.get('eventTime')} {e['involvedObject'].get('kind')}/"
            f"{e['involvedObject'].get('name')} {e.get('reason')}: {e.get('message', '')}"[:400]
            for e in sorted(
                (events or {}).get("items", []), key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime"))
            )[-60:]
        ],
    }


def wind_down(run: Run, sampler: Sampler | None, code: int, logs: Path) -> None:
    """The report's last fields (the sampler's, the result) saved, the log tails written, everything stopped."""
    if sampler is not None:
        sampler.stop_event.set()
        sampler.join(timeout=2)
        run.report["sampler"] = sampler.report()
    run.report["result"] = "pass" if code == 0 else "fail"
    if code != 0:
        with contextlib.suppress(Exception):
            run.report["clusterAtFailure"] = cluster_snapshot(run)
    run.save()
    with logs.open("w") as out:
        for log in (
            sorted(LOGS.glob("*.log")) + sorted(STATE.glob("*.log")) + sorted(Path("/var/log/pods").glob("*/*/*.log"))
        ):
            out.write(f"===== {log}\n{tail(log, 60)}\n")
    for process in run.processes:
        process.terminate()
    for process in run.processes:
        with contextlib.suppress(Exception):
            process.wait(timeout=10)
    with contextlib.suppress(Exception):
        run.report["leftBehind"] = end_pods_and_kubelet_state()
        run.save()
    with contextlib.suppress(Exception):
        localcluster.stop(STATE)
    shutil.rmtree(base.CONTAINERD_STATE, ignore_errors=True)


KUBEPODS = Path("/sys/fs/cgroup")
"""cgroup v2's root: the kubelet (cgroupfs driver) puts every pod under `kubepods` there."""


def end_pods_and_kubelet_state() -> dict[str, Any]:
    """After the kubelet and containerd have stopped, what they started still runs (containerd's shims outlive it):
    end every pod's processes (cgroup v2's `cgroup.kill`), unmount the kubelet's pod volumes and remove its state, so
    a second run in the same lease starts from a bare node, no pod of the first holding the GPU."""
    killed = []
    for control in sorted(KUBEPODS.glob("kubepods*/cgroup.kill")):
        control.write_text("1")
        killed.append(str(control.parent))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        (Path(c) / "cgroup.procs").read_text().strip() for c in killed if (Path(c) / "cgroup.procs").exists()
    ):
        time.sleep(0.2)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    ours = sorted({m for m in mounts if m.startswith(f"{base.KUBELET_DIR}/")}, key=len, reverse=True)
    for mount in ours:
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    shutil.rmtree(base.KUBELET_DIR, ignore_errors=True)
    return {"podCgroupsKilled": killed, "kubeletMountsUnmounted": len(ours)}


def run_arguments(description: str) -> argparse.ArgumentParser:
    """The options every device-plugin cohort run takes: the unpacked stages, the default render, report and logs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--toolchain", type=Path, required=True, help="the unpacked toolchain cache folder")
    parser.add_argument("--hw", type=Path, required=True, help="the unpacked hardware-toolchain folder")
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--review", type=Path, required=True, help="the device-plugin stack's review folder")
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True)
    return parser


def published_detail(run: Run, node_name: str, detail: dict[str, Any], sampler: Sampler) -> None:
    """What the node publishes now: its `nvidia.com/*` capacity and allocatable, and how many slices it has."""
    _, node = run.api("GET", f"/api/v1/nodes/{node_name}")
    detail["published"] = published(node or {})
    detail["resourceSlices"] = sampler.sample()["resourceSlices"]


def main() -> int:
    parser = run_arguments(__doc__.splitlines()[0])
    parser.add_argument("--time-slicing", type=Path, help="the time-slicing stack's review folder")
    parser.add_argument("--move-to-dra", type=Path, help="the moved stack's review folder (with --time-slicing)")
    parser.add_argument("--move-back", action="store_true", help="after the move to DRA, move back to the plugin")
    parser.add_argument(
        "--time-slicing-host",
        action="store_true",
        help="run the time-slicing plugin as a host process (the first runs), not as the chart's DaemonSet",
    )
    parser.add_argument(
        "--dra-daemonset",
        action="store_true",
        help="run the DRA driver as the moved render's DaemonSet from images/dra.oci.tar, not as a host process",
    )
    args = parser.parse_args()
    run = Run(args.report)
    run.report["run"] = "device-plugin cohort"
    objects = base.rendered(args.review)
    run.report["rendered"] = {"default": rendered_allocator(objects)}
    sliced = base.rendered(args.time_slicing) if args.time_slicing else []
    moved = base.rendered(args.move_to_dra) if args.move_to_dra else []
    # DaemonSet pods that read the API server (config-manager, the DRA kubelet plugin) need what a cluster gives.
    api_access = (bool(sliced) and not args.time_slicing_host) or args.dra_daemonset
    image = (args.images / "device-plugin-image.txt").read_text().strip()
    dra_image = (args.images / "dra-image.txt").read_text().strip() if args.dra_daemonset else None
    sampler: Sampler | None = None
    code = 0
    try:
        node_name = prepare_node(run, args.hw, args.images, dra=args.dra_daemonset)
        with run.step("etcd, kube-apiserver, kube-controller-manager, kube-scheduler") as d:
            base.control_plane(run, args.toolchain, d)
        sampler = Sampler(run, node_name)
        sampler.start()
        with run.step("kubelet registers the node with the labels the program's DaemonSet selects") as d:
            base.kubelet(run, args.hw, d, node_name=node_name, labels=node_labels(daemonset_of(objects)))
            _, node = run.api("GET", f"/api/v1/nodes/{node_name}")
            d["publishedBeforePlugin"] = published(node or {})
        if api_access:
            with run.step("pods reach the API server: the kubernetes Service routed, kube-root-ca.crt published") as d:
                pod_api_access(run, [*objects, *sliced, *moved], d)
        with run.step("the program's objects applied; the device plugin DaemonSet's pod publishes the GPU") as d:
            daemonset = plugin_daemonset(run, node_name, objects, image, d, api_access=api_access)
        with run.step("smoke Job gets nvidia.com/gpu; the nvidia handler injects the GPU; the probe runs") as d:
            smoke(run, objects, d, "default")
        sliced_daemonset: dict[str, Any] | None = None
        if sliced:
            run.report["rendered"]["timeSlicing"] = rendered_allocator(sliced)
            with run.step("the DaemonSet removed: its pod goes, the kubelet's allocatable falls to 0") as d:
                delete_daemonset(run, node_name, daemonset, d)
            if args.time_slicing_host:
                with run.step("time-slicing: the plugin (host process) with the program's config publishes") as d:
                    host_plugin_time_slicing(run, args.images, node_name, sliced, sampler, d)
            else:
                with run.step(
                    "time-slicing: the program's DaemonSet (config-manager, plugin) publishes the shared GPU"
                ) as d:
                    sliced_daemonset = plugin_daemonset(
                        run,
                        node_name,
                        sliced,
                        image,
                        d,
                        key="timeSlicing",
                        resource="nvidia.com/gpu.shared",
                        api_access=True,
                    )
            with run.step("time-slicing: smoke Job gets the shared GPU; the probe runs") as d:
                create(run, [o for o in sliced if o["kind"] == "ConfigMap"], ("ConfigMap",))
                smoke(run, sliced, d, "timeSlicing")
        if moved:
            job = next(o for o in (sliced or objects) if o["kind"] == "Job")
            resource = "nvidia.com/gpu.shared" if sliced else "nvidia.com/gpu"
            holding = sliced_daemonset if sliced else daemonset
            held = "the time-sliced GPU" if sliced else "the GPU"
            with run.step(f"a pod holds {held} through the device plugin") as d:
                holder_pod(run, node_name, job, resource, d)
            with run.step("owner change to DRA: cordon, drain, remove, unpublished, install, published, uncordon") as d:
                phases: dict[str, float] = {}
                d["phases"] = phases
                dra_installed = move_to_dra(
                    run,
                    args.hw,
                    node_name,
                    job["metadata"]["namespace"],
                    moved,
                    sampler,
                    phases,
                    holding,
                    dra_image,
                )
                d["draAs"] = "DaemonSet" if dra_installed else "host process"
                published_detail(run, node_name, d, sampler)
            with run.step(
                "the moved cohort's objects applied; the DRA smoke Job's claim allocated; the probe runs"
            ) as d:
                job = base.apply_objects(run, moved, d)
                base.smoke(run, args.hw, job, d)
                run.report["probes"]["dra"] = run.report.pop("probe")
            if args.move_back:
                with run.step(
                    "owner change back to the plugin: cordon, drain, remove, unpublished, install, uncordon"
                ) as d:
                    phases = {}
                    d["phases"] = phases
                    move_back(
                        run,
                        node_name,
                        job,
                        objects,
                        image,
                        sampler,
                        phases,
                        d,
                        api_access=api_access,
                        dra=dra_installed,
                    )
                with run.step("back on the plugin: the smoke Job gets nvidia.com/gpu; the probe runs") as d:
                    smoke(run, objects, d, "back")
    except Exception:
        code = 1
    finally:
        wind_down(run, sampler, code, args.logs)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
