"""`eks-hybrid-gpu smoke`: the smoke Jobs' state, their results captured before the TTL, and a cleanup check.

A finished smoke Job is removed `ttlSecondsAfterFinished` after it ends, with its pods and their logs, so
its result is captured to a private file first (umask 077, files 0600: hardware and pod diagnostics are
private). After the owner deleted the Jobs, `--verify-cleanup` checks that the claims generated for their
pods were released: no claim stays reserved for a deleted or terminating pod, and no deleted claim is
held by finalizers. It reports; it never strips a finalizer or force-deletes a claim or pod — a
finalizer is how the DRA driver makes sure a device is unprepared, and removing it hides that it was not.

The package, one job a module: `state` (Job and pod state into rows), `capture` (results into private files),
`cleanup` (the claim release check) and `cli` (the report and the command). The names below are its public
interface.
"""

from eks_hybrid_gpu.smoke.capture import (
    SIMULATED_NOTE,
    capture,
    capture_file,
    is_simulated,
    private_umask,
    removed_captures,
    simulated_nodes,
    write_private,
)
from eks_hybrid_gpu.smoke.cleanup import Cleanup, cleanup_findings
from eks_hybrid_gpu.smoke.cli import DEFAULT_OUT, add_arguments, main, render, run
from eks_hybrid_gpu.smoke.state import finished, job_row, job_state, pods_of, ttl_left

__all__ = [
    "DEFAULT_OUT",
    "SIMULATED_NOTE",
    "Cleanup",
    "add_arguments",
    "capture",
    "capture_file",
    "cleanup_findings",
    "finished",
    "is_simulated",
    "job_row",
    "job_state",
    "main",
    "pods_of",
    "private_umask",
    "removed_captures",
    "render",
    "run",
    "simulated_nodes",
    "ttl_left",
    "write_private",
]
