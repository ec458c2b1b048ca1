"""The node labels a checked host should carry, GFD-style, so a cohort can be declared from inventory.

Labels are scheduling inputs, not a security boundary or proof of healthy GPU hardware. The EKS and cohort keys
come from policy/gpu_allocation/vocab/labels.py, which, like the host check, needs the standard library only.
"""

import re
from typing import TYPE_CHECKING, Dict, Optional, Tuple

from eks_hybrid_gpu.hostcheck.parse import Gpu
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, COMPUTE_TYPE_LABEL, HYBRID

if TYPE_CHECKING:
    from typing import Final

GPU_PRESENT_LABEL: "Final" = "nvidia.com/gpu.present"
GPU_PRODUCT_LABEL: "Final" = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL: "Final" = "nvidia.com/gpu.memory"
GPU_COUNT_LABEL: "Final" = "nvidia.com/gpu.count"

_INVALID: "Final" = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """Make a Kubernetes label value the way GFD does: whitespace to '-', at most 63 characters."""
    value = _INVALID.sub("-", "-".join(text.split()))[:63]
    return value.strip("-_.")


def node_labels(
    gpus: Tuple[Gpu, ...], cohort_key: str, cohort_value: str, allocator: Optional[str] = None
) -> Dict[str, str]:
    """Return the labels for a host whose GPU 0 model and memory stand for all of them.

    `allocator`: the cohort's `ALLOCATOR_LABEL` value, where its nodeSelector holds one (a DRA cohort that kept
    `nvidia.com/gpu` through `migrate`: `dra`). kubelet sets `--node-labels` only when it registers the node, and the
    cohort label guard refuses adding `dra` to a schedulable node afterwards: a host that joins without it is selected
    by no owner.
    """
    first = min(gpus, key=lambda gpu: gpu.index)
    labels = {
        COMPUTE_TYPE_LABEL: HYBRID,
        cohort_key: cohort_value,
        GPU_PRESENT_LABEL: "true",
        GPU_PRODUCT_LABEL: label_value(first.model),
        GPU_MEMORY_LABEL: str(first.memory_mib),
        GPU_COUNT_LABEL: str(len(gpus)),
    }
    if allocator is not None:
        labels[ALLOCATOR_LABEL] = allocator
    return labels


def kubelet_flag(labels: Dict[str, str]) -> str:
    """Return a --node-labels kubelet flag for nodeadm's kubelet flags, without the EKS-set label.

    nodeadm sets eks.amazonaws.com/compute-type itself on Hybrid Nodes.
    """
    pairs = ",".join(f"{key}={value}" for key, value in labels.items() if key != COMPUTE_TYPE_LABEL)
    return f"--node-labels={pairs}"
