"""Pinned chart versions and their upstream sources: the one place a version changes.

Versions follow the reviewed interfaces of the source material (GPU Operator 26.7.0, DRA driver 0.5.0,
device plugin 0.20.0). A floating version would install whatever is latest, so every chart is pinned and
the stack config may override the version only with another exact version. Each version's archive digest sits
next to it (sha256 of the released archive, as in ../shared/reference/charts.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

DEVICE_PLUGIN_CHART: Final = "nvidia-device-plugin"
DEVICE_PLUGIN_VERSION: Final = "0.20.0"
DEVICE_PLUGIN_REPO: Final = "https://nvidia.github.io/k8s-device-plugin"
DEVICE_PLUGIN_SHA256: Final = "8b491b92ec7f3b7c0a806eedff27e36247b1dd986fbf91402776faa5a4d07c7e"

DRA_DRIVER_CHART: Final = "dra-driver-nvidia-gpu"
DRA_DRIVER_VERSION: Final = "0.5.0"
DRA_DRIVER_OCI: Final = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
DRA_DRIVER_SHA256: Final[str | None] = None
"""No known digest: no 0.5.0 archive has been seen here (../shared/charts holds 0.4.1); add it once one is checked."""
DRA_DRIVER_FALLBACK_VERSION: Final = "0.4.1"
"""The newest DRA archive seen: what the local stack and the chart-rendering tests use from a mirror."""
DRA_DRIVER_FALLBACK_SHA256: Final = "ff2d7edadb62a84aa4da7526033b7e4d7e494965ee75f3f80a344c052c2aaa8e"

GPU_OPERATOR_CHART: Final = "gpu-operator"
GPU_OPERATOR_VERSION: Final = "v26.7.0"
GPU_OPERATOR_REPO: Final = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_SHA256: Final = "2d1fea13dae16c215a46242a830aa03a5bbfc377693c628bb0c50853375ae20c"

ARCHIVE_SHA256: Final[Mapping[tuple[str, str], str | None]] = {
    (DEVICE_PLUGIN_CHART, DEVICE_PLUGIN_VERSION): DEVICE_PLUGIN_SHA256,
    (DRA_DRIVER_CHART, DRA_DRIVER_VERSION): DRA_DRIVER_SHA256,
    (DRA_DRIVER_CHART, DRA_DRIVER_FALLBACK_VERSION): DRA_DRIVER_FALLBACK_SHA256,
    (GPU_OPERATOR_CHART, GPU_OPERATOR_VERSION): GPU_OPERATOR_SHA256,
}
"""(chart, version) -> sha256 of its released `helm package` archive; None or absent: no known digest.

A downloaded or mirrored archive whose digest differs is refused (eks_hybrid_gpu.chartmirror).
"""

DRA_MIN_KUBERNETES: Final = (1, 34, 2)
"""DRA GPU allocation with resource.k8s.io/v1 requires Kubernetes 1.34.2 or newer."""

# What each owner needs from every cohort node's status.nodeInfo (components/node_facts.py checks it). A kubelet
# may run up to three minor versions behind the control plane, and nodeadm installs each Hybrid Node's own, so
# the control plane's version says nothing about the nodes'. Sources:
# - DRA driver and the GPU Operator's GPUCluster (its DRA workflow): the seed guide, "DRA GPU examples require
#   Kubernetes 1.34.2+" (resource.k8s.io/v1; 1.31's alpha API is not it) and, for DRA 0.5.0, "a CDI-enabled
#   runtime". The DRA chart itself says less (0.4.1: kubeVersion >=1.32.0-0, ../shared/reference/charts.md §3).
# - GPU Operator v26.7.0 in ClusterPolicy mode: the chart's kubeVersion >= 1.16.0-0 (charts.md §4).
# - device plugin 0.20.0: the chart's kubeVersion >= 1.10.0-0 (charts.md §2).
# - CDI in containerd: 1.7 added it behind `enable_cdi = true` in the CRI plugin's config; 2.0 turned it on by
#   default (containerd's release notes; eks_hybrid_gpu/hostcheck/containerd.py reads the setting on a host).
# The charts' `-0` lets pre-release suffixes through (an EKS kubelet reports v1.34.4-eks-<hash>), so a floor
# compares major.minor.patch only.
DRA_MIN_KUBELET: Final = DRA_MIN_KUBERNETES
CLUSTER_POLICY_MIN_KUBELET: Final = (1, 16, 0)
DEVICE_PLUGIN_MIN_KUBELET: Final = (1, 10, 0)
CDI_MIN_CONTAINERD: Final = (1, 7, 0)
"""The first containerd with CDI; it needs `enable_cdi = true` in the CRI plugin's config."""
CDI_DEFAULT_CONTAINERD: Final = (2, 0, 0)
"""From here containerd enables CDI by default."""

SMOKE_IMAGE_PLACEHOLDER: Final = "registry.example.invalid/approved/gpu-smoke@sha256:" + "0" * 64
"""Deliberately unusable default smoke image: a Job using it can never be approved to run."""
