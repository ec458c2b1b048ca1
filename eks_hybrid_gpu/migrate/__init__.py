"""`eks-hybrid-gpu migrate --stack S --cohort C --to OWNER`: change a cohort's owner in order, never two at once.

Changed in one `pulumi up`, Pulumi creates the new owner's resources before it deletes the old one's, so both
allocators run on the same GPUs for the length of the update; the preview refuses that and names this command.
It runs the change in phases, each recorded in ConfigMap `gpu-allocation-migration` beside the ledger (the
program reads it: see `cluster.records.migration`), each `pulumi up` a real one with the policy pack:

1. cordon: plan and checks (the cohort's nodes from the ledger, their GPU consumers: refused, or evicted with
   `--drain` through the Eviction API with PodDisruptionBudgets respected; the target owner's stack config
   with its floors; no second publisher), then cordon the nodes and drain them;
2. remove: `pulumi up` with no owner for the cohort (other cohorts untouched);
3. wait-unpublished: until the old allocator pods are gone and their publication ended on every node;
4. install: `pulumi up` with the new owner;
5. wait-published: until its allocator is Ready and publishing on every node;
6. uncordon (only what this command cordoned), clear the record, print before/after, write the new owner into
   the stack file (or print the exact edit).

A move to DRA that keeps `nvidia.com/gpu` through the DRA class (`dra.extendedResourceName`, KEP-5004) runs one
node at a time instead (`cluster.records.migration.NODE_PHASES`): label the hosts `eks-hybrid-gpu.io/allocator=
device-plugin`; narrow the device plugin to that label and install DRA beside it on `allocator=dra` (no node has it
yet), wait for the plugin's restart and the mapping class; move each node's label in turn with move-host's steps
(`transit.move_node`), the others serving meanwhile; remove the device plugin; clear. The cohort label stays. The
cohort label guard (`components.node_guard`) admits only the label phase's change of that label on a schedulable node
(absent -> device-plugin); each node's move comes under its cordon, so a hand relabel cannot skip the drain.

`--dry-run` prints the plan and changes nothing. Run again after Ctrl-C, a kill or a failed phase, the same
command continues from the recorded phase (and, one node at a time, from the node it was moving).

The package, one job a module: `request` (the command line, parsed once), `records` (the ledger and the migration
record in the cluster), `planning` (the stack file, the checks, the migration to run or resume), `phases` (running
them in order), `runner` (each phase's `pulumi up`) and `cli`. The names below are its public interface.
"""

from eks_hybrid_gpu.migrate.cli import add_arguments, main, run
from eks_hybrid_gpu.migrate.phases import Up, migrate
from eks_hybrid_gpu.migrate.planning import MigrateRefused, StackFile, plan, read_stack_file
from eks_hybrid_gpu.migrate.records import ClusterRecords
from eks_hybrid_gpu.migrate.request import MigrateRequest
from eks_hybrid_gpu.migrate.runner import UpFailed, stack_runner

__all__ = [
    "ClusterRecords",
    "MigrateRefused",
    "MigrateRequest",
    "StackFile",
    "Up",
    "UpFailed",
    "add_arguments",
    "main",
    "migrate",
    "plan",
    "read_stack_file",
    "run",
    "stack_runner",
]
