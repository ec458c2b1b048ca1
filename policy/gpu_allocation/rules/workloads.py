"""Workload policies: hardened smoke Jobs and well-formed GPU requests.

Seed: smoke Jobs are "suspended by default", bounded, non-root, read-only, pinned by
digest; "Do not set CUDA_VISIBLE_DEVICES"; "Do not request the same GPU through both
mechanisms". Time-slicing and MIG live in :mod:`.sharing`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from ..vocab import grammar
from ..vocab import labels as vocab
from ..vocab.grammar import parse_quantity
from .installations import StackView, not_applicable_unless_unreadable
from .props import (
    UNKNOWN,
    as_dict,
    as_list,
    config_int,
    config_strings,
    dig,
    show,
)
from .readers import CANNOT_JUDGE, EnvLookup, effective_env, report_findings
from .shapes import (
    POD_SPEC_PATHS,
    PROJECT,
    Container,
    Resource,
    containers,
    fail_closed,
    is_device_plugin_gpu,
    pod_claims,
    reads_pods,
)

# --------------------------------------------------------------------------- helpers

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


def _pod_or_not_applicable(
    args: ResourceValidationArgs,
) -> tuple[Resource, dict[str, Any]] | None:
    resource = Resource.from_args(args)
    pod = resource.pod_spec
    if pod is None:
        args.not_applicable("not a workload with a pod template")
        return None
    if pod is UNKNOWN:
        args.not_applicable("the pod template is unknown during preview")
        return None
    return resource, pod


def _workload_path(resource: Resource) -> str:
    return resource.config_path("", f"the manifest of {resource.describe}")


# --------------------------------------------------------------------------- smoke Job


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


def _smoke_job_pod_findings(pod: dict[str, Any]) -> Iterator[JobFinding]:
    automount = pod.get("automountServiceAccountToken")
    if automount is not UNKNOWN and automount is not False:
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


# --------------------------------------------------------------------------- requests


def request_shape_problems(pod: dict[str, Any], prefixes: Sequence[str]) -> list[str]:
    """Fractional, request-only and unequal extended GPU resources in a pod spec."""
    problems: list[str] = []
    for container in containers(pod):
        resources = container.spec.get("resources")
        if resources is UNKNOWN:
            continue
        requests_raw = as_dict(resources).get("requests")
        limits_raw = as_dict(resources).get("limits")
        if requests_raw is UNKNOWN or limits_raw is UNKNOWN:
            continue
        requests, limits = as_dict(requests_raw), as_dict(limits_raw)
        names = sorted(n for n in {*requests, *limits} if n.startswith(tuple(prefixes)))
        for name in names:
            problems += _one_resource_problems(container, name, requests, limits)
    return problems


def _one_resource_problems(
    container: Container,
    name: str,
    requests: dict[str, Any],
    limits: dict[str, Any],
) -> list[str]:
    problems: list[str] = []
    where = f"container '{container.name}'"
    parsed: dict[str, Any] = {}
    for which, table in (("requests", requests), ("limits", limits)):
        if name not in table:
            continue
        value = table[name]
        if value is UNKNOWN:
            parsed[which] = UNKNOWN
            continue
        quantity = parse_quantity(value)
        parsed[which] = quantity
        if quantity is None or quantity.denominator != 1 or quantity < 0:
            problems.append(
                f"{where} {which}['{name}'] is {show(value)}: extended GPU resources "
                "are whole, non-negative device counts (no fractions or milli-units); "
                "request whole devices, or share GPUs through time-slicing or MIG"
            )
    request, limit = parsed.get("requests"), parsed.get("limits")
    if request is UNKNOWN or limit is UNKNOWN:
        return problems
    if "requests" in parsed and "limits" not in parsed:
        problems.append(
            f"{where} requests['{name}'] is {show(requests[name])} without a limit: "
            f"extended resources need limits equal to requests; set limits['{name}'] "
            f"to {show(requests[name])}"
        )
    elif (
        request is not None
        and limit is not None
        and request is not UNKNOWN
        and limit is not UNKNOWN
        and request != limit
    ):
        problems.append(
            f"{where} requests['{name}'] is {show(requests[name])} but limits"
            f"['{name}'] is {show(limits[name])}: GPU requests must equal limits "
            "(devices are not overcommitted); set both to the same whole number"
        )
    return problems


def gpu_request_shape_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse fractional GPU requests and requests that differ from limits."""
    found = _pod_or_not_applicable(args)
    if found is None:
        return
    resource, pod = found
    prefixes = config_strings(args.get_config(), "resourcePrefixes", ("nvidia.com/",))
    for problem in request_shape_problems(pod, prefixes):
        report_violation(f"{resource.describe}: {problem} (in {_workload_path(resource)}).", None)


