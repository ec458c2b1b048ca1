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
from ..vocab.operands import EXCLUDED, operator_reach
from ..vocab.selectors import Placement, placements_overlap
from .dra_requests import DRA_GROUP as DRA_API_GROUP
from .installations import Installation
from .operator_crs import cr_mode
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


RELEASE_GPU_CLASS: Final = "gpu.nvidia.com"
"""The GPU DeviceClass the DRA chart renders (dra-driver-nvidia-gpu ``templates/deviceclass-gpu.yaml``)."""
RELEASE_MAPPED_NAME: Final = "nvidia.com/gpu"
"""What that class maps on ``resource.k8s.io/v1`` (``extendedResourceName: nvidia.com/gpu``, chart 0.4.1 and 0.5.0)."""


@dataclass(frozen=True)
class MappingClass:
    """A DeviceClass that maps an extended resource name (an object of the stack, or one a Release renders)."""

    resource: Resource
    name: str
    subject: str | None = None
    """For a class a Release renders (its objects are not sent to the analyzer): the class and the Release."""

    @property
    def describe(self) -> str:
        """The class, for messages."""
        return self.subject or self.resource.describe


def release_mapping(install: Installation) -> MappingClass | None:
    """The ``gpu.nvidia.com`` mapping a DRA driver's Release renders, read from its values as the chart reads them.

    A ``helm.v3.Release`` hides what it renders from the analyzer, so the class is read from the values: the chart
    renders ``gpu.nvidia.com`` when ``resources.gpus.enabled`` (Helm truthiness, default true) and sets
    ``extendedResourceName: nvidia.com/gpu`` on it when the resource API it renders is ``resource.k8s.io/v1``
    (``resourceApiVersion``, empty by default: the highest version the cluster serves, v1 on every Kubernetes the
    chart supports, 1.34+). An install whose rendered objects the analyzer sees (a Chart v4) shows the class itself.
    """
    if install.owner != DRA or not install.inputs_visible or install.publishes_gpus is not True:
        return None
    if any(is_device_class(child) for child in install.children):
        return None
    api = install.value("resourceApiVersion")
    if api is UNKNOWN or api not in (None, "", f"{DRA_API_GROUP}/v1"):
        return None
    subject = f"DeviceClass '{RELEASE_GPU_CLASS}' (rendered by {install.describe} from its values)"
    return MappingClass(install.resource, RELEASE_MAPPED_NAME, subject)


def mapping_classes(view: StackView) -> list[MappingClass]:
    """Every DeviceClass of the stack with ``spec.extendedResourceName`` (a value of the wrong type is recorded).

    With the class each DRA driver's Release renders (:func:`release_mapping`).
    """
    found = [m for m in (release_mapping(i) for i in view.installations()) if m is not None]
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
    """Where it runs; None: on every GPU node (the GPU Operator's operands cannot be pinned to a cohort)."""
    subject: str
    operator: bool = False
    """The GPU Operator's operand (its DRA driver's GPU class maps no extended resource: the GPUCluster has no such
    field)."""
    urn: str | None = None
    """The object that installs it (where a violation about it is reported)."""

    def reaches(self, placement: Placement) -> bool:
        """Tell whether one node can satisfy both this allocator's placement and ``placement``.

        The Operator's operand reaches every GPU node but those the stack shows opted out
        (``nvidia.com/gpu.deploy.operands=false``, :func:`...vocab.operands.operator_reach`).
        """
        if self.placement is None:
            return operator_reach(placement) != EXCLUDED
        return placements_overlap(self.placement, placement)

    def meets(self, other: Publisher) -> bool:
        """Tell whether one node can run both allocators."""
        if other.placement is None:
            return self.placement is None or other.reaches(self.placement)
        return self.reaches(other.placement)

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
    or a Release's values. The GPU Operator's operands run wherever GPU discovery finds a GPU (its DaemonSets take
    no nodeSelector: gpu-operator #2626, #547), so they reach every node: its device plugin under a ClusterPolicy
    (``devicePlugin.enabled`` not false), its DRA driver under a GPUCluster (the Operator runs the driver's kubelet
    plugin on every node it manages, and no device plugin: gpu-operator ``manifests/state-dra-driver``), whether the
    GPUCluster comes from the Operator's values, its rendered objects or a CR of its own. A placement unknown during
    preview is skipped (judged at ``up``).
    """
    found = []
    for install in view.installations():
        if install.owner == GPU_OPERATOR:
            if install.mode in {"gpu-cluster", "both"}:
                subject = f"the DRA driver the GPUCluster of {install.describe} runs"
                found.append(Publisher(DRA, None, subject, True, install.resource.urn))
            if install.mode != "gpu-cluster" and install.operand_enabled("devicePlugin") is True:
                subject = f"the device plugin of {install.describe}"
                found.append(Publisher(DEVICE_PLUGIN, None, subject, True, install.resource.urn))
            continue
        if install.owner not in {DEVICE_PLUGIN, DRA} or install.publishes_gpus is not True:
            continue
        setting = install.placement_setting
        if isinstance(setting.value, Placement):
            found.append(Publisher(install.owner, setting.value, setting.subject, urn=install.resource.urn))
    for resource in view.resources:
        if cr_mode(resource) == "gpu-cluster" and view.installation_urn(resource) is None:
            found.append(Publisher(DRA, None, f"the DRA driver {resource.describe} runs", True, resource.urn))
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
