"""Pinned chart versions and their upstream sources: the one place a version changes.

Versions follow the reviewed interfaces of the source material (GPU Operator 26.7.0, DRA driver 0.5.0,
device plugin 0.20.0). A floating version would install whatever is latest, so every chart is pinned and
the stack config may override the version only with another exact version.
"""

from __future__ import annotations

from typing import Final

DEVICE_PLUGIN_CHART: Final = "nvidia-device-plugin"
DEVICE_PLUGIN_VERSION: Final = "0.20.0"
DEVICE_PLUGIN_REPO: Final = "https://nvidia.github.io/k8s-device-plugin"

DRA_DRIVER_CHART: Final = "dra-driver-nvidia-gpu"
DRA_DRIVER_VERSION: Final = "0.5.0"
DRA_DRIVER_OCI: Final = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"

GPU_OPERATOR_CHART: Final = "gpu-operator"
GPU_OPERATOR_VERSION: Final = "v26.7.0"
GPU_OPERATOR_REPO: Final = "https://helm.ngc.nvidia.com/nvidia"

DRA_MIN_KUBERNETES: Final = (1, 34, 2)
"""DRA GPU allocation with resource.k8s.io/v1 requires Kubernetes 1.34.2 or newer."""

SMOKE_IMAGE_PLACEHOLDER: Final = "registry.example.invalid/approved/gpu-smoke@sha256:" + "0" * 64
"""Deliberately unusable default smoke image: a Job using it can never be approved to run."""
