"""A throw-away Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager.

It runs one of the toolchain's versions (`scripts/toolchain-versions.env`: 1.34.4, the seed's floor, and 1.37.2),
with that version's feature-gate defaults unless asked otherwise, serves resource.k8s.io/v1 (DRA) and runs the
garbage-collector and namespace controllers, so Pulumi's foreground deletes and namespace deletes complete. By
itself it has no nodes and no kubelet. With `kwok=True` (what `eks-hybrid-gpu local up` starts) it also runs
kube-scheduler, the workload controllers of a real cluster (`WORKLOAD_CONTROLLERS`), kwok, which plays the kubelet
of simulated nodes (they turn Ready and keep heartbeating, their pods go Running/Ready, and Job pods Succeeded), and
the simulated device manager, which plays the kubelet's device part: each node publishes the GPUs its allocator
pods publish. Everything listens on loopback only (kwok and the device manager serve nothing at all), lives in one
state directory, and is stopped by pid.

The API server serves a certificate signed by a CA of the cluster's own, made at start (`pki/` of the state
directory, as kind and k3d make theirs), for 127.0.0.1 and localhost; the kubeconfig carries that CA
(`certificate-authority-data`), so every client — this module's readiness check, `cluster.client`, kwok, the device
manager, the controller manager and the scheduler, the Pulumi provider — verifies the server. Nothing skips TLS
verification.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eks_hybrid_gpu.localnodes import start_kwok
from eks_hybrid_gpu.localprocs import (
    LocalClusterError,
    alive,
    binary,
    free_port,
    kube_bin_dir,
    log_tail,
    progress,
    recorded_pid,
    start_process,
)

DEFAULT_CONTROLLERS = ("garbage-collector-controller", "namespace-controller")
WORKLOAD_CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "daemonset-controller",
    "deployment-controller",
    "replicaset-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "resourceclaim-controller",
    "disruption-controller",
)
"""What a real cluster runs for the objects the stacks create. No node-lifecycle or pod-GC controller: kwok
keeps the simulated nodes Ready, and a pod on a non-kwok node (none exist) would never be evicted."""
PROCESSES = ("device-manager", "kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
"""Every process a state directory may hold, in stop order."""
READY_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class LocalCluster:
    """A running local control plane."""

    state_dir: Path
    server: str
    token: str

    @property
    def kubeconfig(self) -> Path:
        """Kubeconfig of the cluster-admin user."""
        return self.state_dir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        """The cluster's own CA, which signed the API server's certificate: what every client verifies it with."""
        return self.state_dir / "pki" / "ca.crt"


SERVING_NAMES = "IP:127.0.0.1,DNS:localhost"
"""The names the API server's certificate is valid for: it listens on loopback only."""
CA_DAYS = 3650
SERVING_DAYS = 365
"""Lifetimes: longer than any local cluster lives (a state directory is made anew at every start)."""


def _openssl(*args: str) -> None:
    try:
        subprocess.run(["openssl", *args], check=True, capture_output=True, text=True)  # noqa: S603, S607
    except FileNotFoundError:
        msg = "openssl is not installed: the local cluster makes its CA and keys with it; install openssl"
        raise LocalClusterError(msg) from None
    except subprocess.CalledProcessError as error:
        msg = f"openssl {args[0]} failed: {' '.join((error.stderr or '').split())[:300]}"
        raise LocalClusterError(msg) from None


def make_certificates(pki: Path) -> tuple[Path, Path, Path]:
    """A CA of the cluster's own and the API server's certificate it signs: (CA, serving cert, serving key).

    The serving certificate names 127.0.0.1 and localhost, is for server authentication only, and carries the key
    identifiers strict verifiers (Python 3.13's VERIFY_X509_STRICT, Go) look for.
    """
    pki.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (
        pki / n for n in ("ca.key", "ca.crt", "apiserver.key", "apiserver.csr", "apiserver.crt")
    )
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", str(CA_DAYS),
        "-keyout", str(ca_key), "-out", str(ca), "-subj", "/CN=eks-hybrid-gpu local CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=kube-apiserver"
    )
    extensions = pki / "apiserver.ext"
    extensions.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={SERVING_NAMES}\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl(
        "x509", "-req", "-sha256", "-days", str(SERVING_DAYS), "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-extfile", str(extensions),
    )  # fmt: skip
    return ca, cert, key


