"""Simulated GPU cohorts on the local control plane, for rehearsing a cohort change and for tests.

A real cohort is a set of Hybrid GPU nodes that carry the cohort label, GFD discovery labels, device-plugin
capacity or DRA ResourceSlices. This module writes exactly those objects — Node objects (status through
the status subresource), and ResourceSlices shaped like the ones the NVIDIA DRA driver publishes — onto
the loopback API server, so the real kube-scheduler, job controller and resourceclaim controller place
the program's workloads as they would on the hardware. No kubelet exists: pods are bound and claims
allocated, but no container ever starts; `finish` and `reap` play the kubelet's part when asked.

Everything written is labelled `eks-hybrid-gpu.io/simulated=true`; nothing else is ever touched, and the
command refuses any API server that is not on loopback.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from components.config import Mig, StackConfig, TimeSlicing
from components.dra_objects import DRIVER
from eks_hybrid_gpu.hostcheck.labels import label_value
from eks_hybrid_gpu.kubeclient import ACCESS_EXIT_CODE, Kube, KubeAccessError, KubeApiError, connect, segment
from policy.gpu_allocation.vocab.gpu_models import known_profiles
from policy.gpu_allocation.vocab.labels import (
    AUTO_MODE,
    COMPUTE_TYPE_LABEL,
    DEFAULT_COHORT_LABEL_KEY,
    LABEL_PREFIX,
    MPS_CAPABLE_LABEL,
    OPERANDS_OPT_OUT_LABEL,
)

SIMULATED_LABEL = f"{LABEL_PREFIX}/simulated"
"""Label "true" on every object the simulation writes; `clear` and pruning touch nothing else."""
SIMULATION_CONTROLLERS: tuple[str, ...] = (
    "garbage-collector-controller",
    "namespace-controller",
    "job-controller",
    "resourceclaim-controller",
    "ttl-after-finished-controller",
)
"""kube-controller-manager 1.34 controllers a simulated cluster runs: Jobs create pods, claim templates
create claims (and release them when pods finish), TTLs remove finished Jobs, deletes cascade. No node
lifecycle, daemonset or pod-GC controller runs: they would evict or place pods on nodes with no kubelet."""
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
"""Added to every new Node by the TaintNodesByCondition admission plugin; the node lifecycle controller
removes it once the kubelet reports Ready. The simulation is that kubelet, so it removes the taint."""
KUBELET_MESSAGE = "simulated by eks-hybrid-gpu: no kubelet runs on this node"
UUID_NAMESPACE = uuid.UUID("5b0c3c52-61c9-4f0e-9d8c-2f0a6a3e5d11")
"""Seed for deterministic device UUIDs: the same file always yields the same UUIDs."""
SLICE_API = "/apis/resource.k8s.io/v1/resourceslices"
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
"""On every simulated Node: kwok (started by `local up`) manages exactly these nodes. Without kwok running it
changes nothing."""
NFD_NVIDIA_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"
NODES_PER_COHORT = 2
AUTO_NODE_NAME = "sim-auto-l4-0"


@dataclass(frozen=True)
class GpuModel:
    """What a host of one GPU model shows: GFD labels, the DRA attributes NVML reports, MIG profiles."""

    product_name: str
    """NVML name; the DRA `productName` attribute. GFD's label is derived from it."""
    memory: str
    """Advertised memory, the DRA `memory` capacity."""
    memory_mib: int
    """nvidia.com/gpu.memory as GFD writes it (MiB, from NVML)."""
    architecture: str
    mig_table: str | None
    """Key of policy.gpu_allocation.vocab.gpu_models.MIG_PROFILES, None where the model has no MIG."""

    @property
    def gfd_product(self) -> str:
        """nvidia.com/gpu.product: the NVML name as a label value, like GFD and `hostcheck` make it."""
        return label_value(self.product_name)


