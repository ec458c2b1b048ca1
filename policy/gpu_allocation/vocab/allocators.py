"""Who allocates GPUs, recognised from what a pod runs, whoever installed it and whatever labels it carries.

The promise is one allocation owner per GPU *whoever installed the other one*: NVIDIA's static manifest, an EKS
add-on, another team's chart or the GPU Operator never carry this program's stamps. So identity comes from the
pod spec alone: container images, commands and the charts' own component labels. The pack applies it to the
objects of a stack; the live checks apply it to the pods bound to a node. Plain data in, no Pulumi imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .labels import Owner
from .owners import OWNER_KINDS, owner_of_image

Role = Literal["allocator", "companion", "operator"]
"""allocator: publishes GPUs to the kubelet; companion: part of an allocator's install (MPS control daemon,
config manager, feature discovery, DRA controller), never a second owner; operator: the GPU Operator itself."""


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
    """The owner and role of one (regular) container, or None when it is no GPU allocation software.

    An allocator's image or its allocator binary names the owner (vocab.owners); within it, a companion command
    or a container other than the owner's allocator container is part of the install, never a second owner.
    """
    repo = image_repository_name(container.get("image"))
    executable = _executable(container)
    for kind in OWNER_KINDS.values():
        if kind.manager:
            if owner_of_image(repo) == kind.owner or executable == kind.allocator_binary:
                return kind.owner, "operator"
            continue
        runs_allocator = _runs(container, kind.allocator_binary)
        if owner_of_image(repo) != kind.owner and not runs_allocator:
            continue
        if executable in kind.companion_commands:
            return kind.owner, "companion"
        if kind.allocator_container is None or runs_allocator or container.get("name") == kind.allocator_container:
            return kind.owner, "allocator"
        return kind.owner, "companion"
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
    for kind in OWNER_KINDS.values():
        marker = kind.allocator_component
        if marker and any(labels.get(key) == marker for key in kind.component_labels):
            # The DRA chart keeps the kubelet-plugin label when resources.gpus.enabled=false and renders only its
            # compute-domains container (templates/kubeletplugin.yaml): that pod publishes ComputeDomain channels,
            # no GPU. Only the owner's own containers being all companions says so; anything else stays an allocator.
            if (kind.owner, "companion") in found and (kind.owner, "allocator") not in found:
                continue
            found.append((kind.owner, "allocator"))
    for role in ("allocator", "operator", "companion"):
        for owner in found:
            if owner[1] == role:
                return owner
    return None
