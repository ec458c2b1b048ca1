"""The ownership vocabulary shared by the components, the policy pack and the day-2 commands.

CrossGuard policies see Kubernetes objects, not ComponentResource inputs, so every object an allocation
owner creates is stamped with these labels and annotations, and the cohort -> owner map is also written
into the cluster as a ledger ConfigMap.
"""

import sys
from typing import TYPE_CHECKING, Tuple

if TYPE_CHECKING:
    from typing import Final

if sys.version_info >= (3, 8):
    from typing import Literal

    Owner = Literal["device-plugin", "dra", "gpu-operator"]
else:  # typing.Literal is 3.8+; the host check's artifact runs on 3.6 and 3.7
    Owner = str
OWNERS: "Final[Tuple[Owner, ...]]" = ("device-plugin", "dra", "gpu-operator")
DEVICE_PLUGIN: "Final[Owner]" = "device-plugin"
DRA: "Final[Owner]" = "dra"
GPU_OPERATOR: "Final[Owner]" = "gpu-operator"

LABEL_PREFIX: "Final" = "eks-hybrid-gpu.io"
OWNER_LABEL: "Final" = f"{LABEL_PREFIX}/owner"
"""Label on every object an allocation owner creates: device-plugin, dra or gpu-operator."""
COHORT_LABEL: "Final" = f"{LABEL_PREFIX}/cohort"
"""Label on every object that belongs to one cohort: the cohort name."""
SHARING_ANNOTATION: "Final" = f"{LABEL_PREFIX}/sharing"
"""Annotation: none, time-slicing, mig-single or mig-mixed."""
SELECTOR_ANNOTATION: "Final" = f"{LABEL_PREFIX}/node-selector"
"""Annotation: the cohort's node selector as compact JSON with sorted keys."""
SMOKE_JOB_LABEL: "Final" = f"{LABEL_PREFIX}/smoke-job"
"""Label "true" on the smoke Jobs."""
APPROVED_ANNOTATION: "Final" = f"{LABEL_PREFIX}/approved-to-run"
"""Annotation "true" on a smoke Job whose cohort the stack config approves to run."""
CONFIG_PATH_ANNOTATION: "Final" = f"{LABEL_PREFIX}/config-path"
"""Annotation: the stack-config path that produced the object, for remediation messages."""
CHART_ANNOTATION: "Final" = f"{LABEL_PREFIX}/chart"
ALLOCATOR_LABEL: "Final" = f"{LABEL_PREFIX}/allocator"
"""The node label `migrate` moves a cohort's hosts by, one node at a time (device-plugin -> dra keeping a name): the
old owner selects `=<old>`, the new one `=<new>`; the cohort label (and so every workload's nodeSelector) stays."""
"""Annotation on every object a chart rendered: `<chart reference>@<version input>`. Chart v4's own inputs
are not sent to policy packs (it is a remote component), so the version the stack asked for travels here."""
LEDGER_LABEL: "Final" = f"{LABEL_PREFIX}/ledger"
"""Label "true" on the ledger ConfigMap."""
LEDGER_NAME: "Final" = "gpu-allocation-ledger"
LEDGER_KEY: "Final" = "ownership.json"
"""Ledger data key. JSON: {"cohorts": {name: {"owner", "nodeSelector", "sharing", "namespace"}},
"operatorMode": null | "cluster-policy" | "gpu-cluster"}."""
MIGRATION_NAME: "Final" = "gpu-allocation-migration"
"""ConfigMap beside the ledger that `eks-hybrid-gpu migrate` writes while it changes a cohort's owner."""
MIGRATION_KEY: "Final" = "migration.json"
"""Migration data key. JSON: {"cohort", "from", "to", "phase", "nodeSelector", "nodes", "cordonedByUs", "drain"}."""

COMPUTE_TYPE_LABEL: "Final" = "eks.amazonaws.com/compute-type"
HYBRID: "Final" = "hybrid"
AUTO_MODE: "Final" = "auto"
KARPENTER_NODEPOOL_LABEL: "Final" = "karpenter.sh/nodepool"
"""Set by Karpenter on every node it launches, EKS Auto Mode's included (its built-in `general-purpose` and `system`
NodePools); a hybrid node never carries it, so a pod that requires it (`In`, `Exists`) asks for Karpenter capacity
(AWS user guide, Auto Mode "create-node-pool" and "associate workload")."""
DEFAULT_COHORT_LABEL_KEY: "Final" = "workload.example.com/gpu-allocation"
MPS_CAPABLE_LABEL: "Final" = "nvidia.com/mps.capable"
OPERANDS_OPT_OUT_LABEL: "Final" = "nvidia.com/gpu.deploy.operands"
"""A node labelled "false" is excluded from every GPU Operator operand."""

PROJECT: "Final" = "eks-hybrid-gpu"
"""The Pulumi project name, and the namespace of every stack-config key."""