def gpu_consumers(pod: dict[str, Any]) -> list[tuple[Container, str]]:
    """Containers that get GPUs, with how: device-plugin resources or DRA claims."""
    result: list[tuple[Container, str]] = []
    claims = pod_claims(pod)
    claim_names = [str(as_dict(c).get("name")) for c in claims if isinstance(c, dict)] or ["<pod resourceClaims>"]
    for container in containers(pod):
        devices = sorted(n for n in container.resource_names() if is_device_plugin_gpu(n))
        own_claims = [str(as_dict(c).get("name")) for c in container.claims if isinstance(c, dict)]
        if devices:
            result.append((container, f"the device plugin ({', '.join(devices)})"))
        elif container.claims:
            result.append((container, f"DRA claim(s) {', '.join(own_claims) or '<unnamed>'}"))
        elif claims:
            result.append((container, f"the pod's DRA resourceClaims ({', '.join(claim_names)})"))
    return result


def visible_devices_problems(pod: dict[str, Any], forbidden: Sequence[str], lookup: EnvLookup) -> list[str]:
    """Overrides of the visible devices in containers that get GPUs, through env, valueFrom or envFrom.

    A container whose ``envFrom`` names an object that is not in the stack cannot be judged: it is refused.
    """
    problems: list[str] = []
    names = ", ".join(forbidden)
    for container, how in gpu_consumers(pod):
        env = effective_env(container.spec, lookup)
        for name in forbidden:
            entry = env.entries.get(name)
            if entry is None:
                continue
            shown = f"{name}={show(entry.value)}" if entry.source == "env" else f"{name} ({entry.source})"
            fix = f"Remove {name} from the env" + ("" if entry.source == "env" else f" and from {entry.source}")
            problems.append(
                f"container '{container.name}' gets GPUs through {how} and sets env "
                f"{shown}. The device plugin/DRA driver and the runtime "
                "supply the assigned devices, and CUDA's process-visible indices can "
                "differ from physical ones, so the override can hide or misidentify "
                f"the allocation and grants no extra GPUs. {fix}"
            )
        for why in env.cannot_tell:
            problems.append(
                f"container '{container.name}' gets GPUs through {how} and {why}: whether it sets {names} "
                f"cannot be told, {CANNOT_JUDGE}. Put that object in this stack, or set the container's env "
                "explicitly"
            )
    return problems


def _env_lookup(view: StackView, resource: Resource) -> EnvLookup:
    """Find a ConfigMap or Secret of the workload's namespace among the stack's objects (props or UNKNOWN)."""
    namespace = resource.metadata.get("namespace")

    def lookup(kind: str, name: str) -> Any:
        for candidate in view.named(kind, name):
            other_namespace = candidate.metadata.get("namespace")
            if other_namespace is UNKNOWN:
                return UNKNOWN
            if not isinstance(namespace, str) or not isinstance(other_namespace, str) or other_namespace == namespace:
                return candidate.props
        return None

    return lookup


def no_visible_devices_override_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse CUDA/NVIDIA_VISIBLE_DEVICES in containers that get GPUs, however the env is built."""
    view = StackView.from_args(args, _ENV_KINDS)
    forbidden = config_strings(
        args.get_config(),
        "forbiddenEnvVars",
        ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
    )
    judged = False
    for resource, pod in view.workloads():
        judged = True
        for problem in visible_devices_problems(pod, forbidden, _env_lookup(view, resource)):
            report_violation(f"{resource.describe}: {problem} (in {_workload_path(resource)}).", resource.urn)
    if not judged:
        not_applicable_unless_unreadable(args, view, "no workload with a pod template", report_violation, reads_pods)
        return
    report_findings(view.problems(reads_pods), report_violation)


_ENV_KINDS: Final = frozenset({*POD_SPEC_PATHS, "ConfigMap", "Secret"})


def dual_allocation_problem(pod: dict[str, Any]) -> str | None:
    """Describe a pod that asks for device-plugin GPUs and a DRA claim at once."""
    device_requests = sorted(
        f"{name} (container '{c.name}')"
        for c in containers(pod)
        for name in c.resource_names()
        if is_device_plugin_gpu(name)
    )
    claimers = [c.name for c in containers(pod) if c.claims]
    claims = [str(as_dict(c).get("name")) for c in pod_claims(pod) if isinstance(c, dict)]
    if not device_requests or not (claimers or pod_claims(pod)):
        return None
    claim_text = ", ".join(claims) if claims else "claims of " + ", ".join(claimers)
    return (
        f"requests {', '.join(device_requests)} through the device plugin and DRA "
        f"claim(s) {claim_text} at once. The two mechanisms can hand out the same "
        "physical GPUs, so the pod double-allocates (or never schedules). Request GPUs "
        "through one mechanism: nvidia.com/gpu on a device-plugin cohort, or "
        "resourceClaims on a DRA cohort"
    )


def no_dual_allocation_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse pods that request nvidia.com/gpu* and a DRA claim at once."""
    found = _pod_or_not_applicable(args)
    if found is None:
        return
    resource, pod = found
    problem = dual_allocation_problem(pod)
    if problem is not None:
        report_violation(f"{resource.describe}: {problem} (in {_workload_path(resource)}).", None)


# --------------------------------------------------------------------------- policies


