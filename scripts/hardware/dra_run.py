#!/usr/bin/env python3
"""The DRA path for real, on the lent GPU machine: real driver, real kubelet, the program's smoke Job probing the GPU.

Runs there as root, after `scripts/hardware/render.sh dra` here and the unpacking of its stages there:
1. the NVIDIA driver's libraries in the loader's cache (the lent machine keeps them in /usr/local/nvidia/lib64);
2. runc checked on this kernel first (scripts/hardware/runc_check.py: which namespaces the kernel refuses, runc's
   own spec on the pause binary); then containerd (CDI on, its default in 2.x) running runc through a wrapper that
   keeps each spec and runc log, the bridge CNI, the pause and probe images imported;
3. etcd, kube-apiserver, kube-controller-manager and kube-scheduler (eks_hybrid_gpu.localcluster, loopback only);
4. a real kubelet, registering the node into the program's `dra` cohort;
5. NVIDIA's DRA kubelet plugin as a host process under the flags and environment of the chart's DaemonSet (the
   step before running that DaemonSet from an imported image), its HTTP and health endpoints off;
6. the program's own rendered objects for the cohort (namespaces, DeviceClasses, ResourceClaimTemplate, the probe
   ConfigMap, the cohort label guard and the approved smoke Job in probe mode);
7. the real scheduler allocates the claim, the kubelet calls the driver's NodePrepareResources, containerd
   injects the GPU through the driver's CDI spec, and `cuda_probe.py` runs inside the container.

Everything waits on what the cluster reports, with a deadline. One JSON report (each step's result and time, the
slice, the claim's allocation, the probe's JSON) is written to `--report`; log tails to `--logs`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import runc_check  # noqa: E402

from eks_hybrid_gpu import localcluster  # noqa: E402  (standard library only, like this script)

NODE = "h200-0"
COHORT_LABELS = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "dra"}
CONTAINERD_ROOT = Path("/var/lib/containerd-hw")
CONTAINERD_STATE = Path("/run/containerd-hw")
SOCKET = CONTAINERD_STATE / "containerd.sock"
KUBELET_DIR = Path("/var/lib/kubelet")
STATE = Path("/var/lib/hw-cluster")
LOGS = Path("/var/log/hw")
DRIVER_LIBRARIES = Path("/usr/local/nvidia/lib64")
STANDARD_LIBRARIES = Path("/usr/lib/x86_64-linux-gnu")
PAUSE_IMAGE = "localhost/eks-hybrid-gpu-pause:hardware"
APPLIED_KINDS = (
    "Namespace",
    "ConfigMap",
    "DeviceClass",
    "ResourceClaimTemplate",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "Job",
)
"""What the program renders for the cohort, minus the chart's DaemonSet (the plugin runs as a host process here),
its RBAC and CRDs (the host plugin uses the admin token) and the chart's ResourceSlice admission policy, which
admits slice writes only from the plugin's ServiceAccount."""
PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
    "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
}


class StepFailed(Exception):
    """A step could not reach what it waits for; the message says what the cluster reported instead."""


class Run:
    """The report as it grows, and the cluster client once there is one."""

    def __init__(self, report_path: Path) -> None:
        self.report_path = report_path
        self.report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": []}
        self.started = time.monotonic()
        self.cluster: localcluster.LocalCluster | None = None
        self.processes: list[subprocess.Popen[bytes]] = []

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        detail: dict[str, Any] = {}
        began = time.monotonic()
        print(f"[hw {time.monotonic() - self.started:6.1f}s] {name}", flush=True)
        entry: dict[str, Any] = {"name": name, "detail": detail}
        self.report["steps"].append(entry)
        try:
            yield detail
            entry["ok"] = True
        except Exception as error:
            entry["ok"] = False
            entry["error"] = f"{type(error).__name__}: {error}"
            print(f"  FAILED: {entry['error']}", flush=True)
            raise
        finally:
            entry["seconds"] = round(time.monotonic() - began, 2)
            self.save()

    def save(self) -> None:
        self.report["elapsedSeconds"] = round(time.monotonic() - self.started, 1)
        self.report_path.write_text(json.dumps(self.report, indent=2, sort_keys=False))

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        log = (LOGS / f"{name}.log").open("wb")
        self.processes.append(
            subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        )

    def api(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        """One request to the run's API server: (status, decoded JSON answer); PATCH wants a patch content type."""
        assert self.cluster is not None
        request = urllib.request.Request(  # noqa: S310 (loopback API server)
            self.cluster.server + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.cluster.token}", "Content-Type": content_type},
        )
        context = ssl._create_unverified_context()  # noqa: S323 (its own self-signed loopback server)
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def recent_events(run: Run, namespace: str) -> list[str]:
    """The namespace's newest 20 events, a line each: what a failed smoke Job's report shows of why."""
    events = (run.api("GET", f"/api/v1/namespaces/{namespace}/events")[1] or {}).get("items", [])
    return [
        f"{e.get('involvedObject', {}).get('kind')}/{e.get('involvedObject', {}).get('name')}: "
        f"{e.get('reason')}: {str(e.get('message'))[:300]}"
        for e in events
    ][-20:]


