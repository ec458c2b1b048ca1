"""smoke-job-token-unmounted: a smoke Job that leaves the token to its ServiceAccount gets none from it.

Seed: the hardened smoke Job sets ``automountServiceAccountToken: false``. A pod that leaves the field unset gets
what its ServiceAccount says (``shouldAutomount`` in kubernetes ``plugin/pkg/admission/serviceaccount/
admission.go``: the pod's value wins, then the ServiceAccount's, else true), so the ServiceAccount in the stack
decides; one that is not in the stack cannot be told, and the Job is refused (fail closed).
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import PROJECT
from ..declare import stack_policy
from ..findings import CANNOT_JUDGE, report_findings
from ..props import UNKNOWN, show
from ..resource import Resource
from ..stack_view import StackView
from .smoke_jobs import service_account_name, token_left_to_service_account

_KINDS: Final = frozenset({"Job", "ServiceAccount", "ServiceAccountPatch"})
_ACCOUNT_KINDS: Final = ("ServiceAccount", "ServiceAccountPatch")
"""A ServiceAccountPatch sets the field on the live object (the namespace's `default` one, typically)."""


def _service_account(view: StackView, job: Resource, name: str) -> Any:
    """The ServiceAccount of the Job's namespace with this name: its props, None when not in the stack, UNKNOWN."""
    namespace = job.metadata.get("namespace")
    for candidate in (c for kind in _ACCOUNT_KINDS for c in view.named(kind, name)):
        other = candidate.metadata.get("namespace")
        if other is UNKNOWN:
            return UNKNOWN
        if not isinstance(namespace, str) or not isinstance(other, str) or other == namespace:
            return candidate.props
    return None


def smoke_job_token_unmounted_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a smoke Job whose ServiceAccount mounts a token (or cannot be found) when the pod leaves it unset."""
    view = StackView.from_args(args, _KINDS)
    judged = False
    for resource, pod in view.workloads():
        if not resource.is_smoke_job:
            continue
        # Every smoke Job's token is judged here; one its own pod decides (true or false) is smoke-job-hardened's.
        judged = True
        name = service_account_name(pod)
        if not token_left_to_service_account(pod) or name is UNKNOWN:
            continue
        account = _service_account(view, resource, name)
        if account is UNKNOWN:
            continue
        subject = f"{resource.describe}: automountServiceAccountToken is unset, so ServiceAccount '{name}' decides"
        if account is None:
            origin = (
                "the namespace's own, which its controller creates mounting tokens, and this stack does not manage it"
                if name == "default"
                else "it is not in this stack"
            )
            manage = "add a ServiceAccountPatch of" if name == "default" else "manage"
            report_violation(
                f"{subject}, and {origin}: whether the GPU check gets an API token cannot be told, {CANNOT_JUDGE}. "
                f"Set automountServiceAccountToken: false in the Job's pod template, or {manage} ServiceAccount "
                f"'{name}' with automountServiceAccountToken: false in this stack.",
                resource.urn,
            )
            continue
        automount = account.get("automountServiceAccountToken") if isinstance(account, dict) else None
        if automount is UNKNOWN or automount is False:
            continue
        report_violation(
            f"{subject}, and its automountServiceAccountToken is {show(automount)} (unset means true), so the GPU "
            "check gets an API token it does not need. Set automountServiceAccountToken: false in the Job's pod "
            f"template or on ServiceAccount '{name}'.",
            resource.urn,
        )
    if not judged:
        args.not_applicable("no GPU smoke Job in the stack")
        return
    report_findings(view.problems(lambda r: r.kind in _KINDS), report_violation)


SMOKE_JOB_TOKEN_UNMOUNTED = stack_policy(
    "smoke-job-token-unmounted",
    (
        "A GPU smoke Job that leaves automountServiceAccountToken unset runs under a ServiceAccount of the stack "
        "that sets it to false."
    ),
    smoke_job_token_unmounted_validator,
    severity=Severity.HIGH,
    remediation=(
        "Set automountServiceAccountToken: false in the smoke Job's pod template (this program's hardened template "
        f"does: {PROJECT}:smokeJobs), or on the ServiceAccount it names, managed in the same stack."
    ),
    url="https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/",
    tags=["workloads", "smoke-job"],
)
