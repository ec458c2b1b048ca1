"""The KEP-5004 name mapping as the scheduler reads it: mapping classes, who publishes a name where, plain requests.

A DeviceClass with ``spec.extendedResourceName`` (resource.k8s.io/v1, gate ``DRAExtendedResource``) lets a plain
extended-resource request be served by DRA. kube-scheduler v1.37.2 decides per node
(``pkg/scheduler/framework/plugins/noderesources/fit.go``, ``shouldDelegateResourceToDRA``): a node whose allocatable
of that name is above 0 serves the request through its device plugin; otherwise, when a DeviceClass maps the name,
DRA serves it (a per-pod ResourceClaim ``<pod>-extended-resources-…``, recorded in
``pod.status.extendedResourceClaimStatus``; observed on a real 1.37.2 API server and scheduler). With the gate off
(1.34.4 observed) the API server drops the field from the stored class and the pod stays Pending "Insufficient
nvidia.com/gpu". The DRA policies judge the stack from the three readings here; what each version does is
:mod:`.cluster_version`'s and :mod:`..vocab.kube_releases`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR
from ..vocab.selectors import Placement, placements_overlap
from .props import UNKNOWN, compact_json, dig
from .resource import Resource
from .shapes import POD_SPEC_PATHS, containers, is_device_plugin_gpu, pod_placement
from .stack_view import INSTALL_KINDS, StackView, reads_gpu_objects

MAPPING_KINDS: Final = frozenset({*INSTALL_KINDS, "DeviceClass"})
"""What the mapping policies read besides Helm resources: workloads, the install model's kinds, DeviceClasses."""


def is_device_class(resource: Resource) -> bool:
    """A DRA DeviceClass (``resource.k8s.io/*``)."""
    return resource.kind == "DeviceClass" and resource.api_group_version.startswith("resource.k8s.io/")


def reads_mapping(resource: Resource) -> bool:
    """The objects the mapping policies read: the install model's (:func:`reads_gpu_objects`) and DeviceClasses."""
    return reads_gpu_objects(resource) or is_device_class(resource)


@dataclass(frozen=True)
class MappingClass:
    """A DeviceClass that maps an extended resource name."""

    resource: Resource
    name: str

    @property
    def describe(self) -> str:
        """The class, for messages."""
        return self.resource.describe


def mapping_classes(view: StackView) -> list[MappingClass]:
    """Every DeviceClass of the stack with ``spec.extendedResourceName`` (a value of the wrong type is recorded)."""
    found = []
    for resource in view.resources:
        if not is_device_class(resource):
            continue
        name = dig(resource.props, "spec", "extendedResourceName")
        if name is UNKNOWN or name is None:
            continue
        if not isinstance(name, str) or not name:
            resource.cannot_read("spec.extendedResourceName", "is not an extended resource name (a string)")
            continue
        found.append(MappingClass(resource, name))
    return found


@dataclass(frozen=True)
class Publisher:
    """An allocator that publishes GPUs on the nodes of its placement."""

    owner: str
    """``device-plugin`` or ``dra``."""
    placement: Placement | None
    """Where it runs; None: on every GPU node (the GPU Operator's device plugin cannot be pinned to a cohort)."""
    subject: str

    def reaches(self, placement: Placement) -> bool:
        """Tell whether one node can satisfy both this allocator's placement and ``placement``."""
        return self.placement is None or placements_overlap(self.placement, placement)

    def meets(self, other: Publisher) -> bool:
        """Tell whether one node can run both allocators."""
        if self.placement is None or other.placement is None:
            return True
        return placements_overlap(self.placement, other.placement)

    @property
    def where(self) -> str:
        """Its placement, for messages."""
        if self.placement is None:
            return f"{self.subject}, on every GPU node"
        shown = f"nodeSelector {compact_json(self.placement.node_selector)}"
        if self.placement.terms:
            shown += " + required nodeAffinity"
        return f"{self.subject}: {shown}"


def publishers(view: StackView) -> list[Publisher]:
    """The device plugins and DRA drivers of the stack that publish GPUs, with where they run.

    From the install model (:meth:`StackView.installations`): a standalone allocator, a Chart's rendered allocator
    or a Release's values. The GPU Operator's device plugin (``devicePlugin.enabled`` not false) runs wherever GPU
    discovery finds a GPU, so it reaches every node; its own DRA driver (GPUCluster) is not placed by the pack. A
    placement unknown during preview is skipped (judged at ``up``).
    """
    found = []
    for install in view.installations():
        if install.owner == GPU_OPERATOR:
            if install.operand_enabled("devicePlugin") is True:
                found.append(Publisher(DEVICE_PLUGIN, None, f"the device plugin of {install.describe}"))
            continue
        if install.owner not in {DEVICE_PLUGIN, DRA} or install.publishes_gpus is not True:
            continue
        setting = install.placement_setting
        if isinstance(setting.value, Placement):
            found.append(Publisher(install.owner, setting.value, setting.subject))
    return found


@dataclass(frozen=True)
class PlainRequest:
    """A workload whose containers ask an extended resource by name (no claim), and where it may land."""

    resource: Resource
    name: str
    containers: tuple[str, ...]
    placement: Placement

    @property
    def describe(self) -> str:
        """The workload and its containers, for messages."""
        listed = ", ".join(f"'{c}'" for c in self.containers)
        return f"{self.resource.describe} (container {listed})"


def plain_requests(view: StackView, mapped: frozenset[str]) -> list[PlainRequest]:
    """Every plain request of a GPU name (``nvidia.com/gpu*``, ``nvidia.com/mig-*``) or of a mapped name.

    Read in each container's ``resources.requests`` and ``limits`` (the scheduler takes the request, which
    defaults to the limit) of every pod template the stack holds; allocators (they ask no GPU) are not requests. A
    pod whose placement is unknown during preview is skipped (judged at ``up``).
    """
    found = []
    for resource, pod in view.workloads():
        if resource.is_allocator or resource.kind not in POD_SPEC_PATHS:
            continue
        placement = pod_placement(pod)
        if placement is None:
            continue
        by_name: dict[str, list[str]] = {}
        for container in containers(pod):
            for name in sorted(container.resource_names()):
                if is_device_plugin_gpu(name) or name in mapped:
                    by_name.setdefault(name, []).append(container.name)
        for name, names in sorted(by_name.items()):
            found.append(PlainRequest(resource, name, tuple(dict.fromkeys(names)), placement))
    return found


def publishes_name(publisher: Publisher, name: str) -> bool:
    """Tell whether a device plugin may publish ``name``: a GPU name of its family, under some sharing or MIG config.

    The plugin publishes ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` when a time-slicing/MPS config renames, and
    ``nvidia.com/mig-<profile>`` under the mixed strategy; which one a node gets follows its config label, so any
    name of the family may be published on any of its nodes.
    """
    return publisher.owner == DEVICE_PLUGIN and is_device_plugin_gpu(name)


def describe_all(items: list[Any]) -> str:
    """``a, b and c`` of the items' ``describe``, sorted."""
    names: list[str] = sorted({str(item.describe) for item in items})
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
