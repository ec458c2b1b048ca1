"""smoke-job-hardened and smoke-job-run-approved: GPU smoke Jobs stay suspended until approved, bounded and hardened.

Seed: smoke Jobs are "suspended by default", bounded, non-root, read-only, pinned by digest. Each offence is a
:class:`JobFinding` record; its fix is worded for who built the Job (a stamped Job's stack config, else its
manifest).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab import grammar
from ...vocab import labels as vocab
from ...vocab.labels import PROJECT
from ..declare import resource_policy
from ..fail_closed import fail_closed
from ..props import UNKNOWN, as_dict, as_list, config_int, dig, show
from ..resource import Resource
from ..shapes import Container, containers

_DEFAULT_MAX_DEADLINE: Final = 600
SMOKE_IMAGE_PATH: Final = f"{PROJECT}:smokeJobs.image"
SMOKE_APPROVED_PATH: Final = f"{PROJECT}:smokeJobs.approvedCohort"
SMOKE_DEADLINE_PATH: Final = f"{PROJECT}:smokeJobs.activeDeadlineSeconds"
_TEMPLATE_FIX: Final = (
    "restore the hardened smoke Job template (components/ renders it exactly as the "
    "integration guide shows; it has no stack-config switch for this field)"
)
_FOREIGN_TEMPLATE_FIX: Final = "set it in the Job's manifest as the integration guide's hardened smoke Job does"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class JobFinding:
    """One hardening offence of a smoke Job, as a record; its fix is worded for who built the Job (:meth:`text`)."""

    field: str
    """The Job's field, e.g. ``spec.backoffLimit`` or ``container 'gpu-check' image``."""
    offence: str
    """What is wrong and why, naming the field and its value."""
    action: str
    """What to do; ``{target}`` is the stack-config path (a stamped Job) or the Job's own field (any other)."""
    config_path: str | None = None
    """The stack-config path that sets the field, if the program exposes one."""
    manifest_target: str | None = None
    """How the fix names the field on a Job this program did not build (default: ``field``)."""
    template: bool = False
    """The field has no stack-config switch: the fix restores the hardened template (or the manifest's field)."""

    def text(self, stamped: bool) -> str:
        """The finding, with the fix for a stamped Job (config path, template) or a foreign one (its manifest)."""
        target = self.config_path if stamped and self.config_path else (self.manifest_target or self.field)
        action = self.action.format(target=target)
        if self.template:
            action += f": {_TEMPLATE_FIX if stamped else _FOREIGN_TEMPLATE_FIX}"
        return f"{self.offence}. {action}"


def _approval_problem(resource: Resource, spec: dict[str, Any]) -> str | None:
    """Why an unsuspended smoke Job runs unapproved (the program's approval annotation), or None."""
    suspend = spec.get("suspend")
    approved = resource.annotation(vocab.APPROVED_ANNOTATION)
    if suspend is UNKNOWN or approved is UNKNOWN or suspend is True or approved == "true":
        return None
    return (
        f"spec.suspend is {show(suspend)} (absent means false) but annotation "
        f"{vocab.APPROVED_ANNOTATION} is {show(approved)}, so the Job starts GPU "
        "work nobody approved. Keep spec.suspend: true, or approve exactly this "
        f"cohort in {SMOKE_APPROVED_PATH}"
    )


def _smoke_job_run_findings(spec: dict[str, Any], max_deadline: int) -> Iterator[JobFinding]:
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not UNKNOWN:
        seconds = _number(deadline)
        field = "spec.activeDeadlineSeconds"
        if seconds is None or seconds <= 0:
            yield JobFinding(
                field,
                f"{field} is {show(deadline)}, so the Job is unbounded",
                f"Set {{target}} to 1..{max_deadline}",
                SMOKE_DEADLINE_PATH,
            )
        elif seconds > max_deadline:
            yield JobFinding(
                field,
                f"{field} is {show(deadline)}, above the maximum {max_deadline}",
                f"Set {{target}} to at most {max_deadline}",
                SMOKE_DEADLINE_PATH,
            )
    backoff = spec.get("backoffLimit")
    if backoff is not UNKNOWN and _number(backoff) != 0:
        yield JobFinding(
            "spec.backoffLimit",
            f"spec.backoffLimit is {show(backoff)} (absent means 6), so a failing GPU check is retried",
            "Set it to 0",
            template=True,
        )
    ttl = spec.get("ttlSecondsAfterFinished")
    if ttl is not UNKNOWN:
        seconds = _number(ttl)
        if seconds is None or seconds < 0:
            yield JobFinding(
                "spec.ttlSecondsAfterFinished",
                f"spec.ttlSecondsAfterFinished is {show(ttl)}, so finished Jobs and their Pods are never cleaned up",
                "Set it (capture the result before the TTL)",
                template=True,
            )


def _effective(container: Container, pod_context: dict[str, Any], key: str) -> Any:
    context = dig(container.spec, "securityContext")
    if context is UNKNOWN:
        return UNKNOWN
    value = as_dict(context).get(key)
    return pod_context.get(key) if value is None else value


