"""`eks-hybrid-gpu inspect`: the guide's ResourceSlice/ResourceClaim `jq` reads, plus who owns each node.

It answers four questions an operator asks before and after a change: which GPUs the DRA driver
publishes on which node (devices with attributes and capacity), which claims are allocated and reserved
for which pods, which allocation owner serves each GPU node — the ledger ConfigMap's cohort selectors
matched against the node's labels — and who really publishes each node's GPUs (`cluster.judge.publishers`:
extended resources, ResourceSlices, allocator pods of any namespace, the Operator's deploy labels). Declared
and observed owners are compared into findings, and so are who holds each node's GPUs now
(`cluster.judge.consumers`: a pod holding a GPU through another mechanism than its cohort's owner is a conflict) and
each owned node's kubelet and container runtime against its owner's floors (`cluster.judge.node_facts`, as the
preflight); any conflict makes it exit 1. With a GPU Operator in the ledger it also shows the Operator's boundary
(`cluster.judge.operator_boundary`): operand pods outside its cohort are a conflict, GPU nodes where its operands
would start a finding; run on a schedule, it finds the new nodes that joined without the opt-out. It only reads; a
claim's reservation is not proof that a container used the GPU.

The package, one job a module: `snapshot` (what it reads), `report` (owners, publishers and findings per node: the
`--json` document), `render` (the tables) and `cli` (options and exit codes). The names below are its public
interface.
"""

from cluster.judge.node_state import TRANSIT_ANNOTATION
from cluster.records.read import read_ledger
from eks_hybrid_gpu.inspection.cli import CONFLICT_EXIT_CODE, add_arguments, main, run
from eks_hybrid_gpu.inspection.render import claim_state, operands_cell, render
from eks_hybrid_gpu.inspection.report import (
    claim_summary,
    fact_findings,
    node_findings,
    node_owner,
    report,
    slice_summary,
)
from eks_hybrid_gpu.inspection.snapshot import DEFAULT_LEDGER, Snapshot, gather, gather_whole

__all__ = [
    "CONFLICT_EXIT_CODE",
    "DEFAULT_LEDGER",
    "TRANSIT_ANNOTATION",
    "Snapshot",
    "add_arguments",
    "claim_state",
    "claim_summary",
    "fact_findings",
    "gather",
    "gather_whole",
    "main",
    "node_findings",
    "node_owner",
    "operands_cell",
    "read_ledger",
    "render",
    "report",
    "run",
    "slice_summary",
]
