"""no-visible-devices-override: containers that get GPUs do not set CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES.

Seed: "Do not set CUDA_VISIBLE_DEVICES". The env is read as the kubelet builds it (``envFrom``, ``valueFrom``), with
the ConfigMaps and Secrets of the stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import PROJECT
from ..declare import stack_policy
from ..fail_closed import reads_pods
from ..findings import CANNOT_JUDGE, report_findings
from ..props import UNKNOWN, as_dict, config_strings, show, string_list
from ..readers import EnvEntry, EnvLookup, effective_env
from ..resource import Resource
from ..shapes import POD_SPEC_PATHS, Container, containers, is_device_plugin_gpu, pod_claims
from ..stack_view import StackView, not_applicable_unless_unreadable


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


NO_DEVICES: Final = "void"
"""``NVIDIA_VISIBLE_DEVICES=void``: the NVIDIA container runtime injects no GPU (nvidia-container-toolkit)."""


def _opts_out(container: Container, entry: EnvEntry) -> bool:
    """A container of a DRA pod that lists no claim, asking the runtime for no GPU: no override of an allocation.

    The kubelet hands a container the CDI devices of the claims *it* lists in ``resources.claims`` and nothing else
    (``Manager.GetResources``, kubernetes ``pkg/kubelet/cm/dra/manager.go``), so such a sidecar gets no DRA device;
    ``void`` keeps a CUDA image's own ``NVIDIA_VISIBLE_DEVICES=all`` from exposing the node's GPUs to it.
    """
    if container.claims or any(is_device_plugin_gpu(n) for n in container.resource_names()):
        return False
    return entry.name == "NVIDIA_VISIBLE_DEVICES" and entry.source == "env" and entry.value == NO_DEVICES


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
            if entry is None or _opts_out(container, entry):
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
            report_violation(f"{resource.describe}: {problem} (in {resource.manifest_path}).", resource.urn)
    if not judged:
        not_applicable_unless_unreadable(args, view, "no workload with a pod template", report_violation, reads_pods)
        return
    report_findings(view.problems(reads_pods), report_violation)


_ENV_KINDS: Final = frozenset({*POD_SPEC_PATHS, "ConfigMap", "Secret"})


NO_VISIBLE_DEVICES_OVERRIDE = stack_policy(
    "no-visible-devices-override",
    (
        "Containers that get GPUs through the device plugin or a DRA claim do not set "
        "CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES."
    ),
    no_visible_devices_override_validator,
    severity=Severity.HIGH,
    remediation=(
        "Remove CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES from the env of every "
        "container that requests nvidia.com/gpu*, nvidia.com/mig-* or a DRA claim; the "
        "allocator and runtime expose exactly the assigned devices. The program's smoke "
        f"Jobs never set them ({PROJECT}:smokeJobs); fix other workloads' manifests."
    ),
    url="https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/",
    tags=["workloads", "gpu"],
    config={
        "forbiddenEnvVars": string_list(
            ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"], "Env names a GPU-consuming container may not set."
        )
    },
)