GPU_MODELS: dict[str, GpuModel] = {
    "H200": GpuModel("NVIDIA H200", "141Gi", 143771, "Hopper", "H200-141GB"),
    "H100": GpuModel("NVIDIA H100 80GB HBM3", "80Gi", 81559, "Hopper", "H100-80GB"),
    "A100-40GB": GpuModel("NVIDIA A100-SXM4-40GB", "40Gi", 40960, "Ampere", "A100-40GB"),
    "A10G": GpuModel("NVIDIA A10G", "24Gi", 23028, "Ampere", None),
    "L4": GpuModel("NVIDIA L4", "24Gi", 23034, "Ada Lovelace", None),
}
"""Illustrative values for the simulation, not measurements; the H200 row matches tests/fixtures/h200."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class GpuGroup(_Strict):
    """`count` GPUs of one model; with `mig`, each is in MIG mode and publishes only those instances."""

    model: str
    count: int = Field(default=1, ge=1, le=16)
    mig: tuple[str, ...] | None = Field(
        default=None, description="MIG instances per GPU by profile name, e.g. [3g.71gb, 1g.18gb]."
    )

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in GPU_MODELS:
            msg = f"'{value}' is not a simulated GPU model; use one of {', '.join(GPU_MODELS)}"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _mig_profiles_exist(self) -> GpuGroup:
        if self.mig is None:
            return self
        table = GPU_MODELS[self.model].mig_table
        profiles = known_profiles(table) if table else None
        if profiles is None:
            msg = f"{self.model} has no MIG support in the simulation; drop `mig` or pick H200, H100 or A100-40GB"
            raise ValueError(msg)
        for profile in sorted(set(self.mig)):
            if profile not in profiles:
                msg = f"MIG profile '{profile}' does not exist on {self.model}; known: {', '.join(profiles)}"
                raise ValueError(msg)
            if self.mig.count(profile) > profiles[profile]:
                msg = f"{self.model} allows at most {profiles[profile]} instance(s) of {profile}"
                raise ValueError(msg)
        return self

    @property
    def gpu(self) -> GpuModel:
        """The model's facts."""
        return GPU_MODELS[self.model]


class TaintSpec(_Strict):
    """A node taint, e.g. nvidia.com/gpu:NoSchedule."""

    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


Allocation = Literal["device-plugin", "dra", "none"]


class SimNode(_Strict):
    """One simulated host: its cohort, its GPUs and who advertises them."""

    name: str
    compute_type: Literal["hybrid", "auto"] = Field(default="hybrid", alias="computeType")
    cohort: str | None = Field(default=None, description="Value of the cohort label; absent: no cohort label.")
    allocation: Allocation | None = Field(
        default=None,
        description="Who advertises the GPUs: device-plugin (node capacity), dra (ResourceSlices) or none. "
        "Default: the cohort value when it is device-plugin or dra; device-plugin on an Auto Mode node "
        "(its AWS-managed plugin); none otherwise.",
    )
    gpus: tuple[GpuGroup, ...] = ()
    time_slicing_replicas: int | None = Field(default=None, alias="timeSlicingReplicas", ge=2, le=64)
    mps_capable: bool | None = Field(default=None, alias="mpsCapable")
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[TaintSpec, ...] = ()
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = Field(default=110, ge=1)

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not value or len(value) > 40 or not all(c.isdigit() or c == "-" or ("a" <= c <= "z") for c in value):
            msg = f"'{value}' is not a DNS label of at most 40 characters"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _sharing_fits_allocation(self) -> SimNode:
        if self.time_slicing_replicas is not None and self.advertiser != "device-plugin":
            msg = "timeSlicingReplicas needs allocation device-plugin (time-slicing is a device-plugin setting)"
            raise ValueError(msg)
        if self.time_slicing_replicas is not None and any(g.mig for g in self.gpus):
            msg = "timeSlicingReplicas and MIG GPUs on one node are not simulated; use separate nodes"
            raise ValueError(msg)
        return self

    @property
    def advertiser(self) -> Allocation:
        """The effective allocation owner of this node's GPUs."""
        if self.allocation is not None:
            return self.allocation
        if self.compute_type == AUTO_MODE:
            return "device-plugin"
        if self.cohort in ("device-plugin", "dra"):
            return self.cohort  # type: ignore[return-value]
        return "none"