def wait(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """`check()` until it returns something truthy; StepFailed naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, urllib.error.URLError, ValueError) as error:
            last = f"{type(error).__name__}: {error}"
        if last and not isinstance(last, str):
            return last
        time.sleep(interval)
    raise StepFailed(f"{what}: not within {timeout:.0f} s (last: {str(last)[:300]})")


def sh(*argv: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
    if check and done.returncode != 0:
        raise StepFailed(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout)[-400:]}")
    return done.stdout


def tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


def host_facts(run: Run, detail: dict[str, Any]) -> None:
    fields = "name,memory.total,driver_version,pci.bus_id,mig.mode.current"
    detail["nvidiaSmi"] = sh("nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader").strip()
    detail["kernel"] = os.uname().release
    detail["cgroup"] = (
        Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        if Path("/sys/fs/cgroup/cgroup.controllers").exists()
        else "v1 or none"
    )
    detail["overlayfs"] = "overlay" in Path("/proc/filesystems").read_text()
    missing = [tool for tool in ("openssl", "ldconfig", "nvidia-smi") if shutil.which(tool) is None]
    if missing:
        raise StepFailed(f"the GPU machine lacks {missing}")


def driver_libraries(detail: dict[str, Any]) -> None:
    if DRIVER_LIBRARIES.is_dir():
        Path("/etc/ld.so.conf.d/00-nvidia-hw.conf").write_text(f"{DRIVER_LIBRARIES}\n")
        # The DRA driver looks for libnvidia-ml.so.1 in the standard folders under its driver root, not in the
        # loader's cache: link the libraries there, as a driver installed by its .run or package would be.
        linked = []
        for library in sorted(DRIVER_LIBRARIES.glob("lib*.so*")):
            target = STANDARD_LIBRARIES / library.name
            if not target.exists():
                target.symlink_to(library)
                linked.append(library.name)
        detail["linkedIntoStandardFolder"] = len(linked)
        sh("ldconfig")
    cache = sh("ldconfig", "-p")
    for soname in ("libnvidia-ml.so.1", "libcuda.so.1"):
        found = [line.split("=>")[-1].strip() for line in cache.splitlines() if soname in line]
        if not found:
            raise StepFailed(f"{soname} is not in the loader's cache after ldconfig")
        detail[soname] = found[0]


def runc_works(hw: Path, detail: dict[str, Any]) -> dict[str, Any]:
    """runc on this machine, before containerd: what the wrapper must adjust in each spec for runc to start it."""
    detail["kernelNamespaces"] = runc_check.kernel_namespaces()
    adjust: dict[str, Any] = {}
    notices = []
    floor = runc_check.oom_score_floor()
    detail["oomScoreAdjFloor"] = floor
    if floor is not None:
        adjust["oomScoreAdjFloor"] = floor
        notices.append(
            f"this machine denies lowering oom_score_adj below {floor} (no CAP_SYS_RESOURCE): each spec's "
            f"oomScoreAdj is raised to at least {floor} (the kubelet asks -998 for a sandbox)"
        )
    test = runc_check.self_test(hw)
    detail.update(test)
    if test["results"]["as written"] != "ok":
        if not test["fatalNamespaces"]:
            raise StepFailed(
                f"runc starts no container here, whatever is left out: {json.dumps(test['results'])[:600]}"
            )
        adjust["dropNamespaces"] = test["fatalNamespaces"]
        notices.append(
            f"containers run here without the {test['fatalNamespaces']} namespace(s): the kernel refuses them"
        )
    detail["notices"] = notices
    detail["adjust"] = adjust
    return adjust


def containerd(
    run: Run,
    hw: Path,
    images: Path,
    adjust: dict[str, Any],
    detail: dict[str, Any],
    *,
    archives: tuple[str, ...] = ("pause.oci.tar", "probe.oci.tar"),
    extra_config: str = "",
) -> None:
    """containerd with runc (through the wrapper), the bridge CNI and the pause image; `extra_config` is TOML
    appended to its default config (a runtime handler); `archives` are imported from `images`."""
    overlay = "overlay" in Path("/proc/filesystems").read_text()
    config = sh(str(hw / "containerd"), "config", "default")
    replacements = [
        (r"^root = .*$", f"root = '{CONTAINERD_ROOT}'"),
        (r"^state = .*$", f"state = '{CONTAINERD_STATE}'"),
        (r"^imports = .*$", "imports = []"),
        (r"sandbox = 'registry.k8s.io/pause:[^']*'", f"sandbox = '{PAUSE_IMAGE}'"),
        (r"BinaryName = ''", f"BinaryName = '{runc_check.logging_wrapper(hw, adjust)}'"),
        (r"bin_dirs = \['/opt/cni/bin'\]", f"bin_dirs = ['{hw / 'cni'}']"),
    ]
    if not overlay:
        replacements.append((r"snapshotter = 'overlayfs'", "snapshotter = 'native'"))
    for pattern, replacement in replacements:
        config, count = re.subn(pattern, replacement, config, count=1, flags=re.MULTILINE)
        if count != 1:
            raise StepFailed(f"containerd's default config has no match for {pattern!r}")
    Path("/etc/containerd-hw.toml").write_text(config + extra_config)
    net = Path("/etc/cni/net.d")
    net.mkdir(parents=True, exist_ok=True)
    (net / "10-hw-bridge.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "hw",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": "hwcni0",
                        "isGateway": True,
                        "ipMasq": False,
                        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/24"}]]},
                    }
                ],
            }
        )
    )
    run.start(
        "containerd",
        [str(hw / "containerd"), "--config", "/etc/containerd-hw.toml", "--address", str(SOCKET)],
        env={"PATH": f"{hw}:{os.environ['PATH']}"},
    )
    wait("containerd's socket", lambda: SOCKET.exists(), 30)
    ctr = ctr_command(hw)
    detail["version"] = sh(*ctr, "version").split("Server:")[-1].split()[:4]
    detail["snapshotter"] = "overlayfs" if overlay else "native"
    for archive in archives:
        sh(*ctr, "images", "import", "--snapshotter", detail["snapshotter"], str(images / archive))
    # The stack pins the probe by digest; name the imported image by that reference too, as a pull by digest would.
    reference = (images / "probe-image.txt").read_text().strip()
    sh(*ctr, "images", "tag", "--force", "localhost/eks-hybrid-gpu-probe:hardware", reference)
    detail["images"] = [line.split()[0] for line in sh(*ctr, "images", "ls", "-q").split("\n") if line]


POD_SERVICE_ACCOUNT_CONTROLLERS = ("serviceaccount-controller", "root-ca-certificate-publisher-controller")
"""What a cluster runs so that every namespace has its `default` ServiceAccount and `kube-root-ca.crt`."""


def ctr_command(hw: Path) -> list[str]:
    """`ctr` on the run's containerd, in the kubelet's image namespace."""
    return [str(hw / "ctr"), "--address", str(SOCKET), "--namespace", "k8s.io"]


def control_plane(run: Run, toolchain: Path, detail: dict[str, Any], *, pod_service_accounts: bool = False) -> None:
    """etcd, the API server, the controller manager and the scheduler; with `pod_service_accounts`, pods get their
    ServiceAccount's token, as on a cluster (ServiceAccount admission, default accounts, the root-CA publisher)."""
    bins = [str(p.parent) for p in toolchain.glob("*/bin/kube-apiserver")] + [
        str(p.parent) for p in toolchain.glob("*/bin/etcd")
    ]
    os.environ["PATH"] = ":".join([*bins, os.environ["PATH"]])
    # A real kubelet registers its node tainted not-ready; the node-lifecycle controller lifts the taint once the
    # node reports Ready (the local default leaves that controller out: kwok plays its nodes).
    controllers: tuple[str, ...] = (*localcluster.WORKLOAD_CONTROLLERS, "node-lifecycle-controller")
    if pod_service_accounts:
        controllers += POD_SERVICE_ACCOUNT_CONTROLLERS
    run.cluster = localcluster.start(
        STATE, controllers=controllers, scheduler=True, pod_service_accounts=pod_service_accounts
    )
    detail["podServiceAccounts"] = pod_service_accounts
    detail["server"] = run.cluster.server
    detail["version"] = run.api("GET", "/version")[1].get("gitVersion")


def kubelet(
    run: Run, hw: Path, detail: dict[str, Any], *, node_name: str = NODE, labels: dict[str, str] | None = None
) -> None:
    """A real kubelet on containerd's socket, registering `node_name` with `labels` (the dra cohort's by default)."""
    assert run.cluster is not None
    labels = COHORT_LABELS if labels is None else labels
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{SOCKET}",
        "failSwapOn": False,
        # 1.35+ kubelets refuse a cgroup v1 host unless told otherwise (KEP-5573); the lent machines so far were v2.
        "failCgroupV1": False,
        "resolvConf": "",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
    }
    path = Path("/etc/kubelet-hw.json")
    path.write_text(json.dumps(config))
    run.start(
        "kubelet",
        [
            str(hw / "kubelet"),
            f"--config={path}",
            f"--kubeconfig={run.cluster.kubeconfig}",
            f"--root-dir={KUBELET_DIR}",
            f"--hostname-override={node_name}",
            "--node-ip=127.0.0.1",
            "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()),
            "--v=2",
        ],
        env={"PATH": f"{hw}:{os.environ['PATH']}"},
    )

    def ready() -> Any:
        code, node = run.api("GET", f"/api/v1/nodes/{node_name}")
        if code != 200:
            return f"node {node_name}: {code}"
        conditions = {c["type"]: c for c in node.get("status", {}).get("conditions", [])}
        ready_condition = conditions.get("Ready", {})
        return node if ready_condition.get("status") == "True" else f"Ready: {ready_condition.get('message')}"

    node = wait(f"node {node_name} Ready", ready, 120)
    detail["kubeletVersion"] = node["status"]["nodeInfo"]["kubeletVersion"]
    detail["containerRuntimeVersion"] = node["status"]["nodeInfo"]["containerRuntimeVersion"]
    detail["labels"] = {k: v for k, v in node["metadata"]["labels"].items() if k in labels}


