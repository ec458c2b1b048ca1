"""Fail closed: what a resource validator could not read on an object it judges is a violation, never silence.

And "not applicable" is said only for a reason: :func:`pod_or_not_applicable` says why an object has no pod template
to judge.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .findings import report_findings
from .props import UNKNOWN
from .resource import Resource
from .sdk_internals import NotApplicable
from .shapes import POD_SPEC_PATHS

Validator = Callable[[ResourceValidationArgs, ReportViolation], None]


def reads_pods(resource: Resource) -> bool:
    """A policy that judges pod templates reads every workload kind."""
    return resource.is_kubernetes and resource.kind in POD_SPEC_PATHS


def reads_pods_and_helm(resource: Resource) -> bool:
    """A policy that judges pod templates and chart values."""
    return resource.is_helm or reads_pods(resource)


def fail_closed(
    reads: Callable[[Resource], bool], kinds: frozenset[str] | None = None
) -> Callable[[Validator], Validator]:
    """Wrap a resource validator: what it could not read on an object it ``reads`` is a violation, never silence.

    The pod template of such an object is type-checked first (:meth:`Resource.read_pod`); a validator that
    found nothing to judge ("not applicable") on an object with unreadable fields reports those fields instead.
    ``kinds``: the only kinds the validator judges (others go straight to it, without copying their props).
    """

    def wrap(validate: Validator) -> Validator:
        @functools.wraps(validate)
        def run(args: ResourceValidationArgs, report: ReportViolation) -> None:
            if kinds is not None and args.resource_type.rsplit(":", 1)[-1] not in kinds:
                validate(args, report)
                return
            resource = Resource.from_args(args)
            relevant = reads(resource)
            if relevant:
                resource.read_pod()
            try:
                validate(args, report)
            except NotApplicable:
                if not (relevant and resource.problems):
                    raise
            if relevant:
                report_findings(resource.problems.values(), report, with_urn=False)

        return run

    return wrap


def pod_or_not_applicable(args: ResourceValidationArgs) -> tuple[Resource, dict[str, Any]] | None:
    """The workload and its pod spec, or None after saying why it is not applicable (no pod template, unknown)."""
    resource = Resource.from_args(args)
    pod = resource.pod_spec
    if pod is None:
        args.not_applicable("not a workload with a pod template")
        return None
    if pod is UNKNOWN:
        args.not_applicable("the pod template is unknown during preview")
        return None
    return resource, pod