class Simulation(_Strict):
    """A whole simulated fleet: the cohorts file."""

    cohort_label_key: str = Field(default=DEFAULT_COHORT_LABEL_KEY, alias="cohortLabelKey")
    nodes: tuple[SimNode, ...]

    @model_validator(mode="after")
    def _unique_names(self) -> Simulation:
        names = [n.name for n in self.nodes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            msg = f"node names must be unique; repeated: {', '.join(duplicates)}"
            raise ValueError(msg)
        return self


DEFAULT_COHORTS = """\
# The default simulated fleet: two device-plugin hosts, three DRA hosts, one EKS Auto Mode node.
cohortLabelKey: workload.example.com/gpu-allocation
nodes:
  - name: sim-plugin-h100-0          # exclusive GPUs: nvidia.com/gpu 4
    cohort: device-plugin
    gpus: [{model: H100, count: 4}]
  - name: sim-plugin-a10g-ts-0       # time-slicing x4: nvidia.com/gpu.shared 4
    cohort: device-plugin
    gpus: [{model: A10G}]
    timeSlicingReplicas: 4
  - name: sim-dra-h200-0             # DRA: one full H200 (141Gi), one H200 in MIG mode
    cohort: dra
    gpus:
      - {model: H200}
      - {model: H200, mig: [3g.71gb, 1g.18gb, 1g.18gb]}
  - name: sim-dra-h100-0             # DRA: one H100 (80Gi)
    cohort: dra
    gpus: [{model: H100}]
  - name: sim-dra-a10g-0             # DRA: two A10G (24Gi): below hybrid-large-gpu's 40Gi floor
    cohort: dra
    gpus: [{model: A10G, count: 2}]
  - name: sim-auto-l4-0              # EKS Auto Mode: AWS manages its device plugin
    computeType: auto
    gpus: [{model: L4}]
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    cpu: "8"
    memory: 32Gi
"""


def _cohort_nodes(config: StackConfig, index: int) -> list[SimNode]:
    cohort = config.cohorts[index]
    selector = cohort.selector(config.cohort_label_key)
    labels = {k: v for k, v in selector.items() if k != COMPUTE_TYPE_LABEL}
    labels[NFD_NVIDIA_PCI_LABEL] = "true"  # NFD's PCI vendor label, the first term of the charts' GPU affinity
    compute_type = selector.get(COMPUTE_TYPE_LABEL, "hybrid")
    if config.cohorts_of("gpu-operator") and cohort.owner != "gpu-operator":
        labels[OPERANDS_OPT_OUT_LABEL] = "false"  # the preflight's rule: opt standalone nodes out of operands
    allocation: Allocation = "dra" if cohort.owner == "dra" else "device-plugin"
    replicas = cohort.sharing.replicas if isinstance(cohort.sharing, TimeSlicing) else None
    if allocation == "dra":
        gpus = (GpuGroup(model="H200", count=2),)
    elif isinstance(cohort.sharing, Mig):
        gpus = (GpuGroup(model="A100-40GB", mig=("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb")),)
    elif replicas is not None:
        gpus = (GpuGroup(model="A10G"),)
    else:
        gpus = (GpuGroup(model="H100", count=4),)
    return [
        SimNode.model_validate(
            {
                "name": f"sim-{cohort.name}-{i}",
                "computeType": compute_type,
                "allocation": allocation,
                "gpus": gpus,
                "timeSlicingReplicas": replicas,
                "mpsCapable": False,
                "labels": labels,
            }
        )
        for i in range(NODES_PER_COHORT)
    ]


def fleet_for(config: StackConfig) -> Simulation:
    """The simulated fleet a stack wants: two nodes per cohort, carrying exactly its selector, plus one Auto Mode node.

    Each cohort's nodes carry its node selector's labels (the cohort label included), GFD's discovery labels,
    `nvidia.com/mps.capable=false`, and what the owner advertises: `nvidia.com/gpu` capacity (device plugin and
    GPU Operator; `nvidia.com/gpu.shared` under time-slicing, MIG resources under MIG) or a ResourceSlice (DRA).
    With a GPU Operator in the stack, the other cohorts' nodes opt out of its operands. The Auto Mode node has
    a GPU and AWS's `nvidia.com/gpu` taint; no cohort may ever select it.
    """
    nodes: list[SimNode] = []
    for index in range(len(config.cohorts)):
        nodes.extend(_cohort_nodes(config, index))
    nodes.append(
        SimNode.model_validate(
            {
                "name": AUTO_NODE_NAME,
                "computeType": AUTO_MODE,
                "gpus": [{"model": "L4"}],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                "cpu": "8",
                "memory": "32Gi",
            }
        )
    )
    return Simulation.model_validate({"cohortLabelKey": config.cohort_label_key, "nodes": nodes})


class SimulationError(Exception):
    """The cohorts file is invalid or the cluster holds something the simulation must not overwrite."""


def load(text: str, source: str = "cohorts file") -> Simulation:
    """Parse and validate a cohorts file; every problem is listed with its path."""
    try:
        document = yaml.safe_load(text)
        return Simulation.model_validate(document)
    except yaml.YAMLError as error:
        msg = f"{source} is not YAML: {error}"
        raise SimulationError(msg) from None
    except ValidationError as error:
        problems = [
            f"  - {'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg'].removeprefix('Value error, ')}"
            for e in error.errors()
        ]
        msg = f"{source} has {len(problems)} problem(s); nothing was changed:\n" + "\n".join(problems)
        raise SimulationError(msg) from None


def default_simulation() -> Simulation:
    """The fleet the tests and `simulate apply` without --file use."""
    return load(DEFAULT_COHORTS, "the default cohorts")


# ---------------------------------------------------------------- rendering (pure)


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


def extended_resources(node: SimNode) -> dict[str, str]:
    """What a device plugin would advertise: nvidia.com/gpu, nvidia.com/gpu.shared × replicas, MIG resources."""
    if node.advertiser != "device-plugin":
        return {}
    counts: dict[str, int] = {}
    for _, group in _gpu_indices(node):
        if group.mig:
            for profile in group.mig:
                counts[f"nvidia.com/mig-{profile}"] = counts.get(f"nvidia.com/mig-{profile}", 0) + 1
        elif node.time_slicing_replicas:
            counts["nvidia.com/gpu.shared"] = counts.get("nvidia.com/gpu.shared", 0) + node.time_slicing_replicas
        else:
            counts["nvidia.com/gpu"] = counts.get("nvidia.com/gpu", 0) + 1
    return {name: str(count) for name, count in sorted(counts.items())}


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
            "annotations": dict(KWOK_ANNOTATION),
        },
        "spec": {
            "taints": [
                {k: v for k, v in {"key": t.key, "value": t.value, "effect": t.effect}.items() if v is not None}
                for t in node.taints
            ]
        },
    }


