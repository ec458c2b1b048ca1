"""Node and ResourceSlice objects of a simulated node, shaped as a kubelet and the NVIDIA DRA driver write them."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from eks_hybrid_gpu.simulate.model import (
    DEFAULT_ADDRESSING_MODE,
    HOST_ANNOTATION,
    KUBELET_MESSAGE,
    KWOK_ANNOTATION,
    SIMULATED_LABEL,
    UUID_NAMESPACE,
    GpuGroup,
    GpuModel,
    SimNode,
)
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN, STANDARD_DOMAIN, nvml_semver, slice_key
from policy.gpu_allocation.vocab.labels import (
    COMPUTE_TYPE_LABEL,
    MPS_CAPABLE_LABEL,
)


def device_uuid(node: str, index: int, mig: str | None = None) -> str:
    """A stable GPU-/MIG- UUID per node, GPU index and MIG instance."""
    value = uuid.uuid5(UUID_NAMESPACE, f"{node}/{index}/{mig or ''}")
    return f"{'MIG' if mig else 'GPU'}-{value}"


def _gpu_indices(node: SimNode) -> list[tuple[int, GpuGroup]]:
    indices, index = [], 0
    for group in node.gpus:
        for _ in range(group.count):
            indices.append((index, group))
            index += 1
    return indices


@dataclass(frozen=True)
class PluginSharing:
    """What a device plugin's config makes it advertise: time-slicing replicas, renaming and the MIG strategy."""

    replicas: int | None = None
    rename_by_default: bool = False
    mig_strategy: Literal["none", "single", "mixed"] = "none"


def plugin_resources(node: SimNode, sharing: PluginSharing) -> dict[str, str]:
    """What NVIDIA's device plugin with this config advertises for the node's GPUs, as the plugin counts them.

    migStrategy none shows a MIG-mode GPU as one nvidia.com/gpu, single shows each instance as nvidia.com/gpu,
    mixed as nvidia.com/mig-<profile>; time-slicing multiplies nvidia.com/gpu by the replicas and renames it
    nvidia.com/gpu.shared only with renameByDefault.
    """
    counts: dict[str, int] = {}

    def add(name: str, n: int) -> None:
        counts[name] = counts.get(name, 0) + n

    full = "nvidia.com/gpu.shared" if sharing.replicas and sharing.rename_by_default else "nvidia.com/gpu"
    for _, group in _gpu_indices(node):
        if group.mig and sharing.mig_strategy == "mixed":
            for profile in group.mig:
                add(f"nvidia.com/mig-{profile}", 1)
        elif group.mig and sharing.mig_strategy == "single":
            add("nvidia.com/gpu", len(group.mig))
        else:
            add(full, sharing.replicas or 1)
    return {name: str(count) for name, count in sorted(counts.items())}


def extended_resources(node: SimNode) -> dict[str, str]:
    """What a host-level device plugin advertises (none without one): its MIG resources mixed, sharing renamed."""
    if node.host_publisher != "device-plugin":
        return {}
    return plugin_resources(node, PluginSharing(node.time_slicing_replicas, True, "mixed"))


def node_labels(node: SimNode, cohort_label_key: str) -> dict[str, str]:
    """Compute type, cohort label, GFD discovery labels and the simulation marker."""
    labels = {
        SIMULATED_LABEL: "true",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        COMPUTE_TYPE_LABEL: node.compute_type,
    }
    if node.cohort is not None:
        labels[cohort_label_key] = node.cohort
    if node.gpus:
        first = node.gpus[0].gpu
        product = first.gfd_product
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.memory": str(first.memory_mib),
                "nvidia.com/gpu.count": str(sum(g.count for g in node.gpus)),
            }
        )
        if node.time_slicing_replicas:
            # GFD's time-slicing labels; renameByDefault also suffixes the product.
            product = f"{product}-SHARED"
            labels["nvidia.com/gpu.replicas"] = str(node.time_slicing_replicas)
            labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
        labels["nvidia.com/gpu.product"] = product
    if node.mps_capable is not None:
        labels[MPS_CAPABLE_LABEL] = "true" if node.mps_capable else "false"
    labels.update(node.labels)
    return labels


