"""The simulated fleet's model: GPU models, node and cohort shapes, and the cohorts-file loader."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cluster.findings import show
from cluster.judge.node_facts import MAX_REPORTED, kubelet_version, parse_runtime
from eks_hybrid_gpu.hostcheck.labels import label_value
from policy.gpu_allocation.vocab.gpu_models import known_profiles
from policy.gpu_allocation.vocab.labels import (
    AUTO_MODE,
    DEFAULT_COHORT_LABEL_KEY,
    LABEL_PREFIX,
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
HOST_ANNOTATION = f"{LABEL_PREFIX}/simulated-host"
"""On every simulated Node: the fleet entry as JSON (its GPUs, its host allocator), which the simulated kubelet
reads to know what hardware an allocator pod on the node can publish."""
PUBLISHED_BY_LABEL = f"{LABEL_PREFIX}/published-by"
"""Label `pod` on the ResourceSlices the simulated kubelet writes for a DRA kubelet-plugin pod; `apply` leaves them."""
NODES_PER_COHORT = 2
DEFAULT_KUBELET_VERSION = "v1.34.4-eks-3025e55"
"""What a simulated node's kubelet reports unless its fleet entry says otherwise: an EKS 1.34 build."""
DEFAULT_CONTAINER_RUNTIME = "containerd://2.0.5"
"""containerd 2.x: CDI on by default, which the DRA path needs."""
AUTO_NODE_NAME = "sim-auto-l4-0"
_NVML_DRIVER = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?", re.ASCII)
_CUDA_VERSION = re.compile(r"[0-9]{1,3}\.[0-9]{1,2}", re.ASCII)


@dataclass(frozen=True)
class GpuModel:
    """What a host of one GPU model shows: GFD labels, the DRA attributes NVML reports, MIG profiles."""

    product_name: str
    """NVML name; the DRA `productName` attribute. GFD's label is derived from it."""
    memory_mib: int
    """NVML's total memory in MiB: `nvidia.com/gpu.memory` as GFD writes it, and the DRA `memory` capacity, which
    the driver publishes as NVML's bytes in a binary quantity (143771Mi on the H200, never "141Gi")."""
    architecture: str
    """NVML's architecture name, the DRA `architecture` attribute."""
    compute_capability: str
    """CUDA compute capability MAJOR.MINOR; the driver publishes it as the version `cudaComputeCapability`."""
    mig_table: str | None
    """Key of policy.gpu_allocation.vocab.gpu_models.MIG_PROFILES, None where the model has no MIG."""

    @property
    def gfd_product(self) -> str:
        """nvidia.com/gpu.product: the NVML name as a label value, like GFD and `hostcheck` make it."""
        return label_value(self.product_name)

    @property
    def memory(self) -> str:
        """The DRA `memory` capacity as the driver writes it: NVML's MiB as a binary quantity."""
        return f"{self.memory_mib}Mi"


GPU_MODELS: dict[str, GpuModel] = {
    "H200": GpuModel("NVIDIA H200", 143771, "Hopper", "9.0", "H200-141GB"),
    "H100": GpuModel("NVIDIA H100 80GB HBM3", 81559, "Hopper", "9.0", "H100-80GB"),
    "A100-40GB": GpuModel("NVIDIA A100-SXM4-40GB", 40960, "Ampere", "8.0", "A100-40GB"),
    "A10G": GpuModel("NVIDIA A10G", 23028, "Ampere", "8.6", None),
    "L4": GpuModel("NVIDIA L4", 23034, "Ada Lovelace", "8.9", None),
}
"""The simulated models, each figure with its source:

| model | NVML MiB | source of the memory figure | compute cap. |
|---|---|---|---|
| H200 | 143771 | the real DRA driver's slice (tests/fixtures/dra), nvidia-smi on the lent H200 | 9.0, recorded |
| H100 80GB HBM3 | 81559 | NVML via nvidia-smi, Modal's table [1] | 9.0 [2] |
| A100-SXM4-40GB | 40960 | the same table, "A100 40GB" | 8.0 [2] |
| A10G | 23028 | the same table, "A10" (the A10G's datacenter twin, 24 GB GDDR6 both) | 8.6 [2] |
| L4 | 23034 | the same table, "L4" | 8.9 [2] |

[1] https://thundergolfer.com/blog/nvidia-gpu-memory-capacity (NVML totals as nvidia-smi reports them; its H200
row is the lent H200's 143771). [2] NVIDIA's CUDA GPUs table, https://developer.nvidia.com/cuda-gpus.
NVIDIA's datasheets give memory in round GB (141, 80, 40, 24, 24), which is not what NVML or the driver publishes;
the architecture is NVML's family name. Nothing here is measured by the simulation."""