def _get(url: str, token: str, ca_file: Path) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(ca_file))  # the cluster's own CA; the hostname is checked
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    # The loopback API server is never reached through $HTTPS_PROXY: kubectl and the Pulumi provider (Go) skip a
    # proxy for loopback too, so a machine behind a proxy starts its local cluster as any other.
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    try:
        with direct.open(request, timeout=5) as response:
            return response.status, response.read().decode()
    except OSError as error:
        return 0, str(error)


def _wait_ready(cluster: LocalCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _ = _get(f"{cluster.server}/readyz", cluster.token, cluster.ca_file)
        if status == 200:
            return
        if not alive(cluster.state_dir, "kube-apiserver") or not alive(cluster.state_dir, "etcd"):
            break
        time.sleep(0.5)
    tail = log_tail(cluster.state_dir / "kube-apiserver.log")
    msg = f"the local API server did not become ready within {timeout:.0f} s; its log ends with:\n{tail}"
    raise LocalClusterError(msg)


def _write_kubeconfig(cluster: LocalCluster) -> None:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": cluster.server,
                    "certificate-authority-data": base64.b64encode(cluster.ca_file.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": cluster.token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
    }
    cluster.kubeconfig.write_text(json.dumps(document, indent=2))
    cluster.kubeconfig.chmod(0o600)


def start(
    state_dir: Path,
    *,
    controllers: tuple[str, ...] = DEFAULT_CONTROLLERS,
    scheduler: bool = False,
    kwok: bool = False,
    timeout: float = READY_TIMEOUT_SECONDS,
    kubernetes_version: str | None = None,
    feature_gates: Mapping[str, bool] | None = None,
    pod_service_accounts: bool = False,
) -> LocalCluster:
    """Start etcd, the API server and the controller manager (and the scheduler when asked); wait for /readyz.

    `kwok=True` also starts kwok for the annotated simulated nodes (and implies the scheduler). `kubernetes_version`
    picks a built version by its minor (None: the one on PATH, the toolchain's default); `feature_gates` go to every
    control-plane component, the rest stay at that version's defaults. `pod_service_accounts` gives pods what a
    cluster gives them to reach the API server (the hardware runs' real kubelets; kwok's pods run nowhere): the
    ServiceAccount admission plugin on, and the controller manager given the API server's certificate as the root CA
    its publisher writes into `kube-root-ca.crt` (`controllers` must then name the serviceaccount and
    root-ca-certificate-publisher controllers). On any failure everything started so far is stopped and the state
    directory removed.
    """
    if state_dir.exists() and any(alive(state_dir, n) for n in ("etcd", "kube-apiserver")):
        msg = f"a local cluster is already running from {state_dir}; run `eks-hybrid-gpu local down` first"
        raise LocalClusterError(msg)
    bin_dir = kube_bin_dir(kubernetes_version) if kubernetes_version else None
    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.mkdir(parents=True, mode=0o700)
    try:
        gates = ",".join(f"{gate}={str(on).lower()}" for gate, on in sorted((feature_gates or {}).items()))
        cluster = _start_all(state_dir, controllers, scheduler or kwok, timeout, bin_dir, gates, pod_service_accounts)
        if kwok:
            start_kwok(cluster)
        return cluster
    except BaseException:
        stop(state_dir)
        raise


def _start_all(
    state: Path,
    controllers: tuple[str, ...],
    scheduler: bool,
    timeout: float,
    bin_dir: Path | None,
    gates: str,
    pod_service_accounts: bool = False,
) -> LocalCluster:
    etcd, apiserver = binary("etcd"), binary("kube-apiserver", bin_dir)
    gate_flags = [f"--feature-gates={gates}"] if gates else []
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    token = secrets.token_hex(16)
    (state / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
    _openssl("genrsa", "-out", str(state / "sa.key"), "2048")
    _ca, serving_cert, serving_key = make_certificates(state / "pki")
    progress(f"starting etcd on 127.0.0.1:{etcd_port}")
    start_process(
        state,
        "etcd",
        [
            etcd,
            "--name",
            "local",
            "--data-dir",
            str(state / "etcd"),
            "--listen-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer_port}",
            "--initial-cluster",
            f"local=http://127.0.0.1:{peer_port}",
            "--listen-metrics-urls",
            f"http://127.0.0.1:{free_port()}",
            "--unsafe-no-fsync",
            "--log-level",
            "warn",
        ],
    )
    progress(f"starting kube-apiserver on 127.0.0.1:{api_port}")
    server = f"https://127.0.0.1:{api_port}"
    start_process(
        state,
        "kube-apiserver",
        [
            apiserver,
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # 1.37 refuses a loopback advertise address for the `kubernetes` Service's endpoints; nothing here
            # reaches the API server through that Service (kwok's pods run nowhere), so no reconciler keeps them.
            "--endpoint-reconciler-type=none",
            f"--secure-port={api_port}",
            f"--tls-cert-file={serving_cert}",
            f"--tls-private-key-file={serving_key}",
            f"--token-auth-file={state / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            *([] if pod_service_accounts else ["--disable-admission-plugins=ServiceAccount"]),
            f"--service-account-issuer={server}",
            f"--service-account-key-file={state / 'sa.key'}",
            f"--service-account-signing-key-file={state / 'sa.key'}",
            *gate_flags,
        ],
    )
    cluster = LocalCluster(state, server, token)
    _write_kubeconfig(cluster)
    _wait_ready(cluster, timeout)
    progress(f"API server ready at {server}")
    manager = binary("kube-controller-manager", bin_dir)
    progress(f"starting kube-controller-manager ({', '.join(controllers)})")
    start_process(
        state,
        "kube-controller-manager",
        [
            manager,
            f"--kubeconfig={cluster.kubeconfig}",
            f"--controllers={','.join(controllers)}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--cert-dir={state / 'kcm-certs'}",
            f"--service-account-private-key-file={state / 'sa.key'}",
            "--use-service-account-credentials=false",
            *([f"--root-ca-file={state / 'apiserver-certs' / 'apiserver.crt'}"] if pod_service_accounts else []),
            *gate_flags,
        ],
    )
    if scheduler:
        progress("starting kube-scheduler")
        start_process(
            state,
            "kube-scheduler",
            [
                binary("kube-scheduler", bin_dir),
                f"--kubeconfig={cluster.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={state / 'scheduler-certs'}",
                *gate_flags,
            ],
        )
    (state / "cluster.json").write_text(json.dumps({"server": server}))
    return cluster


def controllers_of(state_dir: Path) -> tuple[str, ...]:
    """The `--controllers` of the state directory's running kube-controller-manager (empty when not running)."""
    pid = recorded_pid(state_dir, "kube-controller-manager")
    if pid is None or not alive(state_dir, "kube-controller-manager"):
        return ()
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ()
    for arg in argv:
        if arg.startswith(b"--controllers="):
            return tuple(arg.decode().removeprefix("--controllers=").split(","))
    return ()


def running(state_dir: Path) -> list[str]:
    """The processes of the state directory that are alive."""
    return [name for name in reversed(PROCESSES) if alive(state_dir, name)]


def running_kubeconfig(state_dir: Path) -> Path | None:
    """The kubeconfig of the local cluster of `state_dir` while its API server runs, else None."""
    kubeconfig = state_dir / "kubeconfig"
    return kubeconfig if kubeconfig.is_file() and alive(state_dir, "kube-apiserver") else None


def attach(state_dir: Path) -> LocalCluster:
    """The running cluster of a state directory."""
    kubeconfig = running_kubeconfig(state_dir)
    if kubeconfig is None:
        msg = f"no local cluster is running from {state_dir}; run `eks-hybrid-gpu local up` first"
        raise LocalClusterError(msg)
    document = json.loads(kubeconfig.read_text())
    return LocalCluster(state_dir, document["clusters"][0]["cluster"]["server"], document["users"][0]["user"]["token"])


def stop(state_dir: Path) -> list[str]:
    """Stop every process of the state directory (controllers first, etcd last) and remove the directory."""
    stopped = []
    for name in PROCESSES:
        pid = recorded_pid(state_dir, name)
        if pid is None or not alive(state_dir, name):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while alive(state_dir, name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(state_dir, name):
            os.kill(pid, signal.SIGKILL)
        stopped.append(name)
    shutil.rmtree(state_dir, ignore_errors=True)
    return stopped
