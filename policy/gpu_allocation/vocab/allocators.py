"""Who allocates GPUs, recognised from what a pod runs, whoever installed it and whatever labels it carries.

The promise is one allocation owner per GPU *whoever installed the other one*: NVIDIA's static manifest, an EKS
add-on, another team's chart or the GPU Operator never carry this program's stamps. So identity comes from the
pod spec alone: container images, commands and the charts' own component labels. The pack applies it to the
objects of a stack; the live checks apply it to the pods bound to a node. Plain data in, no Pulumi imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from .labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner

Role = Literal["allocator", "companion", "operator"]
"""allocator: publishes GPUs to the kubelet; companion: part of an allocator's install (MPS control daemon,
config manager, feature discovery, DRA controller), never a second owner; operator: the GPU Operator itself."""

DEVICE_PLUGIN_BINARY: Final = "nvidia-device-plugin"
DEVICE_PLUGIN_IMAGES: Final = frozenset({"k8s-device-plugin"})
"""Last path element of the device plugin's image repository (NGC, GHCR, mirrors)."""
DEVICE_PLUGIN_COMPANION_COMMANDS: Final = frozenset({"config-manager", "mps-control-daemon", "gpu-feature-discovery"})
"""Commands of the same image that are part of the plugin's install and publish no GPU."""

DRA_IMAGES: Final = frozenset(
    {"dra-driver-nvidia-gpu", "k8s-dra-driver-gpu", "k8s-dra-driver", "nvidia-dra-driver-gpu"}
)
"""Last path element of the NVIDIA DRA driver's image repository, old names included."""
DRA_PLUGIN_CONTAINER: Final = "gpus"
"""The kubelet-plugin container that publishes GPUs (`compute-domains` publishes no GPU)."""
DRA_PLUGIN_BINARY: Final = "gpu-kubelet-plugin"
DRA_COMPONENT_LABELS: Final = ("dra-driver-nvidia-gpu-component", "nvidia-dra-driver-gpu-component")
"""Pod-template label of the DRA chart (current and old names); value `kubelet-plugin` on the allocator."""
DRA_KUBELET_PLUGIN: Final = "kubelet-plugin"

OPERATOR_IMAGES: Final = frozenset({"gpu-operator"})
OPERATOR_BINARY: Final = "gpu-operator"


def image_repository_name(image: object) -> str:
    """The last path element of an image reference without tag or digest: `k8s-device-plugin`."""
    if not isinstance(image, str):
        return ""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def _words(container: Mapping[str, Any]) -> list[str]:
    words: list[str] = []
    for field in ("command", "args"):
        value = container.get(field)
        if isinstance(value, Sequence) and not isinstance(value, str):
            words.extend(part for part in value if isinstance(part, str))
    return words


def _executable(container: Mapping[str, Any]) -> str:
    """Basename of the first command word, or '' when the image's entrypoint runs."""
    command = container.get("command")
    if isinstance(command, Sequence) and not isinstance(command, str) and command and isinstance(command[0], str):
        return command[0].rsplit("/", 1)[-1]
    return ""


def _runs(container: Mapping[str, Any], binary: str) -> bool:
    """The container runs `binary`: as its command, or named in a shell line of its command or args."""
    if _executable(container) == binary:
        return True
    return any(binary in word.split() or f"/{binary}" in word or f"exec {binary}" in word for word in _words(container))


def container_owner(container: Mapping[str, Any]) -> tuple[Owner, Role] | None:
    """The owner and role of one (regular) container, or None when it is no GPU allocation software."""
    repo = image_repository_name(container.get("image"))
    executable = _executable(container)
    name = container.get("name")
    if repo in DEVICE_PLUGIN_IMAGES or _runs(container, DEVICE_PLUGIN_BINARY):
        if executable in DEVICE_PLUGIN_COMPANION_COMMANDS:
            return DEVICE_PLUGIN, "companion"
        return DEVICE_PLUGIN, "allocator"
    if repo in DRA_IMAGES or _runs(container, DRA_PLUGIN_BINARY):
        if name == DRA_PLUGIN_CONTAINER or _runs(container, DRA_PLUGIN_BINARY):
            return DRA, "allocator"
        return DRA, "companion"
    if repo in OPERATOR_IMAGES or executable == OPERATOR_BINARY:
        return GPU_OPERATOR, "operator"
    return None


def pod_owner(pod_spec: Mapping[str, Any], pod_labels: Mapping[str, Any] | None = None) -> tuple[Owner, Role] | None:
    """The owner and role of a pod (or pod template): its allocator container wins over companions.

    Only regular containers count: the device plugin's config-manager init container runs the plugin's image but
    publishes nothing. A DRA pod template labelled as the chart's kubelet plugin is the DRA allocator.
    """
    found: list[tuple[Owner, Role]] = []
    containers = pod_spec.get("containers")
    if isinstance(containers, Sequence) and not isinstance(containers, str):
        found = [owner for c in containers if isinstance(c, Mapping) and (owner := container_owner(c)) is not None]
    labels = pod_labels or {}
    if any(labels.get(key) == DRA_KUBELET_PLUGIN for key in DRA_COMPONENT_LABELS):
        found.append((DRA, "allocator"))
    for role in ("allocator", "operator", "companion"):
        for owner in found:
            if owner[1] == role:
                return owner
    return None