DEFAULT_DRIVER_VERSION = "580.159.04"
"""NVML's driver version on a simulated host unless its fleet entry says otherwise: the lent H200's driver."""
DEFAULT_CUDA_DRIVER_VERSION = "13.0"
"""The CUDA driver API version that driver reports (NVML's SystemGetCudaDriverVersion, 13000 -> 13.0)."""
DEFAULT_ADDRESSING_MODE = "None"
"""NVML's addressing mode as the real driver published it on the H200 ("None": HMM/ATS supported but inactive).
Recorded on the H200 only; the simulation assumes it for every model."""


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
    """One simulated host: its cohort label, its GPUs and any allocator that runs on the host itself.

    The GPUs are the hardware. Who publishes them is not declared here: the simulated kubelet
    (`eks_hybrid_gpu.simulate.devicemanager`) publishes what the allocator pods running on the node publish.
    `hostAllocator` is for an allocator outside Kubernetes, which publishes with no pod at all.
    """

    name: str
    compute_type: Literal["hybrid", "auto"] = Field(default="hybrid", alias="computeType")
    cohort: str | None = Field(default=None, description="Value of the cohort label; absent: no cohort label.")
    host_allocator: Allocation | None = Field(
        default=None,
        alias="hostAllocator",
        description="An allocator running on the host outside Kubernetes, publishing with no pod: device-plugin "
        "(node capacity: Bottlerocket's built-in plugin, Auto Mode's AWS-managed one), dra (ResourceSlices), or "
        "none. Default: device-plugin on an Auto Mode node, none otherwise (only allocator pods publish). "
        "`simulate` runs no pods, so its fleet files declare one per GPU host.",
    )
    gpus: tuple[GpuGroup, ...] = ()
    time_slicing_replicas: int | None = Field(default=None, alias="timeSlicingReplicas", ge=2, le=64)
    mps_capable: bool | None = Field(default=None, alias="mpsCapable")
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[TaintSpec, ...] = ()
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = Field(default=110, ge=1)
    kubelet_version: str = Field(
        default=DEFAULT_KUBELET_VERSION,
        alias="kubeletVersion",
        description="status.nodeInfo.kubeletVersion, as nodeadm's kubelet reports it; an older one rehearses an "
        "old host.",
    )
    container_runtime_version: str = Field(
        default=DEFAULT_CONTAINER_RUNTIME,
        alias="containerRuntimeVersion",
        description="status.nodeInfo.containerRuntimeVersion: NAME://VERSION, e.g. containerd://1.7.27.",
    )
    driver_version: str = Field(
        default=DEFAULT_DRIVER_VERSION,
        alias="driverVersion",
        description="NVML's driver version on the host (e.g. 580.159.04); the DRA driver publishes it as the version "
        "attribute driverVersion (580.159.4).",
    )
    cuda_driver_version: str = Field(
        default=DEFAULT_CUDA_DRIVER_VERSION,
        alias="cudaDriverVersion",
        description="The CUDA driver API version that driver reports (MAJOR.MINOR, e.g. 13.0); published as the "
        "version attribute cudaDriverVersion (13.0.0).",
    )

    @field_validator("kubelet_version")
    @classmethod
    def _kubelet_version(cls, value: str) -> str:
        if kubelet_version(value) is None or not value.startswith("v"):
            msg = (
                f"{show(value)} is not a kubelet version: write vMAJOR.MINOR.PATCH with an optional build suffix, "
                f"at most {MAX_REPORTED} characters, e.g. {DEFAULT_KUBELET_VERSION} or v1.31.9-eks-1"
            )
            raise ValueError(msg)
        return value

    @field_validator("container_runtime_version")
    @classmethod
    def _runtime_version(cls, value: str) -> str:
        runtime = parse_runtime(value)
        if runtime is None or runtime.version is None:
            msg = (
                f"{show(value)} is not a container runtime version: write NAME://MAJOR.MINOR.PATCH with an optional "
                f"build suffix, at most {MAX_REPORTED} characters, e.g. {DEFAULT_CONTAINER_RUNTIME}, "
                "containerd://1.7.27 or cri-o://1.30.1"
            )
            raise ValueError(msg)
        return value

    @field_validator("driver_version")
    @classmethod
    def _nvml_driver_version(cls, value: str) -> str:
        if not _NVML_DRIVER.fullmatch(value):
            msg = (
                f"{show(value)} is not an NVML driver version: write MAJOR.MINOR[.PATCH] as nvidia-smi prints it, "
                "e.g. 580.159.04"
            )
            raise ValueError(msg)
        return value

    @field_validator("cuda_driver_version")
    @classmethod
    def _cuda_version(cls, value: str) -> str:
        if not _CUDA_VERSION.fullmatch(value):
            msg = f"{show(value)} is not a CUDA driver version: write MAJOR.MINOR as nvidia-smi prints it, e.g. 13.0"
            raise ValueError(msg)
        return value

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not value or len(value) > 40 or not all(c.isdigit() or c == "-" or ("a" <= c <= "z") for c in value):
            msg = f"'{value}' is not a DNS label of at most 40 characters"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _sharing_fits_allocation(self) -> SimNode:
        if self.time_slicing_replicas is not None and self.host_publisher != "device-plugin":
            msg = (
                "timeSlicingReplicas is the config of a host-level device plugin and needs hostAllocator "
                "device-plugin; a device-plugin pod takes time-slicing from its own config"
            )
            raise ValueError(msg)
        if self.time_slicing_replicas is not None and any(g.mig for g in self.gpus):
            msg = "timeSlicingReplicas and MIG GPUs on one node are not simulated; use separate nodes"
            raise ValueError(msg)
        return self

    @property
    def host_publisher(self) -> Allocation:
        """The allocator on the host itself: publishes this node's GPUs whatever pods run there."""
        if self.host_allocator is not None:
            return self.host_allocator
        return "device-plugin" if self.compute_type == AUTO_MODE else "none"


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
# The default simulated fleet of `simulate`: two device-plugin hosts, three DRA hosts, one EKS Auto Mode node.
# `simulate` runs no allocator pods (no kwok, no DaemonSet controller), so each GPU host declares the allocator
# that publishes its GPUs as a host-level one; the local default (`local up`) declares none and lets the
# allocator pods publish.
cohortLabelKey: workload.example.com/gpu-allocation
nodes:
  - name: sim-plugin-h100-0          # exclusive GPUs: nvidia.com/gpu 4
    cohort: device-plugin
    hostAllocator: device-plugin
    gpus: [{model: H100, count: 4}]
  - name: sim-plugin-a10g-ts-0       # time-slicing x4: nvidia.com/gpu.shared 4
    cohort: device-plugin
    hostAllocator: device-plugin
    gpus: [{model: A10G}]
    timeSlicingReplicas: 4
  - name: sim-dra-h200-0             # DRA: one full H200 (143771Mi), one H200 in MIG mode
    cohort: dra
    hostAllocator: dra
    gpus:
      - {model: H200}
      - {model: H200, mig: [3g.71gb, 1g.18gb, 1g.18gb]}
  - name: sim-dra-h100-0             # DRA: one H100 (81559Mi)
    cohort: dra
    hostAllocator: dra
    gpus: [{model: H100}]
  - name: sim-dra-a10g-0             # DRA: two A10G (23028Mi): below hybrid-large-gpu's 40Gi floor
    cohort: dra
    hostAllocator: dra
    gpus: [{model: A10G, count: 2}]
  - name: sim-auto-l4-0              # EKS Auto Mode: AWS manages its device plugin
    computeType: auto
    gpus: [{model: L4}]
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    cpu: "8"
    memory: 32Gi
"""


class SimulationError(Exception):
    """The cohorts file is invalid or the cluster holds something the simulation must not overwrite."""


def load(text: str, source: str = "cohorts file") -> Simulation:
    """Parse and validate a cohorts file; every problem is listed with its path."""
    try:
        document = yaml.safe_load(text)
        return Simulation.model_validate(document)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "it does not parse"
        msg = f"{source} is not YAML ({problem}{at}): fix it or print a valid one with `eks-hybrid-gpu simulate fleet`"
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