_JOB: Final = frozenset({"Job"})


def _reads_jobs(resource: Resource) -> bool:
    return resource.is_kubernetes and resource.kind == "Job"


_ANY_POD: Final = "Job, CronJob, Deployment, DaemonSet, StatefulSet, ReplicaSet or Pod"

SMOKE_JOB_HARDENED = ResourceValidationPolicy(
    name="smoke-job-hardened",
    description=(
        "GPU smoke Jobs stay suspended unless approved and are bounded, non-root, "
        "read-only, capability-free, token-free and pinned by image digest."
    ),
    validate=fail_closed(_reads_jobs, _JOB)(smoke_job_hardened_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "maxActiveDeadlineSeconds": {
                "type": "integer",
                "minimum": 1,
                "default": _DEFAULT_MAX_DEADLINE,
                "description": "Largest activeDeadlineSeconds a smoke Job may set.",
            }
        }
    ),
    remediation_steps=(
        f"Keep the Job suspended until {SMOKE_APPROVED_PATH} names its cohort; set "
        f"{SMOKE_IMAGE_PATH} to an approved image@sha256 digest and "
        f"{SMOKE_DEADLINE_PATH} within the maximum; keep backoffLimit 0, a TTL, "
        "runAsNonRoot with a UID, RuntimeDefault seccomp, no privilege escalation, a "
        "read-only root filesystem, drop ALL and no service-account token."
    ),
    url="https://kubernetes.io/docs/concepts/security/pod-security-standards/",
    tags=["workloads", "smoke-job"],
)

GPU_REQUEST_SHAPE = ResourceValidationPolicy(
    name="gpu-request-shape",
    description=(
        "Extended GPU resources (nvidia.com/*) in any pod template are whole numbers "
        "and their requests equal their limits."
    ),
    validate=fail_closed(reads_pods)(gpu_request_shape_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "resourcePrefixes": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["nvidia.com/"],
                "description": "Resource-name prefixes treated as GPU resources.",
            }
        }
    ),
    remediation_steps=(
        f"In the {_ANY_POD} manifest, request whole devices (1, 2, ...) and set "
        "limits equal to requests; share GPUs through time-slicing or MIG "
        f"({PROJECT}:cohorts[i].sharing), never with fractions."
    ),
    url=("https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources"),
    tags=["workloads", "gpu"],
)

NO_VISIBLE_DEVICES_OVERRIDE = StackValidationPolicy(
    name="no-visible-devices-override",
    description=(
        "Containers that get GPUs through the device plugin or a DRA claim do not set "
        "CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES."
    ),
    validate=no_visible_devices_override_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "forbiddenEnvVars": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"],
                "description": "Env names a GPU-consuming container may not set.",
            }
        }
    ),
    remediation_steps=(
        "Remove CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES from the env of every "
        "container that requests nvidia.com/gpu*, nvidia.com/mig-* or a DRA claim; the "
        "allocator and runtime expose exactly the assigned devices. The program's smoke "
        f"Jobs never set them ({PROJECT}:smokeJobs); fix other workloads' manifests."
    ),
    url=("https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/"),
    tags=["workloads", "gpu"],
)

NO_DUAL_ALLOCATION = ResourceValidationPolicy(
    name="no-dual-allocation",
    description=(
        "A pod never requests device-plugin GPUs (nvidia.com/gpu*, nvidia.com/mig-*) "
        "and a DRA resource claim at the same time."
    ),
    validate=fail_closed(reads_pods)(no_dual_allocation_validator),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    # Nothing to tune: only the enforcement level is configurable (one mechanism per pod).
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        "Pick one mechanism per pod: nvidia.com/gpu requests on a device-plugin cohort, "
        "or resourceClaims (resourceClaimTemplateName) on a DRA cohort; the smoke Jobs "
        f"follow the owner in {PROJECT}:cohorts[i].owner."
    ),
    url=("https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/"),
    tags=["workloads", "gpu", "dra"],
)

SMOKE_JOB_RUN_APPROVED = ResourceValidationPolicy(
    name="smoke-job-run-approved",
    description=(
        "A GPU smoke Job that this program did not build and that is not suspended is the approved run: the guide "
        "unsuspends only the intended Job through the normal deployment process (advisory: the pack cannot see "
        "another program's approval)."
    ),
    validate=fail_closed(_reads_jobs, _JOB)(smoke_job_run_approved_validator),
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        "Keep GPU smoke Jobs suspended (spec.suspend: true) and unsuspend only the intended Job through the normal "
        f"deployment process; this program's own smoke Jobs follow {SMOKE_APPROVED_PATH}."
    ),
    url="https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job",
    tags=["workloads", "smoke-job", "review"],
)

POLICIES: Final = (
    SMOKE_JOB_HARDENED,
    SMOKE_JOB_RUN_APPROVED,
    GPU_REQUEST_SHAPE,
    NO_VISIBLE_DEVICES_OVERRIDE,
    NO_DUAL_ALLOCATION,
)