def service_account_name(pod: dict[str, Any]) -> Any:
    """The pod's ServiceAccount as the API server sets it (UNKNOWN during preview).

    ``serviceAccountName``, else the deprecated ``serviceAccount``, else ``default``.
    """
    for key in ("serviceAccountName", "serviceAccount"):
        value = pod.get(key)
        if value is UNKNOWN or (isinstance(value, str) and value):
            return value
    return "default"


def token_left_to_service_account(pod: dict[str, Any]) -> bool:
    """The pod leaves ``automountServiceAccountToken`` unset and names its own ServiceAccount: that one decides.

    The ServiceAccount admission plugin mounts a token unless the pod says false, or the pod says nothing and its
    ServiceAccount says false (``shouldAutomount``, kubernetes ``plugin/pkg/admission/serviceaccount/admission.go``).
    A resource policy cannot see the ServiceAccount: smoke-job-token-unmounted judges these pods with the stack. The
    ``default`` ServiceAccount is no exception: the controller creates it mounting tokens, but a stack that manages it
    (a ServiceAccountPatch, or an imported ServiceAccount) with ``automountServiceAccountToken: false`` stops that.
    """
    return pod.get("automountServiceAccountToken") is None


def _smoke_job_pod_findings(pod: dict[str, Any]) -> Iterator[JobFinding]:
    automount = pod.get("automountServiceAccountToken")
    if automount is not UNKNOWN and automount is not False and not token_left_to_service_account(pod):
        yield JobFinding(
            "automountServiceAccountToken",
            f"automountServiceAccountToken is {show(automount)}, so the GPU check gets an API token it does not need",
            "Set it to false",
            template=True,
        )
    pod_context = pod.get("securityContext")
    if pod_context is UNKNOWN:
        return
    pod_context = as_dict(pod_context)
    for container in containers(pod):
        where = f"container '{container.name}'"
        yield from _container_findings(container, pod_context, where)


def _container_findings(container: Container, pod_context: dict[str, Any], where: str) -> Iterator[JobFinding]:
    non_root = _effective(container, pod_context, "runAsNonRoot")
    if non_root is not UNKNOWN and non_root is not True:
        yield JobFinding(
            f"{where} runAsNonRoot",
            f"{where} runAsNonRoot is {show(non_root)}",
            "Set runAsNonRoot: true with a non-root runAsUser",
            template=True,
        )
    user = _effective(container, pod_context, "runAsUser")
    if user is not UNKNOWN:
        uid = _number(user)
        if uid is None or uid <= 0:
            yield JobFinding(
                f"{where} runAsUser",
                f"{where} runAsUser is {show(user)}; the smoke Job runs as an explicit non-root UID (e.g. 65532)",
                "Set one",
                template=True,
            )
    seccomp = _effective(container, pod_context, "seccompProfile")
    if seccomp is not UNKNOWN:
        kind = as_dict(seccomp).get("type")
        if kind is not UNKNOWN and kind != "RuntimeDefault":
            yield JobFinding(
                f"{where} seccompProfile.type",
                f"{where} seccompProfile.type is {show(kind)}",
                "Set seccompProfile.type: RuntimeDefault",
                template=True,
            )
    context = container.spec.get("securityContext")
    if context is UNKNOWN:
        return
    context = as_dict(context)
    checks: Sequence[tuple[str, Any, bool]] = (
        ("allowPrivilegeEscalation", context.get("allowPrivilegeEscalation"), False),
        ("readOnlyRootFilesystem", context.get("readOnlyRootFilesystem"), True),
    )
    for key, value, wanted in checks:
        if value is not UNKNOWN and value is not wanted:
            field = f"{where} securityContext.{key}"
            yield JobFinding(field, f"{field} is {show(value)}", f"Set it to {show(wanted)}", template=True)
    privileged = context.get("privileged")
    if privileged is True:
        yield JobFinding(f"{where} privileged", f"{where} is privileged", "Remove privileged: true", template=True)
    capabilities = context.get("capabilities")
    if capabilities is not UNKNOWN:
        drop = as_list(as_dict(capabilities).get("drop"))
        added = as_list(as_dict(capabilities).get("add"))
        if UNKNOWN not in drop and "ALL" not in drop:
            field = f"{where} capabilities.drop"
            yield JobFinding(field, f"{field} is {show(drop)}", 'Drop ["ALL"]', template=True)
        if added and UNKNOWN not in added:
            field = f"{where} capabilities.add"
            yield JobFinding(field, f"{field} is {show(added)}", "Add no capabilities", template=True)
    image = container.spec.get("image")
    if image is not UNKNOWN and (not isinstance(image, str) or grammar.DIGEST_IMAGE.fullmatch(image) is None):
        yield JobFinding(
            f"{where} image",
            f"{where} image is {show(image)}, not pinned by an @sha256: digest, so the tested image can change under "
            "the same tag",
            "Set {target} to an approved image@sha256:<64 hex> reference",
            SMOKE_IMAGE_PATH,
            manifest_target="the container image",
        )


