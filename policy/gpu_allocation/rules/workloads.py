"""Workload policies: hardened smoke Jobs and well-formed GPU requests.

Seed: smoke Jobs are "suspended by default", bounded, non-root, read-only, pinned by
digest; "Do not set CUDA_VISIBLE_DEVICES"; "Do not request the same GPU through both
mechanisms"; with time-slicing ``renameByDefault: true`` "the advertised resource is
nvidia.com/gpu.shared" and "an unattached ConfigMap changes nothing"; "changing a Pod
request to nvidia.com/mig-1g.5gb does not create the MIG instance. Prepare the actual
MIG geometry and the plugin's appropriate strategy first."
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
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

from ..vocab import gpu_models
from ..vocab import labels as vocab
from ..vocab.grammar import parse_quantity
from .installations import (
    Installation,
    Ledger,
    StackView,
)
from .parsing import TOO_DEEP, load_yaml
from .props import (
    UNKNOWN,
    as_dict,
    as_list,
    config_int,
    config_mapping,
    config_strings,
    contains_unknown,
    dig,
    one_of,
    show,
    string_map,
)
from .shapes import (
    CONFIG_MAP_TYPE,
    DEVICE_PLUGIN,
    GPU_OPERATOR,
    PROJECT,
    Container,
    Resource,
    containers,
    is_device_plugin_gpu,
    pod_claims,
    pod_node_selector,
    selector_confines,
)

# --------------------------------------------------------------------------- MIG data

# The profile names per GPU model come from the one table the program also validates against.
MIG_PROFILES: Final[Mapping[str, frozenset[str]]] = {
    model: frozenset(profiles) for model, profiles in gpu_models.MIG_PROFILES.items()
}
ALL_MIG_PROFILES: Final = frozenset().union(*MIG_PROFILES.values())
MIG_PREFIX: Final = "nvidia.com/mig-"
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
"""GFD node label with the product name, e.g. ``NVIDIA-A100-SXM4-40GB``."""


def normalize_gpu_model(value: Any) -> str | None:
    """Map a model name or GFD product label to a :data:`MIG_PROFILES` key."""
    if not isinstance(value, str):
        return None
    text = value.upper().replace("_", "-").replace(" ", "-")
    family = re.search(r"(A100|H100|H200)", text)
    if family is None:
        return None
    memory = re.search(r"(\d+)\s*GB?\b", text[family.end() :])
    if family.group(1) == "H200":
        return "H200-141GB" if memory is None or memory.group(1) == "141" else None
    if memory is None:
        return None
    key = f"{family.group(1)}-{memory.group(1)}GB"
    return key if key in MIG_PROFILES else None


def normalize_profile(resource_name: str) -> str:
    """``nvidia.com/mig-1g.5gb.me`` -> ``1g.5gb+me`` (``+`` is not valid in names)."""
    profile = resource_name[len(MIG_PREFIX) :]
    if profile.endswith(".me"):
        profile = profile[: -len(".me")] + "+me"
    return profile


# --------------------------------------------------------------------------- helpers

_DIGEST_RE: Final = re.compile(r"@sha256:[0-9a-f]{64}$")
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


def _smoke_job_run_findings(resource: Resource, spec: dict[str, Any], max_deadline: int) -> Iterator[str]:
    suspend = spec.get("suspend")
    approved = resource.annotation(vocab.APPROVED_ANNOTATION)
    if suspend is not UNKNOWN and approved is not UNKNOWN and suspend is not True:
        if approved != "true":
            yield (
                f"spec.suspend is {show(suspend)} (absent means false) but annotation "
                f"{vocab.APPROVED_ANNOTATION} is {show(approved)}, so the Job starts GPU "
                "work nobody approved. Keep spec.suspend: true, or approve exactly this "
                f"cohort in {SMOKE_APPROVED_PATH}"
            )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not UNKNOWN:
        seconds = _number(deadline)
        if seconds is None or seconds <= 0:
            yield (
                f"spec.activeDeadlineSeconds is {show(deadline)}, so the Job is "
                f"unbounded. Set {SMOKE_DEADLINE_PATH} to 1..{max_deadline}"
            )
        elif seconds > max_deadline:
            yield (
                f"spec.activeDeadlineSeconds is {show(deadline)}, above the maximum "
                f"{max_deadline}. Set {SMOKE_DEADLINE_PATH} to at most {max_deadline}"
            )
    backoff = spec.get("backoffLimit")
    if backoff is not UNKNOWN and _number(backoff) != 0:
        yield (
            f"spec.backoffLimit is {show(backoff)} (absent means 6), so a failing GPU "
            f"check is retried. Set it to 0: {_TEMPLATE_FIX}"
        )
    ttl = spec.get("ttlSecondsAfterFinished")
    if ttl is not UNKNOWN:
        seconds = _number(ttl)
        if seconds is None or seconds < 0:
            yield (
                f"spec.ttlSecondsAfterFinished is {show(ttl)}, so finished Jobs and "
                f"their Pods are never cleaned up. Set it (capture the result before the "
                f"TTL): {_TEMPLATE_FIX}"
            )


def _effective(container: Container, pod_context: dict[str, Any], key: str) -> Any:
    context = dig(container.spec, "securityContext")
    if context is UNKNOWN:
        return UNKNOWN
    value = as_dict(context).get(key)
    return pod_context.get(key) if value is None else value


def _smoke_job_pod_findings(pod: dict[str, Any]) -> Iterator[str]:
    automount = pod.get("automountServiceAccountToken")
    if automount is not UNKNOWN and automount is not False:
        yield (
            f"automountServiceAccountToken is {show(automount)}, so the GPU check gets "
            f"an API token it does not need. Set it to false: {_TEMPLATE_FIX}"
        )
    pod_context = pod.get("securityContext")
    if pod_context is UNKNOWN:
        return
    pod_context = as_dict(pod_context)
    for container in containers(pod):
        where = f"container '{container.name}'"
        yield from _container_findings(container, pod_context, where)


def _container_findings(container: Container, pod_context: dict[str, Any], where: str) -> Iterator[str]:
    non_root = _effective(container, pod_context, "runAsNonRoot")
    if non_root is not UNKNOWN and non_root is not True:
        yield (
            f"{where} runAsNonRoot is {show(non_root)}. Set runAsNonRoot: true with a "
            f"non-root runAsUser: {_TEMPLATE_FIX}"
        )
    user = _effective(container, pod_context, "runAsUser")
    if user is not UNKNOWN:
        uid = _number(user)
        if uid is None or uid <= 0:
            yield (
                f"{where} runAsUser is {show(user)}; the smoke Job runs as an explicit "
                f"non-root UID (e.g. 65532): {_TEMPLATE_FIX}"
            )
    seccomp = _effective(container, pod_context, "seccompProfile")
    if seccomp is not UNKNOWN:
        kind = as_dict(seccomp).get("type")
        if kind is not UNKNOWN and kind != "RuntimeDefault":
            yield (
                f"{where} seccompProfile.type is {show(kind)}. Set seccompProfile.type: RuntimeDefault: {_TEMPLATE_FIX}"
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
            yield (f"{where} securityContext.{key} is {show(value)}. Set it to {show(wanted)}: {_TEMPLATE_FIX}")
    privileged = context.get("privileged")
    if privileged is True:
        yield f"{where} is privileged. Remove privileged: true: {_TEMPLATE_FIX}"
    capabilities = context.get("capabilities")
    if capabilities is not UNKNOWN:
        drop = as_list(as_dict(capabilities).get("drop"))
        added = as_list(as_dict(capabilities).get("add"))
        if UNKNOWN not in drop and "ALL" not in drop:
            yield (f'{where} capabilities.drop is {show(drop)}. Drop ["ALL"]: {_TEMPLATE_FIX}')
        if added and UNKNOWN not in added:
            yield (f"{where} capabilities.add is {show(added)}. Add no capabilities: {_TEMPLATE_FIX}")
    image = container.spec.get("image")
    if image is not UNKNOWN and (not isinstance(image, str) or _DIGEST_RE.search(image) is None):
        yield (
            f"{where} image is {show(image)}, not pinned by an @sha256: digest, so the "
            "tested image can change under the same tag. Set "
            f"{SMOKE_IMAGE_PATH} to an approved image@sha256:<64 hex> reference"
        )


def smoke_job_hardened_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse smoke Jobs that run unapproved, unbounded or without hardening."""
    resource = Resource.from_args(args)
    if resource.kind != "Job" or not resource.is_kubernetes:
        args.not_applicable("not a Job")
        return
    smoke = resource.label(vocab.SMOKE_JOB_LABEL)
    if smoke is UNKNOWN:
        args.not_applicable("labels unknown during preview")
        return
    if not resource.is_smoke_job:
        args.not_applicable(
            f"not a smoke Job (label {vocab.SMOKE_JOB_LABEL}=true, or a GPU Job named as a smoke/validation Job)"
        )
        return
    spec = resource.props.get("spec")
    if spec is UNKNOWN:
        args.not_applicable("the Job spec is unknown during preview")
        return
    spec = as_dict(spec)
    max_deadline = config_int(args.get_config(), "maxActiveDeadlineSeconds", _DEFAULT_MAX_DEADLINE)
    findings = list(_smoke_job_run_findings(resource, spec, max_deadline))
    if not resource.stamped:
        # Approval (suspend until approved) is this program's workflow; a foreign Job is judged on its hardening,
        # and the fix names the Job's own field instead of a stack-config path.
        findings = [_foreign_fix(f) for f in findings if not f.startswith("spec.suspend")]
    pod = dig(spec, "template", "spec")
    if isinstance(pod, dict):
        pod_findings = list(_smoke_job_pod_findings(pod))
        findings += pod_findings if resource.stamped else [_foreign_fix(f) for f in pod_findings]
    for finding in findings:
        report_violation(f"{resource.describe}: {finding}.", None)


