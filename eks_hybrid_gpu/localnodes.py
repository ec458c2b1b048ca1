"""The simulated GPU nodes of the local default: kwok plays their kubelets, the device manager their devices.

Neither opens a port. kwok manages only the nodes annotated `KWOK_NODE_ANNOTATION`; the device manager makes each
simulated node publish what the allocator pods on it publish (`eks_hybrid_gpu.simulate.devicemanager`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eks_hybrid_gpu import projectdir
from eks_hybrid_gpu.localprocs import LocalClusterError, alive, binary, log_tail, progress, start_process

if TYPE_CHECKING:
    from eks_hybrid_gpu.localcluster import LocalCluster

KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
"""kwok manages exactly the nodes with this annotation (`--manage-nodes-with-annotation-selector`)."""
KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)
"""kwok's own default stages (what `kwokctl` configures), copied from its module by scripts/toolchain.sh:
nodes Ready with heartbeats and a Lease, pods Running/Ready at once, Job pods Succeeded, deleted pods gone."""


def kwok_stages(kwok_binary: str) -> list[Path]:
    """The stage files scripts/toolchain.sh put beside the kwok binary (`<kwok dir>/stages/...`)."""
    stages_dir = Path(kwok_binary).resolve().parent.parent / "stages"
    found = [stages_dir / stage for stage in KWOK_STAGES]
    missing = [str(p) for p in found if not p.exists()]
    if missing:
        msg = f"kwok's stage files are missing ({', '.join(missing)}); run `scripts/toolchain.sh kwok` again"
        raise LocalClusterError(msg)
    return found


def start_kwok(cluster: LocalCluster) -> None:
    """Run kwok out of cluster against the cluster's kubeconfig; it opens no port (no --server-address)."""
    kwok_binary = binary("kwok")
    config = cluster.state_dir / "kwok.yaml"
    config.write_text("\n---\n".join(p.read_text().strip() for p in kwok_stages(kwok_binary)) + "\n")
    key, value = KWOK_NODE_ANNOTATION
    progress("starting kwok (simulated kubelets; no listening port)")
    start_process(
        cluster.state_dir,
        "kwok",
        [
            kwok_binary,
            f"--kubeconfig={cluster.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            "--cidr=10.244.0.0/16",
            "--node-ip=127.0.0.1",
            "--node-lease-duration-seconds=40",  # heartbeats through Leases in kube-node-lease, as kubelets do
        ],
    )
    start_device_manager(cluster)
    time.sleep(0.5)
    for name in ("kwok", "device-manager"):
        if not alive(cluster.state_dir, name):
            tail = log_tail(cluster.state_dir / f"{name}.log")
            msg = f"{name} exited at start; its log ends with:\n{tail}"
            raise LocalClusterError(msg)


def start_device_manager(cluster: LocalCluster) -> None:
    """The simulated kubelet's device manager (`eks_hybrid_gpu.simulate.devicemanager`): it opens no port.

    kwok plays the pod lifecycle; this process makes each simulated node publish what its allocator pods publish.
    """
    progress("starting the simulated device manager (GPU publications follow the allocator pods)")
    argv = [sys.executable, "-m", "eks_hybrid_gpu.simulate.devicemanager", f"--kubeconfig={cluster.kubeconfig}"]
    # It imports `components` and `policy`: from the project, as this process does (eks_hybrid_gpu.projectdir).
    start_process(cluster.state_dir, "device-manager", argv, projectdir.child_environment())