def node_object(node: SimNode, cohort_label_key: str) -> dict[str, Any]:
    """The Node as created: labels and taints; status is written separately through /status."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": node_labels(node, cohort_label_key),
            "annotations": {**KWOK_ANNOTATION, HOST_ANNOTATION: host_annotation(node)},
        },
        "spec": {
            "taints": [
                {k: v for k, v in {"key": t.key, "value": t.value, "effect": t.effect}.items() if v is not None}
                for t in node.taints
            ]
        },
    }


def host_annotation(node: SimNode) -> str:
    """The fleet entry as compact JSON: the hardware the simulated kubelet lets an allocator pod publish."""
    return json.dumps(node.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)


def node_status(node: SimNode, now: datetime) -> dict[str, Any]:
    """Ready, no pressure, and capacity = allocatable, with a host-level device plugin's extended resources."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": node.cpu, "memory": node.memory, "pods": str(node.pods), **extended_resources(node)}

    def condition(kind: str, status: str, reason: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": KUBELET_MESSAGE,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }

    return {
        "phase": "Running",  # what kwok's heartbeat stage selects (with Ready=True)
        "capacity": resources,
        "allocatable": dict(resources),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            condition("Ready", "True", "KubeletReady"),
        ],
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "",
            "osImage": "simulated",
            "containerRuntimeVersion": node.container_runtime_version,
            "kubeletVersion": node.kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def _mig_memory(profile: str) -> str:
    """A profile's nominal memory as a quantity (3g.71gb -> 71Gi).

    Nominal: the GB in the profile's name (NVIDIA's MIG User Guide, "Supported MIG Profiles"). The real driver
    publishes NVML's memorySizeMB in bytes, which is below the nominal figure (nvidia-smi lists 1g.10gb on an
    H100 as 9.75 GiB); no per-profile NVML figure has been recorded here, so no selector should lean on it.
    """
    return f"{profile.split('.')[1].removesuffix('+me').removesuffix('gb')}Gi"


def pci_attributes(index: int) -> dict[str, dict[str, str]]:
    """`resource.kubernetes.io` pciBusID and pcieRoot, in the driver's format, one PCIe root per GPU.

    Synthetic: the real driver reads them from NVML and sysfs (`0000:00:06.0` under `pci0000:00` on the lent
    H200, a VM); the simulation only keeps the format and gives each GPU its own root and bus.
    """
    bus = (index % 63) * 4 + 0x10
    return {
        slice_key(STANDARD_DOMAIN, "pciBusID"): {"string": f"0000:{bus + 1:02x}:00.0"},
        slice_key(STANDARD_DOMAIN, "pcieRoot"): {"string": f"pci0000:{bus:02x}"},
    }


def _common_attributes(node: SimNode, gpu: GpuModel, index: int) -> dict[str, dict[str, str]]:
    """What the driver publishes on every device of one physical GPU (v0.4.1 deviceinfo.go and mig.go)."""
    return {
        "addressingMode": {"string": DEFAULT_ADDRESSING_MODE},
        "architecture": {"string": gpu.architecture},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": nvml_semver(gpu.compute_capability)},
        "cudaDriverVersion": {"version": nvml_semver(node.cuda_driver_version)},
        "driverVersion": {"version": nvml_semver(node.driver_version)},
        "productName": {"string": gpu.product_name},
        **pci_attributes(index),
    }


def slice_devices(node: SimNode) -> list[dict[str, Any]]:
    """Devices as the NVIDIA DRA driver v0.4.1 publishes them: its attribute names and types, NVML's memory in Mi.

    A full GPU carries exactly the recorded H200 device's attributes
    (policy.gpu_allocation.vocab.dra_attributes.FULL_GPU_ATTRIBUTES); a MIG instance its parent's plus
    parentUUID and profile. The driver also publishes a MIG instance's engines and memory slices as capacities;
    the simulation publishes its memory only.
    """
    devices: list[dict[str, Any]] = []
    for index, group in _gpu_indices(node):
        gpu = group.gpu
        parent_uuid = device_uuid(node.name, index)
        common = _common_attributes(node, gpu, index)
        if not group.mig:
            attributes = {**common, "type": {"string": "gpu"}, "uuid": {"string": parent_uuid}}
            devices.append(
                {
                    "name": f"gpu-{index}",
                    "attributes": dict(sorted(attributes.items())),
                    "capacity": {"memory": {"value": gpu.memory}},
                }
            )
            continue
        for instance, profile in enumerate(group.mig):
            slug = profile.replace(".", "").replace("+", "")
            attributes = {
                **common,
                "type": {"string": "mig"},
                "uuid": {"string": device_uuid(node.name, index, f"{profile}/{instance}")},
                "parentUUID": {"string": parent_uuid},
                "profile": {"string": profile},
            }
            devices.append(
                {
                    "name": f"gpu-{index}-mig-{slug}-{instance}",
                    "attributes": dict(sorted(attributes.items())),
                    "capacity": {"memory": {"value": _mig_memory(profile)}},
                }
            )
    return devices


def slice_name(node_name: str) -> str:
    """One slice per node and driver."""
    return f"{node_name}-{DRIVER_DOMAIN}"


def resource_slice(
    node: SimNode, node_uid: str | None, generation: int = 1, labels: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The ResourceSlice a DRA driver publishes for the node (pool = node name, nodeName set); None with no GPU."""
    if not node.gpus:
        return None
    metadata: dict[str, Any] = {"name": slice_name(node.name), "labels": {SIMULATED_LABEL: "true", **(labels or {})}}
    if node_uid:
        # The driver's kubelet plugin owns its slices through the Node, so deleting the node removes them.
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": DRIVER_DOMAIN,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": generation, "resourceSliceCount": 1},
            "devices": slice_devices(node),
        },
    }