def _foreign_fix(finding: str) -> str:
    """Point a finding's fix at the Job's own manifest (a Job this program did not build has no stack config)."""
    return (
        finding.replace(f"{SMOKE_IMAGE_PATH} to", "the container image to")
        .replace(f"{SMOKE_DEADLINE_PATH} to", "spec.activeDeadlineSeconds to")
        .replace(_TEMPLATE_FIX, _FOREIGN_TEMPLATE_FIX)
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


def visible_devices_problems(pod: dict[str, Any], forbidden: Sequence[str]) -> list[str]:
    """Env overrides of the visible devices in containers that get GPUs."""
    problems: list[str] = []
    for container, how in gpu_consumers(pod):
        for entry in container.env:
            name = entry.get("name")
            if name not in forbidden:
                continue
            value = entry.get("value", entry.get("valueFrom"))
            problems.append(
                f"container '{container.name}' gets GPUs through {how} and sets env "
                f"{name}={show(value)}. The device plugin/DRA driver and the runtime "
                "supply the assigned devices, and CUDA's process-visible indices can "
                "differ from physical ones, so the override can hide or misidentify "
                f"the allocation and grants no extra GPUs. Remove {name} from the env"
            )
    return problems


def no_visible_devices_override_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse CUDA/NVIDIA_VISIBLE_DEVICES in containers that get GPUs."""
    found = _pod_or_not_applicable(args)
    if found is None:
        return
    resource, pod = found
    forbidden = config_strings(
        args.get_config(),
        "forbiddenEnvVars",
        ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
    )
    for problem in visible_devices_problems(pod, forbidden):
        report_violation(f"{resource.describe}: {problem} (in {_workload_path(resource)}).", None)


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


# --------------------------------------------------------------------------- cohorts


def _ledger_sharing(ledger: Ledger | None, cohorts: Sequence[str]) -> tuple[Any, Any]:
    """(sharing annotation-like value, gpuModel) recorded in the ledger."""
    if ledger is None or not ledger.known:
        return None, None
    for name in cohorts:
        sharing = as_dict(ledger.cohorts.get(name)).get("sharing")
        if isinstance(sharing, str):
            return sharing, None
        if isinstance(sharing, dict):
            mode = sharing.get("mode")
            strategy = sharing.get("migStrategy")
            if mode == "mig" and one_of(strategy, ("single", "mixed")):
                mode = f"mig-{strategy}"
            model = sharing.get("gpuModel")
            return (
                mode if isinstance(mode, str) else None,
                model if isinstance(model, str) else None,
            )
    return None, None


@dataclass
class _PluginCohort:
    install: Installation
    selector: dict[str, str] | None
    names: list[str]
    sharing: Any
    gpu_model: Any

    def confines(self, workload: Resource, node_selector: dict[str, Any]) -> bool:
        if workload.cohort is not None and workload.cohort in self.names:
            return True
        return self.selector is not None and selector_confines(node_selector, self.selector)

    @property
    def title(self) -> str:
        names = ", ".join(self.names)
        return f"{self.install.resource.describe}" + (f" (cohort {names})" if names else "")


def _plugin_cohorts(view: StackView, ledger: Ledger | None) -> list[_PluginCohort]:
    result = []
    for install in view.by_owner(DEVICE_PLUGIN):
        selector = install.selector
        names = install.cohorts
        sharing, model = _ledger_sharing(ledger, names)
        result.append(
            _PluginCohort(
                install,
                selector if isinstance(selector, dict) else None,
                names,
                install.sharing or sharing,
                model,
            )
        )
    return result


def _workload_requests(
    view: StackView,
) -> Iterator[tuple[Resource, dict[str, Any], Container, str, Any]]:
    """(workload, nodeSelector, container, resource name, request value)."""
    for resource, pod in view.workloads():
        node_selector = pod_node_selector(pod)
        if node_selector is UNKNOWN:
            continue
        for container in containers(pod):
            table = {**container.limits, **container.requests}
            for name, value in sorted(table.items()):
                yield resource, node_selector, container, name, value


# --------------------------------------------------------------------------- time-slicing


@dataclass
class _SharingConfig:
    documents: dict[str, Any]
    default_key: str | None
    default_text: Any
    errors: list[str]
    where: str
    """Where the config documents live, e.g. ``… Chart 'x' values config.map`` or ``… ConfigMap 'y' (…) data``."""
    selector: str
    """What selects the default, e.g. ``… Chart 'x' values: … config.default`` (subject, field)."""
    selector_field: str


_CONFIG_VOLUME: Final = "available-configs"
_CONFIG_MANAGER: Final = "config-manager"


def _load_documents(source: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    documents: dict[str, Any] = {}
    errors: list[str] = []
    for key, text in source.items():
        if isinstance(text, dict):
            documents[key] = text
        elif isinstance(text, str):
            document, error = load_yaml(text)
            if error is None:
                documents[key] = document
            elif error != TOO_DEEP:
                errors.append(f"config '{key}' {error}")
    return documents, errors


def _default_key(documents: dict[str, Any], default: Any, fallbacks: list[Any]) -> str | None:
    if isinstance(default, str) and default:
        return default if default in documents else None
    if "named" in fallbacks and "default" in documents:
        return "default"
    if "single" in fallbacks and len(documents) == 1:
        return next(iter(documents))
    return None


def _find_config_map(view: StackView, install: Installation, name: str, namespace: Any) -> Resource | None:
    candidates = [*install.children, *view.resources]
    for resource in candidates:
        if resource.resource_type != CONFIG_MAP_TYPE or resource.metadata.get("name") != name:
            continue
        other = resource.metadata.get("namespace")
        if isinstance(namespace, str) and isinstance(other, str) and other != namespace:
            continue
        return resource
    return None


def config_volume_name(pod: dict[str, Any]) -> Any:
    """The ConfigMap a device-plugin pod mounts as its configs (``available-configs``): name, None, UNKNOWN."""
    volumes = pod.get("volumes")
    if volumes is UNKNOWN:
        return UNKNOWN
    for volume in as_list(volumes):
        if isinstance(volume, dict) and volume.get("name") == _CONFIG_VOLUME:
            name = dig(volume, "configMap", "name")
            return name if name is UNKNOWN or isinstance(name, str) else None
    return None


def _values_sharing_config(install: Installation, view: StackView) -> Any:
    config = install.value("config")
    if config is UNKNOWN or contains_unknown(config):
        return UNKNOWN
    if not isinstance(config, dict):
        return None
    config_map = config.get("map")
    name = config.get("name")
    source: Mapping[str, Any] = {}
    if isinstance(config_map, dict) and config_map:
        source = config_map
    elif isinstance(name, str) and name:
        for resource in view.resources:
            if resource.resource_type == CONFIG_MAP_TYPE and resource.metadata.get("name") == name:
                source = as_dict(resource.props.get("data"))
                break
    if not source:
        return None
    documents, errors = _load_documents(source)
    default = config.get("default")
    fallbacks = config.get("fallbackStrategies", ["named", "single"])
    fallbacks = fallbacks if isinstance(fallbacks, list) else []
    return _SharingConfig(
        documents,
        _default_key(documents, default, fallbacks),
        default,
        errors,
        f"{install.describe} values config.map",
        f"{install.describe} values",
        "config.default",
    )


def _rendered_sharing_config(install: Installation, view: StackView) -> Any:
    """The config the rendered plugin DaemonSet mounts, and the default its config-manager selects."""
    main = install.main_workload
    pod = main.pod_spec if main is not None else None
    if main is None or not isinstance(pod, dict):
        return UNKNOWN
    name = config_volume_name(pod)
    if name is UNKNOWN:
        return UNKNOWN
    if not isinstance(name, str) or not name:
        return None
    config_map = _find_config_map(view, install, name, main.metadata.get("namespace"))
    if config_map is None:
        return None
    data = config_map.props.get("data")
    if data is UNKNOWN or contains_unknown(data):
        return UNKNOWN
    documents, errors = _load_documents(as_dict(data))
    managers = [c for c in containers(pod) if _CONFIG_MANAGER in c.command_line[:1]]
    default = next((v for c in managers if (v := c.env_value("DEFAULT_CONFIG")) is not None), None)
    fallback_text = next((v for c in managers if (v := c.env_value("FALLBACK_STRATEGIES")) is not None), None)
    if default is UNKNOWN or fallback_text is UNKNOWN:
        return UNKNOWN
    fallbacks: list[Any] = fallback_text.split(",") if isinstance(fallback_text, str) else ["named", "single"]
    return _SharingConfig(
        documents,
        _default_key(documents, default, fallbacks),
        default,
        errors,
        f"{install.rendered(config_map)} data",
        install.rendered(main),
        "the config-manager env DEFAULT_CONFIG (values config.default)",
    )


def _sharing_config(install: Installation, view: StackView) -> Any:
    """Return the plugin's sharing configs: a _SharingConfig, None, or UNKNOWN."""
    if install.inputs_visible:
        return _values_sharing_config(install, view)
    return _rendered_sharing_config(install, view)


def _time_slicing(document: Any) -> dict[str, Any] | None:
    value = dig(document, "sharing", "timeSlicing")
    return value if isinstance(value, dict) else None


def _advertised(time_slicing: dict[str, Any]) -> dict[str, str]:
    """Original resource name -> advertised name under a time-slicing config."""
    rename_default = time_slicing.get("renameByDefault") is True
    renamed: dict[str, str] = {}
    for entry in as_list(time_slicing.get("resources")):
        name = as_dict(entry).get("name")
        if not isinstance(name, str):
            continue
        rename = as_dict(entry).get("rename")
        advertised = rename if isinstance(rename, str) and rename else None
        if advertised is None and rename_default:
            advertised = f"{name}.shared"
        if advertised is not None and advertised != name:
            renamed[name] = advertised
    return renamed


def _check_plugin_sharing(
    cohort: _PluginCohort,
    sharing: Any,
    require_fail: bool,
    report: ReportViolation,
) -> tuple[dict[str, str], bool]:
    """Check one plugin's time-slicing config; return (renames, fails >1 requests)."""
    if sharing is UNKNOWN:
        return {}, False
    install = cohort.install
    subject = install.resource.describe
    path = install.config_path(".sharing", f"{PROJECT}:cohorts[i].sharing")
    urn = install.resource.urn
    if sharing is None:
        if cohort.sharing == "time-slicing":
            carries = (
                "its values carry no config.map or config.name"
                if install.inputs_visible
                else f"its rendered plugin DaemonSet mounts no device-plugin ConfigMap ({_CONFIG_VOLUME})"
            )
            report(
                f"{subject} belongs to a cohort declared time-slicing "
                f"({vocab.SHARING_ANNOTATION}) but {carries}, so no time-slicing config is attached and the GPUs "
                f"stay exclusive. Set {path}.mode and {path}.replicas so the program renders "
                "config.map with config.default pointing at it.",
                urn,
            )
        return {}, False
    for error in sharing.errors:
        report(f"{sharing.where}: {error}. Fix {path}.", urn)
    sliced = {k: t for k, d in sharing.documents.items() if (t := _time_slicing(d))}
    for key, time_slicing in sorted(sliced.items()):
        fail = time_slicing.get("failRequestsGreaterThanOne")
        if require_fail and fail is not True and fail is not UNKNOWN:
            report(
                f"{sharing.where}.{key}: sharing.timeSlicing."
                f"failRequestsGreaterThanOne is {show(fail)}. Without it a pod asking "
                "for several shared replicas is admitted although replicas give no "
                f"proportional compute or memory. Keep it true ({path}).",
                urn,
            )
    if sliced and sharing.default_key not in sliced:
        report(
            f"{sharing.selector}: time-slicing config(s) {', '.join(sorted(sliced))} "
            f"are not selected by {sharing.selector_field} ({show(sharing.default_text)} resolves "
            f"to {show(sharing.default_key)}), so they only apply to nodes labelled "
            "nvidia.com/device-plugin.config=<name>; an unattached config changes "
            f"nothing. Point config.default at the time-slicing config ({path}).",
            urn,
        )
    elif not sliced and cohort.sharing == "time-slicing":
        report(
            f"{subject} belongs to a cohort declared time-slicing but none of its "
            f"device-plugin configs ({', '.join(sorted(sharing.documents))}) has "
            f"sharing.timeSlicing, so the GPUs stay exclusive. Fix {path}.",
            urn,
        )
    chosen = sliced.get(sharing.default_key or "")
    if chosen is None:
        return {}, False
    return _advertised(chosen), chosen.get("failRequestsGreaterThanOne") is True


def _check_unattached_config_maps(view: StackView, report: ReportViolation) -> None:
    referenced = {
        name for install in view.by_owner(DEVICE_PLUGIN) if isinstance(name := install.value("config", "name"), str)
    }
    referenced |= {name for _, pod in view.workloads() if isinstance(name := config_volume_name(pod), str)}
    for resource in view.resources:
        if resource.resource_type != CONFIG_MAP_TYPE or resource.is_ledger:
            continue
        if view.installation_urn(resource) is not None:
            continue
        if resource.label("app.kubernetes.io/name") == "nvidia-device-plugin":
            continue
        data = resource.props.get("data")
        if not isinstance(data, dict):
            continue
        documents, _ = _load_documents(data)
        sliced = sorted(k for k, d in documents.items() if _time_slicing(d))
        if not sliced or one_of(resource.metadata.get("name"), referenced):
            continue
        report(
            f"{resource.describe} holds a time-slicing device-plugin config "
            f"({', '.join(sliced)}) that no device plugin references (config.name), so "
            "it changes nothing: the GPUs stay exclusive. Attach it through the device "
            f"plugin's config.name/config.default ({PROJECT}:cohorts[i].sharing), or "
            "delete it.",
            resource.urn,
        )


def shared_gpu_resource_name_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Check time-slicing configs are attached and workloads ask for shared names."""
    view = StackView.from_args(args)
    config = args.get_config()
    require_fail = config.get("requireFailRequestsGreaterThanOne", True) is not False
    ledger = view.ledger()
    cohorts = _plugin_cohorts(view, ledger)
    config_maps = [r for r in view.resources if r.resource_type == CONFIG_MAP_TYPE]
    if not cohorts and not config_maps:
        args.not_applicable("no device plugin and no ConfigMap in the stack")
        return
    renamed_cohorts: list[tuple[_PluginCohort, dict[str, str], bool]] = []
    for cohort in cohorts:
        if cohort.install.values is UNKNOWN:
            continue
        renames, fail_many = _check_plugin_sharing(
            cohort, _sharing_config(cohort.install, view), require_fail, report_violation
        )
        if renames:
            renamed_cohorts.append((cohort, renames, fail_many))
    _check_unattached_config_maps(view, report_violation)
    for resource, selector, container, name, value in _workload_requests(view):
        for cohort, renames, fail_many in renamed_cohorts:
            if not cohort.confines(resource, selector):
                continue
            path = resource.config_path("", f"the manifest of {resource.describe}")
            if name in renames:
                report_violation(
                    f"{resource.describe}: container '{container.name}' requests "
                    f"{name} but it only runs on {cohort.title}, whose time-slicing "
                    f"config advertises {renames[name]} instead (renameByDefault: "
                    f"true), so the pod stays Pending. Ask for {renames[name]} ({path}); "
                    "a shared replica is not an exclusive GPU.",
                    resource.urn,
                )
            quantity = parse_quantity(value)
            if fail_many and name in renames.values() and quantity is not None and quantity > 1:
                report_violation(
                    f"{resource.describe}: container '{container.name}' requests "
                    f"{show(value)} {name} on {cohort.title}, whose time-slicing config "
                    "sets failRequestsGreaterThanOne: true, so the allocation fails. "
                    f"Request 1 replica ({path}).",
                    resource.urn,
                )


# --------------------------------------------------------------------------- MIG


def _plugin_strategy(install: Installation) -> Any:
    return install.mig_strategy().value


def _maybe_mixed(cohort: _PluginCohort) -> bool:
    """The cohort's plugin may advertise MIG profiles (unknown during preview counts as may)."""
    strategy = _plugin_strategy(cohort.install)
    return strategy == "mixed" or strategy is UNKNOWN or cohort.sharing == "mig-mixed"


def _operator_cohorts(view: StackView, ledger: Ledger | None) -> list[tuple[str, dict[str, str] | None, bool, Any]]:
    """(cohort, selector, mixed, gpuModel) for operator-owned cohorts."""
    operators = view.by_owner(GPU_OPERATOR)
    if not operators or ledger is None or not ledger.known:
        return []
    strategy = operators[0].setting("mig", "strategy")
    result = []
    for name, entry in ledger.cohorts.items():
        if entry.get("owner") != GPU_OPERATOR:
            continue
        sharing, model = _ledger_sharing(ledger, [name])
        mixed = strategy == "mixed" or sharing == "mig-mixed"
        result.append((name, string_map(entry.get("nodeSelector")), mixed, model))
    return result


def _check_plugin_strategies(cohorts: list[_PluginCohort], report: ReportViolation) -> None:
    expected_by_sharing = {"mig-mixed": "mixed", "mig-single": "single", "mig-none": "none"}
    for cohort in cohorts:
        setting = cohort.install.mig_strategy()
        strategy = setting.value
        if strategy is UNKNOWN or cohort.sharing is None:
            continue
        sharing = cohort.sharing
        expected = expected_by_sharing.get(sharing) if isinstance(sharing, str) else None
        path = cohort.install.config_path(".sharing.migStrategy", f"{PROJECT}:cohorts[i].sharing.migStrategy")
        if expected is not None and strategy != expected:
            report(
                f"{setting.subject} is "
                f"{show(strategy)} but the cohort is declared {cohort.sharing}, so the "
                f"plugin advertises the wrong MIG resources. Set {path} to {expected} "
                "after preparing the MIG geometry.",
                cohort.install.resource.urn,
            )
        elif expected is None and one_of(strategy, ("single", "mixed")):
            report(
                f"{setting.subject} is "
                f"{show(strategy)} but the cohort is declared {cohort.sharing}, not "
                f"MIG. Set {path} to match the prepared GPUs (none unless MIG is "
                "enabled).",
                cohort.install.resource.urn,
            )


def mig_strategy_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Check MIG requests against the plugin strategy and the GPU's profile table."""
    view = StackView.from_args(args)
    config = args.get_config()
    models = config_mapping(config, "gpuModels")
    default_model = config.get("defaultGpuModel")
    ledger = view.ledger()
    cohorts = _plugin_cohorts(view, ledger)
    operator_cohorts = _operator_cohorts(view, ledger)
    requests = [r for r in _workload_requests(view) if r[3].startswith(MIG_PREFIX)]
    if not cohorts and not requests:
        args.not_applicable("no device plugin and no nvidia.com/mig-* request")
        return
    _check_plugin_strategies(cohorts, report_violation)
    # An unknown strategy (preview) may be mixed: it never causes a refusal.
    any_mixed = any(_maybe_mixed(c) for c in cohorts) or any(mixed for _, _, mixed, _ in operator_cohorts)
    for resource, selector, container, name, _ in requests:
        subject = f"{resource.describe}: container '{container.name}' requests {name}"
        path = resource.config_path("", f"the manifest of {resource.describe}")
        confining = [c for c in cohorts if c.confines(resource, selector)]
        confining_ops = [
            o for o in operator_cohorts if resource.cohort == o[0] or (o[1] and selector_confines(selector, o[1]))
        ]
        not_mixed = [c for c in confining if not _maybe_mixed(c)]
        for cohort in not_mixed:
            report_violation(
                f"{subject}, but it only runs on {cohort.title}, whose migStrategy is "
                f"{show(_plugin_strategy(cohort.install))}: only the mixed strategy "
                "advertises nvidia.com/mig-<profile>, and changing a request does not "
                "create MIG instances. Prepare the MIG geometry, then set "
                f"{PROJECT}:cohorts[i].sharing.migStrategy to mixed, or request "
                f"nvidia.com/gpu ({path}).",
                resource.urn,
            )
        for op_cohort, _, mixed, _ in confining_ops:
            if not mixed:
                report_violation(
                    f"{subject}, but it only runs on the GPU Operator cohort '{op_cohort}', "
                    "whose mig.strategy is not mixed, so nothing advertises that "
                    "resource. Prepare the MIG geometry and set "
                    f"{PROJECT}:cohorts[i].sharing.migStrategy to mixed ({path}).",
                    resource.urn,
                )
        if not confining and not confining_ops and not any_mixed:
            report_violation(
                f"{subject}, but no device plugin or Operator in this stack uses the "
                "mixed MIG strategy, so nothing advertises that resource. Prepare the "
                "MIG geometry and set "
                f"{PROJECT}:cohorts[i].sharing.migStrategy to mixed ({path}).",
                resource.urn,
            )
        model_source = (
            [models.get(n) for c in confining for n in c.names]
            + [models.get(o[0]) for o in confining_ops]
            + [selector.get(GPU_PRODUCT_LABEL)]
            + [c.gpu_model for c in confining]
            + [o[3] for o in confining_ops]
            + [default_model]
        )
        model = next((m for m in map(normalize_gpu_model, model_source) if m is not None), None)
        profile = normalize_profile(name)
        valid = MIG_PROFILES[model] if model is not None else ALL_MIG_PROFILES
        if profile not in valid:
            known = f"the {model} profiles" if model is not None else "any tabulated GPU"
            report_violation(
                f"{subject}: MIG profile '{profile}' is not among {known} "
                f"({', '.join(sorted(valid))}); profiles are SKU-specific (e.g. "
                "4g.40gb exists on A100 80GB, not 40GB). Request a profile of the "
                f"actual GPU and set {PROJECT}:cohorts[i].sharing.gpuModel / "
                f"migProfile to match ({path}).",
                resource.urn,
            )


# --------------------------------------------------------------------------- policies

_ANY_POD: Final = "Job, CronJob, Deployment, DaemonSet, StatefulSet, ReplicaSet or Pod"

SMOKE_JOB_HARDENED = ResourceValidationPolicy(
    name="smoke-job-hardened",
    description=(
        "GPU smoke Jobs stay suspended unless approved and are bounded, non-root, "
        "read-only, capability-free, token-free and pinned by image digest."
    ),
    validate=smoke_job_hardened_validator,
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
    validate=gpu_request_shape_validator,
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

NO_VISIBLE_DEVICES_OVERRIDE = ResourceValidationPolicy(
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
    validate=no_dual_allocation_validator,
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

SHARED_GPU_RESOURCE_NAME = StackValidationPolicy(
    name="shared-gpu-resource-name",
    description=(
        "A time-slicing device-plugin config is attached through config.default, keeps "
        "failRequestsGreaterThanOne, and workloads on a renamed cohort request "
        "nvidia.com/gpu.shared rather than nvidia.com/gpu."
    ),
    validate=shared_gpu_resource_name_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "requireFailRequestsGreaterThanOne": {
                "type": "boolean",
                "default": True,
                "description": "Refuse time-slicing configs that admit >1 replica.",
            }
        }
    ),
    remediation_steps=(
        f"Configure time-slicing through {PROJECT}:cohorts[i].sharing.mode "
        "(time-slicing) and .sharing.replicas so the program renders config.map with "
        "config.default selecting it; request nvidia.com/gpu.shared (1 replica) on that "
        "cohort."
    ),
    url="https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus",
    tags=["workloads", "time-slicing"],
)

MIG_STRATEGY_CONSISTENT = StackValidationPolicy(
    name="mig-strategy-consistent",
    description=(
        "nvidia.com/mig-* requests need a device plugin with the mixed MIG strategy, "
        "and the profile exists for the cohort's GPU model."
    ),
    validate=mig_strategy_consistent_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={
            "gpuModels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "default": {},
                "description": 'GPU model per cohort name, e.g. {"a": "A100-40GB"}.',
            },
            "defaultGpuModel": {
                "type": "string",
                "enum": sorted(MIG_PROFILES),
                "description": "GPU model when neither config nor labels say.",
            },
        }
    ),
    remediation_steps=(
        "Prepare the MIG geometry first, then set "
        f"{PROJECT}:cohorts[i].sharing.mode: mig with .sharing.migStrategy: mixed, "
        ".sharing.gpuModel and .sharing.migProfile; request a profile that exists on "
        "that GPU (A100 40GB: 1g.5gb ... 7g.40gb; A100/H100 80GB: 1g.10gb ... 7g.80gb; "
        "H200: 1g.18gb ... 7g.141gb)."
    ),
    url="https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html",
    tags=["workloads", "mig"],
)

POLICIES: Final = (
    SMOKE_JOB_HARDENED,
    GPU_REQUEST_SHAPE,
    NO_VISIBLE_DEVICES_OVERRIDE,
    NO_DUAL_ALLOCATION,
    SHARED_GPU_RESOURCE_NAME,
    MIG_STRATEGY_CONSISTENT,
)