def node_status(node: SimNode, now: datetime) -> dict[str, Any]:
    """Ready, no pressure, and capacity = allocatable including the device plugin's extended resources."""
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
            "containerRuntimeVersion": "containerd://simulated",
            "kubeletVersion": "v1.34.4",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def _mig_memory(profile: str) -> str:
    """A profile's nominal memory as a quantity (3g.71gb -> 71Gi); nominal, not a usable-memory guarantee."""
    return f"{profile.split('.')[1].removesuffix('+me').removesuffix('gb')}Gi"


def slice_devices(node: SimNode) -> list[dict[str, Any]]:
    """Devices as the NVIDIA DRA driver publishes them: type gpu or mig, productName, uuid, memory capacity."""
    devices: list[dict[str, Any]] = []
    for index, group in _gpu_indices(node):
        gpu = group.gpu
        parent_uuid = device_uuid(node.name, index)
        if not group.mig:
            devices.append(
                {
                    "name": f"gpu-{index}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "productName": {"string": gpu.product_name},
                        "uuid": {"string": parent_uuid},
                        "index": {"int": index},
                        "architecture": {"string": gpu.architecture},
                        "brand": {"string": "Nvidia"},
                    },
                    "capacity": {"memory": {"value": gpu.memory}},
                }
            )
            continue
        for instance, profile in enumerate(group.mig):
            slug = profile.replace(".", "").replace("+", "")
            devices.append(
                {
                    "name": f"gpu-{index}-mig-{slug}-{instance}",
                    "attributes": {
                        "type": {"string": "mig"},
                        "productName": {"string": gpu.product_name},
                        "uuid": {"string": device_uuid(node.name, index, f"{profile}/{instance}")},
                        "parentUUID": {"string": parent_uuid},
                        "parentIndex": {"int": index},
                        "profile": {"string": profile},
                        "architecture": {"string": gpu.architecture},
                        "brand": {"string": "Nvidia"},
                    },
                    "capacity": {"memory": {"value": _mig_memory(profile)}},
                }
            )
    return devices


def slice_name(node_name: str) -> str:
    """One slice per node and driver."""
    return f"{node_name}-{DRIVER}"


def resource_slice(node: SimNode, node_uid: str | None, generation: int = 1) -> dict[str, Any] | None:
    """The node's ResourceSlice (pool = node name, nodeName set), or None when DRA does not own the node."""
    if node.advertiser != "dra" or not node.gpus:
        return None
    metadata: dict[str, Any] = {"name": slice_name(node.name), "labels": {SIMULATED_LABEL: "true"}}
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
            "driver": DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": generation, "resourceSliceCount": 1},
            "devices": slice_devices(node),
        },
    }


# ---------------------------------------------------------------- cluster writes


@dataclass
class ApplyResult:
    """What `apply` changed."""

    nodes: list[str] = field(default_factory=list)
    slices: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)


def _is_simulated(obj: dict[str, Any]) -> bool:
    return (obj.get("metadata", {}).get("labels") or {}).get(SIMULATED_LABEL) == "true"