def _smoke_job(args: ResourceValidationArgs) -> tuple[Resource, dict[str, Any]] | None:
    """The smoke Job and its spec, or None (reported not applicable)."""
    if not args.resource_type.startswith("kubernetes:") or not args.resource_type.endswith(":Job"):
        args.not_applicable("not a Job")  # said from the type alone: the props are not copied
        return None
    resource = Resource.from_args(args)
    if resource.kind != "Job" or not resource.is_kubernetes:
        args.not_applicable("not a Job")
        return None
    smoke = resource.label(vocab.SMOKE_JOB_LABEL)
    if smoke is UNKNOWN:
        args.not_applicable("labels unknown during preview")
        return None
    if not resource.is_smoke_job:
        args.not_applicable(
            f"not a smoke Job (label {vocab.SMOKE_JOB_LABEL}=true, or a GPU Job named as a smoke/validation Job)"
        )
        return None
    spec = resource.props.get("spec")
    if spec is UNKNOWN:
        args.not_applicable("the Job spec is unknown during preview")
        return None
    return resource, as_dict(spec)


def smoke_job_hardened_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse smoke Jobs that run unapproved (this program's), unbounded or without hardening (any)."""
    found = _smoke_job(args)
    if found is None:
        return
    resource, spec = found
    max_deadline = config_int(args.get_config(), "maxActiveDeadlineSeconds", _DEFAULT_MAX_DEADLINE)
    # Approval (suspend until approved) is this program's workflow: its own stamped Job is refused here; a Job
    # this program did not build gets the advisory smoke-job-run-approved instead.
    approval = _approval_problem(resource, spec) if resource.stamped else None
    if approval is not None:
        report_violation(f"{resource.describe}: {approval}.", None)
    findings = list(_smoke_job_run_findings(spec, max_deadline))
    pod = dig(spec, "template", "spec")
    if isinstance(pod, dict):
        findings += _smoke_job_pod_findings(pod)
    for finding in findings:
        report_violation(f"{resource.describe}: {finding.text(resource.stamped)}.", None)


def smoke_job_run_approved_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Advise on an unsuspended GPU smoke Job that this program did not build: it must be the approved run."""
    found = _smoke_job(args)
    if found is None:
        return
    resource, spec = found
    if resource.stamped:
        args.not_applicable("a smoke Job of this program: smoke-job-hardened enforces its approval")
        return
    suspend = spec.get("suspend")
    if suspend is UNKNOWN:
        args.not_applicable("spec.suspend is unknown during preview")
        return
    if suspend is True:
        return
    report_violation(
        f"{resource.describe}: spec.suspend is {show(suspend)} (absent means false), so this GPU smoke Job runs "
        "as soon as it is applied. The guide keeps smoke Jobs suspended and unsuspends only the intended Job "
        "through the normal deployment process (rule smoke-job-run-approved): confirm this is that approved run, "
        "or set spec.suspend: true in the Job's manifest.",
        None,
    )


_JOB: Final = frozenset({"Job"})


def _reads_jobs(resource: Resource) -> bool:
    return resource.is_kubernetes and resource.kind == "Job"


SMOKE_JOB_HARDENED = resource_policy(
    "smoke-job-hardened",
    (
        "GPU smoke Jobs stay suspended unless approved and are bounded, non-root, "
        "read-only, capability-free, token-free and pinned by image digest."
    ),
    fail_closed(_reads_jobs, _JOB)(smoke_job_hardened_validator),
    severity=Severity.HIGH,
    remediation=(
        f"Keep the Job suspended until {SMOKE_APPROVED_PATH} names its cohort; set "
        f"{SMOKE_IMAGE_PATH} to an approved image@sha256 digest and "
        f"{SMOKE_DEADLINE_PATH} within the maximum; keep backoffLimit 0, a TTL, "
        "runAsNonRoot with a UID, RuntimeDefault seccomp, no privilege escalation, a "
        "read-only root filesystem, drop ALL and no service-account token."
    ),
    url="https://kubernetes.io/docs/concepts/security/pod-security-standards/",
    tags=["workloads", "smoke-job"],
    config={
        "maxActiveDeadlineSeconds": {
            "type": "integer",
            "minimum": 1,
            "default": _DEFAULT_MAX_DEADLINE,
            "description": "Largest activeDeadlineSeconds a smoke Job may set.",
        }
    },
)


SMOKE_JOB_RUN_APPROVED = resource_policy(
    "smoke-job-run-approved",
    (
        "A GPU smoke Job that this program did not build and that is not suspended is the approved run: the guide "
        "unsuspends only the intended Job through the normal deployment process (advisory: the pack cannot see "
        "another program's approval)."
    ),
    fail_closed(_reads_jobs, _JOB)(smoke_job_run_approved_validator),
    severity=Severity.MEDIUM,
    remediation=(
        "Keep GPU smoke Jobs suspended (spec.suspend: true) and unsuspend only the intended Job through the normal "
        f"deployment process; this program's own smoke Jobs follow {SMOKE_APPROVED_PATH}."
    ),
    url="https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job",
    tags=["workloads", "smoke-job", "review"],
    level=EnforcementLevel.ADVISORY,
)
