"""The fleet a stack gets: two simulated nodes per cohort and one EKS Auto Mode node, derived from the config."""

from __future__ import annotations

from components.config import Mig, StackConfig, TimeSlicing
from eks_hybrid_gpu.simulate.model import (
    AUTO_NODE_NAME,
    DEFAULT_KUBELET_VERSION,
    NFD_NVIDIA_PCI_LABEL,
    NODES_PER_COHORT,
    GpuGroup,
    SimNode,
    Simulation,
)
from policy.gpu_allocation.vocab import versioning
from policy.gpu_allocation.vocab.labels import (
    AUTO_MODE,
    COMPUTE_TYPE_LABEL,
    DRA,
    GPU_OPERATOR,
    OPERANDS_OPT_OUT_LABEL,
)


def _cohort_nodes(config: StackConfig, index: int) -> list[SimNode]:
    cohort = config.cohorts[index]
    selector = cohort.selector(config.cohort_label_key)
    labels = {k: v for k, v in selector.items() if k != COMPUTE_TYPE_LABEL}
    labels[NFD_NVIDIA_PCI_LABEL] = "true"  # NFD's PCI vendor label, the first term of the charts' GPU affinity
    compute_type = selector.get(COMPUTE_TYPE_LABEL, "hybrid")
    if config.cohorts_of(GPU_OPERATOR) and cohort.owner != GPU_OPERATOR:
        labels[OPERANDS_OPT_OUT_LABEL] = "false"  # the preflight's rule: opt standalone nodes out of operands
    # The hosts a platform team would put in such a cohort; their allocator pods publish them.
    if cohort.owner == DRA:
        gpus = (GpuGroup(model="H200", count=2),)
    elif isinstance(cohort.sharing, Mig):
        gpus = (GpuGroup(model="A100-40GB", mig=("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb")),)
    elif isinstance(cohort.sharing, TimeSlicing):
        gpus = (GpuGroup(model="A10G"),)
    else:
        gpus = (GpuGroup(model="H100", count=4),)
    return [
        SimNode.model_validate(
            {
                "name": f"sim-{cohort.name}-{i}",
                "computeType": compute_type,
                "gpus": gpus,
                "mpsCapable": False,
                "labels": labels,
                **_kubelet_of(config),
            }
        )
        for i in range(NODES_PER_COHORT)
    ]


def _kubelet_of(config: StackConfig) -> dict[str, str]:
    """A kubelet of the stack's declared version (nodeadm installs the cluster's own) with the default's EKS build."""
    declared = config.cluster.kubernetes_version
    found = versioning.parse(declared, partial=True) if declared else None
    if found is None:
        return {}
    build = DEFAULT_KUBELET_VERSION.split("-", 1)[1]
    return {"kubeletVersion": f"v{found.major}.{found.minor}.{found.patch}-{build}"}


def fleet_for(config: StackConfig) -> Simulation:
    """The simulated fleet a stack wants: two nodes per cohort, carrying exactly its selector, plus one Auto Mode node.

    Each cohort's nodes carry its node selector's labels (the cohort label included), GFD's discovery labels,
    `nvidia.com/mps.capable=false` and GPUs, but advertise nothing of their own: the simulated kubelet publishes
    what the allocator pods that run there publish (`simulate.devicemanager`). With a GPU Operator in the stack,
    every GPU node outside its cohort opts out of its operands, as an administrator must
    (`cluster.judge.operator_boundary`): the other cohorts' nodes and the Auto Mode node (its NodePool's template
    labels, on EKS). The Auto Mode node has a GPU, AWS's `nvidia.com/gpu` taint and AWS's host-level device
    plugin; no cohort may ever select it.
    """
    nodes: list[SimNode] = []
    for index in range(len(config.cohorts)):
        nodes.extend(_cohort_nodes(config, index))
    auto_labels = {OPERANDS_OPT_OUT_LABEL: "false"} if config.cohorts_of(GPU_OPERATOR) else {}
    nodes.append(
        SimNode.model_validate(
            {
                "name": AUTO_NODE_NAME,
                "computeType": AUTO_MODE,
                "gpus": [{"model": "L4"}],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                "cpu": "8",
                "memory": "32Gi",
                "labels": auto_labels,
                **_kubelet_of(config),
            }
        )
    )
    return Simulation.model_validate({"cohortLabelKey": config.cohort_label_key, "nodes": nodes})