def _put_node(kube: Kube, node: SimNode, cohort_label_key: str) -> dict[str, Any]:
    desired = node_object(node, cohort_label_key)
    path = f"/api/v1/nodes/{segment(node.name)}"
    existing = kube.get_or_none(path)
    if existing is None:
        # Created with its status, as a kubelet registers a node: kwok then sees a Ready node and only
        # heartbeats it, instead of racing this write with its own default capacity (cpu 1k, memory 1Ti).
        created = kube.create("/api/v1/nodes", {**desired, "status": node_status(node, datetime.now(UTC))})
    else:
        if not _is_simulated(existing):
            msg = f"node {node.name} exists and is not simulated; refusing to overwrite a real node"
            raise SimulationError(msg)
        desired["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        desired["spec"] = {**existing.get("spec", {}), **desired["spec"]}
        created = kube.request("PUT", path, body=desired)
    # The admission plugin taints new nodes not-ready; a kubelet reporting Ready lifts it through the
    # node lifecycle controller. There is no such controller here, so drop it with the file's taints.
    taints = [t for t in created.get("spec", {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT]
    if taints != (created.get("spec", {}).get("taints") or []):
        created = kube.merge_patch(path, {"spec": {"taints": taints}})
    status = node_status(node, datetime.now(UTC))
    # A merge patch merges maps: resources the node no longer advertises (a cohort change) must be nulled.
    for key in ("capacity", "allocatable"):
        for gone in set(created.get("status", {}).get(key) or {}) - set(status[key]):
            status[key][gone] = None
    kube.merge_patch(f"{path}/status", {"status": status})
    return created


def _put_slice(kube: Kube, node: SimNode, node_uid: str) -> str | None:
    name = slice_name(node.name)
    path = f"{SLICE_API}/{segment(name)}"
    existing = kube.get_or_none(path)
    generation = int(existing["spec"]["pool"]["generation"]) + 1 if existing else 1
    desired = resource_slice(node, node_uid, generation)
    if desired is None:
        if existing is not None and _is_simulated(existing):
            kube.delete(path)
        return None
    if existing is None:
        kube.create(SLICE_API, desired)
    else:
        if not _is_simulated(existing):
            msg = f"ResourceSlice {name} exists and is not simulated; refusing to overwrite it"
            raise SimulationError(msg)
        desired["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        kube.request("PUT", path, body=desired)
    return name


def apply(kube: Kube, simulation: Simulation) -> ApplyResult:
    """Make the cluster's simulated nodes and slices exactly the file's: create, update, prune."""
    result = ApplyResult()
    for node in simulation.nodes:
        created = _put_node(kube, node, simulation.cohort_label_key)
        result.nodes.append(node.name)
        slice_written = _put_slice(kube, node, created["metadata"]["uid"])
        if slice_written:
            result.slices.append(slice_written)
    wanted = {n.name for n in simulation.nodes}
    for existing in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true"):
        name = existing["metadata"]["name"]
        if name not in wanted:
            kube.delete(f"/api/v1/nodes/{segment(name)}")
            result.pruned.append(name)
    for existing in kube.items(SLICE_API, labelSelector=f"{SIMULATED_LABEL}=true"):
        if existing["spec"].get("nodeName") not in wanted or existing["metadata"]["name"] not in result.slices:
            kube.delete(f"{SLICE_API}/{segment(existing['metadata']['name'])}")
    return result


def clear(kube: Kube) -> list[str]:
    """Delete every simulated node and slice; pods bound to them stay (there is no kubelet to stop them)."""
    removed = []
    for existing in kube.items(SLICE_API, labelSelector=f"{SIMULATED_LABEL}=true"):
        kube.delete(f"{SLICE_API}/{segment(existing['metadata']['name'])}")
    for existing in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true"):
        kube.delete(f"/api/v1/nodes/{segment(existing['metadata']['name'])}")
        removed.append(existing["metadata"]["name"])
    return sorted(removed)


# ---------------------------------------------------------------- the kubelet's part


def _simulated_node_names(kube: Kube) -> set[str]:
    return {n["metadata"]["name"] for n in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true")}


def _pods_path(namespace: str | None) -> str:
    return f"/api/v1/namespaces/{segment(namespace)}/pods" if namespace else "/api/v1/pods"


def finished_status(pod: dict[str, Any], succeeded: bool, now: datetime) -> dict[str, Any]:
    """The status a kubelet reports once every container exited (0 or 1), for a strategic merge patch."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    code = 0 if succeeded else 1
    containers = []
    for container in pod["spec"]["containers"]:
        containers.append(
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if succeeded else "Error",
                        "message": KUBELET_MESSAGE,
                        "startedAt": stamp,
                        "finishedAt": stamp,
                    }
                },
            }
        )
    return {
        "phase": "Succeeded" if succeeded else "Failed",
        "startTime": pod.get("status", {}).get("startTime") or stamp,
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp},
            {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp},
        ],
        "containerStatuses": containers,
    }


def advertise(kube: Kube, node_name: str, resources: Mapping[str, str | None]) -> None:
    """Set extended resources in a simulated node's capacity and allocatable (None removes one).

    What a second device plugin registering with the node's kubelet does — an EKS add-on's, Bottlerocket's
    built-in one — and, with None, its removal. `apply` of the cohorts file puts the node back as declared.
    """
    path = f"/api/v1/nodes/{segment(node_name)}"
    if not _is_simulated(kube.get(path)):
        msg = f"node {node_name} is not simulated; refusing to change its status"
        raise SimulationError(msg)
    kube.merge_patch(f"{path}/status", {"status": {"capacity": dict(resources), "allocatable": dict(resources)}})


def daemon_pod(kube: Kube, daemonset: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """Create the pod a DaemonSet runs on a node, bound to it: the daemonset controller's part, which is not run.

    The pod is the DaemonSet's template with its controller reference, labelled simulated. No container
    starts; delete it with gracePeriodSeconds=0 (no kubelet confirms a graceful stop).
    """
    meta, template = daemonset["metadata"], daemonset["spec"]["template"]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{node_name}",
            "labels": {**(template.get("metadata", {}).get("labels") or {}), SIMULATED_LABEL: "true"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**template["spec"], "nodeName": node_name},
    }
    return kube.create(f"/api/v1/namespaces/{segment(meta['namespace'])}/pods", body)


def finish_pods(kube: Kube, namespace: str | None, *, succeeded: bool = True) -> list[str]:
    """Report bound, unfinished pods on simulated nodes as exited, as their kubelet would."""
    nodes = _simulated_node_names(kube)
    finished = []
    now = datetime.now(UTC)
    for pod in kube.items(_pods_path(namespace)):
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
        if spec.get("nodeName") not in nodes or meta.get("deletionTimestamp"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        kube.request(
            "PATCH",
            f"/api/v1/namespaces/{segment(meta['namespace'])}/pods/{segment(meta['name'])}/status",
            body={"status": finished_status(pod, succeeded, now)},
            content_type="application/strategic-merge-patch+json",
        )
        finished.append(f"{meta['namespace']}/{meta['name']}")
    return sorted(finished)


def reap_pods(kube: Kube, namespace: str | None = None) -> list[str]:
    """Remove terminating pods on simulated nodes, as a kubelet does once their containers stopped.

    Only the grace period is cut short; finalizers (Job tracking) stay with their controllers.
    """
    nodes = _simulated_node_names(kube)
    reaped = []
    for pod in kube.items(_pods_path(namespace)):
        meta = pod["metadata"]
        if pod["spec"].get("nodeName") in nodes and meta.get("deletionTimestamp"):
            kube.delete(
                f"/api/v1/namespaces/{segment(meta['namespace'])}/pods/{segment(meta['name'])}",
                gracePeriodSeconds=0,
            )
            reaped.append(f"{meta['namespace']}/{meta['name']}")
    return sorted(reaped)


# ---------------------------------------------------------------- summary


def describe(kube: Kube) -> list[dict[str, Any]]:
    """Each simulated node: compute type, cohort labels, GPU capacity and DRA devices."""
    slices = {s["spec"].get("nodeName"): s for s in kube.items(SLICE_API, labelSelector=f"{SIMULATED_LABEL}=true")}
    rows = []
    for node in kube.items("/api/v1/nodes", labelSelector=f"{SIMULATED_LABEL}=true"):
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        capacity = node.get("status", {}).get("allocatable") or {}
        devices = slices.get(name, {}).get("spec", {}).get("devices") or []
        rows.append(
            {
                "name": name,
                "labels": {k: v for k, v in sorted(labels.items()) if not k.startswith("kubernetes.io/")},
                "gpuResources": {k: v for k, v in sorted(capacity.items()) if k.startswith("nvidia.com/")},
                "draDevices": [d["name"] for d in devices],
            }
        )
    return sorted(rows, key=lambda r: str(r["name"]))


# ---------------------------------------------------------------- command line


def _loopback_only(kube: Kube) -> None:
    host = urlparse(kube.server).hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        msg = (
            f"simulate writes fake Node objects and only targets a loopback API server; {kube.where} is not one. "
            "Start the simulated cluster with `eks-hybrid-gpu simulate start`"
        )
        raise KubeAccessError(msg)


def _default_kubeconfig() -> str:
    from components.cluster import local_kubeconfig

    return str(local_kubeconfig())


def _start(_: argparse.Namespace) -> int:
    from components.cluster import local_state_dir
    from eks_hybrid_gpu import engine, localcluster

    state = local_state_dir()
    toolchain = engine.ensure_toolchain()
    os.environ["PATH"] = os.pathsep.join([*toolchain.path_entries, os.environ.get("PATH", "")])
    try:
        cluster = localcluster.start(state, controllers=SIMULATION_CONTROLLERS, scheduler=True)
    except localcluster.LocalClusterError as error:
        print(f"simulate start: {error}", file=sys.stderr)
        return 1
    print(f"simulated cluster at {cluster.server} (kube-scheduler, {', '.join(SIMULATION_CONTROLLERS)})")
    print(f"kubeconfig: {cluster.kubeconfig}")
    return 0


def _stop(_: argparse.Namespace) -> int:
    from components.cluster import local_state_dir
    from eks_hybrid_gpu import localcluster

    stopped = localcluster.stop(local_state_dir())
    print(f"stopped {', '.join(stopped) or 'nothing'}")
    return 0


def _apply(args: argparse.Namespace) -> int:
    simulation = load(Path(args.file).read_text(), args.file) if args.file else default_simulation()
    kube = connect(args.kubeconfig or _default_kubeconfig(), args.context)
    _loopback_only(kube)
    result = apply(kube, simulation)
    print(f"simulated nodes: {', '.join(result.nodes)}")
    print(f"ResourceSlices ({DRIVER}): {', '.join(result.slices) or 'none'}")
    if result.pruned:
        print(f"removed simulated nodes no longer in the file: {', '.join(result.pruned)}")
    _print_table(describe(kube))
    return 0


def _clear(args: argparse.Namespace) -> int:
    kube = connect(args.kubeconfig or _default_kubeconfig(), args.context)
    _loopback_only(kube)
    removed = clear(kube)
    print(f"removed simulated nodes: {', '.join(removed) or 'none'}")
    return 0


def _show(args: argparse.Namespace) -> int:
    kube = connect(args.kubeconfig or _default_kubeconfig(), args.context)
    rows = describe(kube)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print_table(rows)
    return 0


def _finish(args: argparse.Namespace) -> int:
    kube = connect(args.kubeconfig or _default_kubeconfig(), args.context)
    _loopback_only(kube)
    done = finish_pods(kube, args.namespace, succeeded=not args.failed)
    print(f"reported {'failed' if args.failed else 'succeeded'}: {', '.join(done) or 'no bound, unfinished pods'}")
    return 0


def _reap(args: argparse.Namespace) -> int:
    kube = connect(args.kubeconfig or _default_kubeconfig(), args.context)
    _loopback_only(kube)
    reaped = reap_pods(kube, args.namespace)
    print(f"removed terminating pods: {', '.join(reaped) or 'none'}")
    return 0


def rehearsal_work_dir(stack_file: Path, name: str, root: Path) -> Path:
    """A private work dir holding Pulumi.yaml and a copy of the stack file, so the repository is never written.

    Pulumi stores the passphrase salt in the stack file on the first run; the copy keeps it across runs.
    """
    work = root / "rehearse" / name
    (work / "stacks").mkdir(parents=True, exist_ok=True)
    from eks_hybrid_gpu.engine import ROOT

    shutil.copy(ROOT / "Pulumi.yaml", work / "Pulumi.yaml")
    document = yaml.safe_load(stack_file.read_text()) or {}
    target = work / "stacks" / f"Pulumi.{name}.yaml"
    if target.exists() and "encryptionsalt" not in document:
        salt = (yaml.safe_load(target.read_text()) or {}).get("encryptionsalt")
        if salt:
            document["encryptionsalt"] = salt
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return work


def stack_name_of(stack_file: Path) -> str:
    """`Pulumi.rehearse.yaml` -> rehearse; any other file name -> its stem."""
    name = stack_file.name
    if name.startswith("Pulumi.") and name.endswith((".yaml", ".yml")):
        return name.removeprefix("Pulumi.").rsplit(".", 1)[0]
    return stack_file.stem


def _pulumi(args: argparse.Namespace) -> int:
    from pulumi import automation as auto

    from components.cluster import local_state_dir
    from eks_hybrid_gpu import engine, localcluster
    from eks_hybrid_gpu.local import engine_state_dir

    try:
        cluster = localcluster.attach(local_state_dir())
    except localcluster.LocalClusterError as error:
        print(f"simulate {args.action}: {error}; start it with `eks-hybrid-gpu simulate start`", file=sys.stderr)
        return ACCESS_EXIT_CODE
    stack_file = Path(args.stack_file) if args.stack_file else engine.ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    name = stack_name_of(stack_file) if args.stack_file else args.stack
    env = engine.prepare(engine_state_dir(), cluster.kubeconfig)
    stack = engine.stack(env, name, work_dir=rehearsal_work_dir(stack_file, name, engine_state_dir()))
    try:
        if args.action == "preview":
            stack.preview(on_output=print, color="never", policy_packs=engine.policy_packs())
        elif args.action == "up":
            stack.up(on_output=print, color="never", policy_packs=engine.policy_packs())
        else:
            stack.destroy(on_output=print, color="never")
    except auto.CommandError:
        print(
            f"simulate {args.action}: pulumi {args.action} of stack {name} failed; its output above says why",
            file=sys.stderr,
        )
        return 1
    return 0


def _print_table(rows: Sequence[dict[str, Any]]) -> None:
    table = [("node", "compute-type", "cohort label", "GPU resources", "DRA devices")]
    for row in rows:
        labels = row["labels"]
        cohort = next((v for k, v in labels.items() if k == DEFAULT_COHORT_LABEL_KEY), "-")
        resources = ",".join(f"{k}={v}" for k, v in row["gpuResources"].items()) or "-"
        table.append(
            (row["name"], labels.get(COMPUTE_TYPE_LABEL, "-"), cohort, resources, ",".join(row["draDevices"]) or "-")
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())


def parser() -> argparse.ArgumentParser:
    """`eks-hybrid-gpu simulate ...`."""
    root = argparse.ArgumentParser(prog="eks-hybrid-gpu simulate", description=__doc__.splitlines()[0])
    sub = root.add_subparsers(dest="command", required=True)

    def with_cluster(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--kubeconfig", help="default: the local cluster's kubeconfig")
        p.add_argument("--context")
        return p

    sub.add_parser("start", help="start the local cluster with kube-scheduler and the Job/claim controllers")
    sub.add_parser("stop", help="stop the local cluster and remove its state")
    apply_p = with_cluster(sub.add_parser("apply", help="create/update/prune the simulated nodes and slices"))
    apply_p.add_argument("--file", help="cohorts YAML; default: the built-in fleet (see DEFAULT_COHORTS)")
    with_cluster(sub.add_parser("clear", help="delete every simulated node and ResourceSlice"))
    show_p = with_cluster(sub.add_parser("show", help="list the simulated nodes"))
    show_p.add_argument("--json", action="store_true")
    finish_p = with_cluster(sub.add_parser("finish", help="report bound pods as exited (the kubelet's part)"))
    finish_p.add_argument("--namespace", default="ai-workloads")
    finish_p.add_argument("--failed", action="store_true", help="exit code 1 instead of 0")
    reap_p = with_cluster(sub.add_parser("reap", help="remove terminating pods (the kubelet's part)"))
    reap_p.add_argument("--namespace", default=None, help="default: all namespaces")
    for action in ("preview", "up", "destroy"):
        p = sub.add_parser(action, help=f"pulumi {action} of a stack file against the simulated cluster")
        p.add_argument("--stack", default="local", help="stacks/Pulumi.<stack>.yaml of the repository")
        p.add_argument("--stack-file", help="any stack file, e.g. a rehearsal copy; the stack is named after it")
        p.set_defaults(action=action)
    return root


def main(argv: Sequence[str]) -> int:
    """Run one simulate command; access problems exit 2 with one line, file problems exit 1."""
    args = parser().parse_args(list(argv))
    handlers = {
        "start": _start,
        "stop": _stop,
        "apply": _apply,
        "clear": _clear,
        "show": _show,
        "finish": _finish,
        "reap": _reap,
        "preview": _pulumi,
        "up": _pulumi,
        "destroy": _pulumi,
    }
    try:
        return handlers[args.command](args)
    except KubeAccessError as error:
        print(f"simulate {args.command}: {error}", file=sys.stderr)
        return ACCESS_EXIT_CODE
    except (SimulationError, KubeApiError, OSError) as error:
        print(f"simulate {args.command}: {error}", file=sys.stderr)
        return 1
