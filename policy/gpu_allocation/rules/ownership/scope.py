"""Which stacks and objects the ownership rules judge: a stack that installs a GPU allocation owner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pulumi_policy import (
    ReportViolation,
    StackValidationArgs,
)

from ..findings import report_findings
from ..resource import Resource
from ..shapes import POD_SPEC_PATHS
from ..stack_view import StackView

CRD_KIND: Final = "CustomResourceDefinition"
"""The kind of the compute-domain CRDs the DRA chart and the Operator chart both ship."""


def gpu_stack(
    args: StackValidationArgs, report: ReportViolation, kinds: frozenset[str] | None = None
) -> StackView | None:
    """The stack's view, or None (reported not applicable) when it installs no GPU allocation owner."""
    view = StackView.from_args(args, kinds)
    if not view.installations() and not any(r.owner for r in view.resources):
        # An object that cannot be read may be an allocator: say so rather than "not applicable".
        unreadable = view.problems(reads_ownership)
        if unreadable:
            report_findings(unreadable, report)
            return None
        args.not_applicable("the stack installs no GPU allocation owner")
        return None
    return view


def judge_gpu_stack(
    args: StackValidationArgs,
    report: ReportViolation,
    check: Callable[[StackView, ReportViolation], None],
    kinds: frozenset[str] | None = None,
) -> None:
    """Run one cluster-wide check on a stack that installs a GPU owner, then report what it could not read."""
    view = gpu_stack(args, report, WORKLOAD_KINDS if kinds is None else kinds)
    if view is not None:
        check(view, report)
        report_findings(view.problems(reads_ownership), report)


def reads_ownership(resource: Resource) -> bool:
    """The objects the ownership checks read: workloads, ConfigMaps (the ledger), Helm resources, Operator CRs, CRDs."""
    return resource.is_helm or resource.kind in _POD_KINDS or resource.kind in _OWNERSHIP_KINDS


WORKLOAD_KINDS: Final = frozenset({"DaemonSet", "Deployment", "ClusterPolicy", "GPUCluster"})
"""The kinds whose props the Operator, CRD and NFD checks read (besides Helm resources)."""
_POD_KINDS: Final = frozenset(POD_SPEC_PATHS)
_OWNERSHIP_KINDS: Final = frozenset({"ConfigMap", CRD_KIND, "ClusterPolicy", "GPUCluster"})
