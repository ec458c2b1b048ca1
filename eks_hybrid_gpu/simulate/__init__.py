"""Simulated GPU cohorts on the local control plane, for rehearsing a cohort change and for tests.

A real cohort is a set of Hybrid GPU nodes that carry the cohort label, GFD discovery labels, device-plugin
capacity or DRA ResourceSlices. This module writes exactly those objects — Node objects (status through
the status subresource), and ResourceSlices shaped like the ones the NVIDIA DRA driver publishes — onto
the loopback API server, so the real kube-scheduler, job controller and resourceclaim controller place
the program's workloads as they would on the hardware. No kubelet exists: pods are bound and claims
allocated, but no container ever starts; `finish` and `reap` play the kubelet's part when asked.

Everything written is labelled `eks-hybrid-gpu.io/simulated=true`; nothing else is ever touched, and the
command refuses any API server that is not on loopback.

The package, one job a module: `model` (GPU models, node and cohort shapes, the cohorts file), `fleet` (the
nodes a stack gets), `objects` (Node and ResourceSlice builders), `cluster` (writing and removing them),
`kubelet` (the kubelet's part), `devicemanager` (the kubelet's device part: publications follow allocator pods),
`rehearse` (a Pulumi run against the fleet) and `cli`. The names below are its
public interface.
"""

from eks_hybrid_gpu.simulate.cli import main
from eks_hybrid_gpu.simulate.cluster import ApplyResult, apply, clear, describe
from eks_hybrid_gpu.simulate.fleet import fleet_for
from eks_hybrid_gpu.simulate.kubelet import advertise, daemon_pod, finish_pods, finished_status, reap_pods
from eks_hybrid_gpu.simulate.model import (
    AUTO_NODE_NAME,
    DEFAULT_COHORTS,
    GPU_MODELS,
    HOST_ANNOTATION,
    SIMULATED_LABEL,
    SIMULATION_CONTROLLERS,
    GpuGroup,
    GpuModel,
    SimNode,
    Simulation,
    SimulationError,
    default_simulation,
    load,
)
from eks_hybrid_gpu.simulate.objects import (
    PluginSharing,
    device_uuid,
    extended_resources,
    node_labels,
    node_object,
    node_status,
    plugin_resources,
    resource_slice,
    slice_devices,
    slice_name,
)
from eks_hybrid_gpu.simulate.rehearse import rehearsal_work_dir, stack_name_of

__all__ = [
    "AUTO_NODE_NAME",
    "DEFAULT_COHORTS",
    "GPU_MODELS",
    "HOST_ANNOTATION",
    "SIMULATED_LABEL",
    "SIMULATION_CONTROLLERS",
    "ApplyResult",
    "GpuGroup",
    "GpuModel",
    "PluginSharing",
    "SimNode",
    "Simulation",
    "SimulationError",
    "advertise",
    "apply",
    "clear",
    "daemon_pod",
    "default_simulation",
    "describe",
    "device_uuid",
    "extended_resources",
    "finish_pods",
    "finished_status",
    "fleet_for",
    "load",
    "main",
    "node_labels",
    "node_object",
    "node_status",
    "plugin_resources",
    "reap_pods",
    "rehearsal_work_dir",
    "resource_slice",
    "slice_devices",
    "slice_name",
    "stack_name_of",
]