def rendered(review: Path) -> list[dict[str, Any]]:
    import yaml  # the GPU machine's python3 has PyYAML; this script needs it for the rendered tree only

    objects = [yaml.safe_load(p.read_text()) for p in sorted((review / "head").rglob("*.yaml"))]
    return [o for o in objects if isinstance(o, dict)]


def dra_plugin(
    run: Run, hw: Path, objects: list[dict[str, Any]], detail: dict[str, Any], *, node_name: str = NODE
) -> None:
    """The DRA kubelet plugin as a host process under the chart's env; waits for its ResourceSlice of `node_name`."""
    assert run.cluster is not None
    daemonset = next(o for o in objects if o["kind"] == "DaemonSet" and "kubelet-plugin" in o["metadata"]["name"])
    pod = daemonset["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "gpus")
    downward = {
        "spec.nodeName": node_name,
        "metadata.namespace": daemonset["metadata"]["namespace"],
        "spec.serviceAccountName": pod.get("serviceAccountName", "default"),
    }
    env: dict[str, str] = {}
    for variable in container.get("env", []):
        source = variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        env[variable["name"]] = downward.get(source, "") if source else str(variable.get("value", ""))
    # Loopback only, nothing listening beyond the plugin's unix sockets: its metrics and health endpoints off.
    env.update(
        {
            "HTTP_ENDPOINT": "",
            "HEALTHCHECK_PORT": "-1",
            "KUBECONFIG": str(run.cluster.kubeconfig),
            "NVIDIA_CDI_HOOK_PATH": str(hw / "nvidia-cdi-hook"),
            # In the DaemonSet the host's / is mounted at /driver-root; a host process sees it at / itself.
            "DRIVER_ROOT_CTR_PATH": "/",
            "PATH": f"{hw}:{os.environ['PATH']}",
        }
    )
    detail["env"] = {k: v for k, v in env.items() if k not in ("PATH", "KUBECONFIG")}
    verbosity = env.get("LOG_VERBOSITY", "4")
    Path("/var/run/cdi").mkdir(parents=True, exist_ok=True)
    create_all(run, objects, ("Namespace",))  # the plugin's own namespace, before it starts
    run.start("gpu-kubelet-plugin", [str(dra_binary(hw)), "-v", verbosity], env=env)

    def published() -> Any:
        code, slices = run.api("GET", "/apis/resource.k8s.io/v1/resourceslices")
        mine = [s for s in (slices or {}).get("items", []) if s["spec"].get("nodeName") == node_name]
        return mine or f"{code}: no slice of {node_name} yet"

    slices = wait("the driver's ResourceSlice", published, 90)
    run.report["resourceSlice"] = slices[0]
    device = slices[0]["spec"]["devices"][0]
    detail["device"] = {
        "name": device["name"],
        "attributes": sorted(device.get("attributes", {})),
        "memory": device.get("capacity", {}).get("memory", {}).get("value"),
    }


def dra_binary(hw: Path) -> Path:
    """The DRA kubelet plugin scripts/hardware-toolchain.sh built (one folder per driver version)."""
    found = sorted(hw.glob("dra-v*/gpu-kubelet-plugin"))
    if not found:
        raise StepFailed(f"no gpu-kubelet-plugin under {hw}/dra-v*: unpack the dra stage of scripts/hardware/render.sh")
    return found[-1]


def create_all(run: Run, objects: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """Create the rendered objects of these kinds, in this order (one that exists already is left as it is)."""
    created = []
    for kind in kinds:
        for o in objects:
            if o["kind"] != kind or "resourceslices-policy" in o["metadata"]["name"]:
                continue
            path = PATHS[kind].format(ns=o["metadata"].get("namespace", ""))
            code, answer = run.api("POST", path, o)
            if code not in (200, 201, 409):
                raise StepFailed(f"create {kind} {o['metadata']['name']}: {code} {str(answer)[:300]}")
            created.append(o)
    return created


def apply_objects(run: Run, objects: list[dict[str, Any]], detail: dict[str, Any]) -> dict[str, Any]:
    created = create_all(run, objects, APPLIED_KINDS)
    detail["created"] = [
        f"{o['kind']}/{o['metadata'].get('namespace', '_cluster')}/{o['metadata']['name']}" for o in created
    ]
    detail["notApplied"] = sorted({o["kind"] for o in objects if o["kind"] not in APPLIED_KINDS})
    job = next((o for o in created if o["kind"] == "Job"), {})
    if not job or job["spec"].get("suspend"):
        raise StepFailed("the rendered smoke Job is missing or suspended: render the hardware stack (approvedCohort)")
    return job


def keep_allocated_claim(run: Run, namespace: str, allocated: dict[str, Any]) -> None:
    """The claim a template generates is deleted once its pod has finished: keep it while it is allocated."""
    _, claims_now = run.api("GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")
    for claim in (claims_now or {}).get("items", []):
        if claim.get("status", {}).get("allocation"):
            allocated.update(claim)


def allocation_of(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """Each request's allocated device (driver, pool, device) and the DeviceClass it asked."""
    results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    classes = {r["name"]: r.get("exactly", {}).get("deviceClassName") for r in claim["spec"]["devices"]["requests"]}
    return [
        {**{k: r.get(k) for k in ("request", "driver", "pool", "device")}, "deviceClass": classes.get(r["request"])}
        for r in results
    ]


def smoke(run: Run, hw: Path, job: dict[str, Any], detail: dict[str, Any]) -> None:
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]

    def finished() -> Any:
        _, pods = run.api("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{name}")
        items = (pods or {}).get("items", [])
        if items and items[0]["status"].get("phase") in ("Succeeded", "Failed"):
            return items[0]
        if items:
            statuses = items[0]["status"].get("containerStatuses") or items[0]["status"].get("conditions")
            return f"{items[0]['status'].get('phase')}: {json.dumps(statuses)[:300]}"
        return "no pod yet"

    seen: list[str] = []
    allocated: dict[str, Any] = {}

    def observed() -> Any:
        keep_allocated_claim(run, namespace, allocated)
        answer = finished()
        if isinstance(answer, str) and (not seen or seen[-1] != answer):
            seen.append(answer)
        return answer

    pod: dict[str, Any] | None = None
    try:
        pod = wait(f"the smoke Job {namespace}/{name}'s pod to finish", observed, 150, interval=1.0)
    finally:
        detail["podStates"] = seen[-12:]
        detail["events"] = recent_events(run, namespace)
        detail["job"] = (run.api("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")[1] or {}).get("status")
        claims_now = run.api("GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")[1] or {}
        detail["claims"] = [
            {"name": c["metadata"]["name"], "status": c.get("status")} for c in claims_now.get("items", [])
        ]
        if (pod is None or pod["status"]["phase"] != "Succeeded") and runc_check.CAPTURED.exists():
            detail["runcCalls"] = tail(runc_check.CAPTURED / "calls.log", 12).splitlines()
            detail["runcLogs"] = [tail(p, 6) for p in sorted(runc_check.CAPTURED.glob("*.runc-log.json"))[-3:]]
            detail["runcReplay"] = runc_check.replay(hw)
    detail["pod"] = {
        "name": pod["metadata"]["name"],
        "phase": pod["status"]["phase"],
        "node": pod["spec"].get("nodeName"),
    }
    claim = allocated or None
    run.report["claim"] = claim
    if claim:
        detail["allocation"] = allocation_of(claim)
    plugin_log = LOGS / "gpu-kubelet-plugin.log"
    lines = plugin_log.read_text(errors="replace").splitlines() if plugin_log.exists() else []
    detail["driverPrepared"] = [line for line in lines if "newly prepared" in line][-1:]
    logs = sorted(Path("/var/log/pods").glob(f"{namespace}_{pod['metadata']['name']}_*/*/*.log"))
    lines = [
        json.loads(line).get("log", line) if line.startswith('{"') else line
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
    ]
    probe_lines = [re.sub(r"^\S+ (stdout|stderr) \w ", "", line) for line in lines]
    probe = next((json.loads(line) for line in probe_lines if line.startswith('{"probe"')), None)
    run.report["probe"] = probe
    detail["containerLog"] = probe_lines[-5:]
    cdi = sorted(p.name for p in Path("/var/run/cdi").glob("*"))
    detail["cdiSpecs"] = cdi
    if pod["status"]["phase"] != "Succeeded" or not probe or probe.get("status") != "pass":
        raise StepFailed(f"the probe did not pass: phase {pod['status']['phase']}, probe {json.dumps(probe)[:400]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolchain", type=Path, required=True, help="the unpacked toolchain cache folder")
    parser.add_argument("--hw", type=Path, required=True, help="the unpacked hardware-toolchain folder")
    parser.add_argument("--images", type=Path, default=REPO / "out" / "hw" / "images")
    parser.add_argument("--review", type=Path, default=REPO / "out" / "hw" / "review" / "hardware")
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True)
    args = parser.parse_args()
    run = Run(args.report)
    objects = rendered(args.review)
    code = 0
    try:
        with run.step("host") as d:
            host_facts(run, d)
        with run.step("driver libraries in the loader's cache") as d:
            driver_libraries(d)
        with run.step("runc starts a container on this kernel") as d:
            adjust = runc_works(args.hw, d)
        with run.step("containerd with CDI, runc and the bridge CNI; images imported") as d:
            containerd(run, args.hw, args.images, adjust, d)
        with run.step("etcd, kube-apiserver, kube-controller-manager, kube-scheduler") as d:
            control_plane(run, args.toolchain, d)
        with run.step("kubelet registers the node into the dra cohort") as d:
            kubelet(run, args.hw, d)
        with run.step("NVIDIA DRA kubelet plugin (host process, the chart's flags) publishes the GPU") as d:
            dra_plugin(run, args.hw, objects, d)
        with run.step("the program's rendered objects applied") as d:
            job = apply_objects(run, objects, d)
        with run.step("scheduler allocates, kubelet prepares, containerd injects, the probe runs") as d:
            smoke(run, args.hw, job, d)
    except Exception:
        code = 1
    finally:
        run.report["result"] = "pass" if code == 0 else "fail"
        run.save()
        with args.logs.open("w") as out:
            for log in sorted(LOGS.glob("*.log")) + sorted(STATE.glob("*.log")):
                out.write(f"===== {log.name}\n{tail(log, 60)}\n")
                text = log.read_text(errors="replace").splitlines()
                about = [line for line in text if re.search(r"smoke|claim|Prepare|CDI|cdi|sandbox|error", line)]
                out.write(
                    f"===== {log.name}: lines about the pod, its claim and errors\n" + "\n".join(about[-80:]) + "\n"
                )
        for process in run.processes:
            process.terminate()
        with contextlib.suppress(Exception):
            localcluster.stop(STATE)
        shutil.rmtree(CONTAINERD_STATE, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
