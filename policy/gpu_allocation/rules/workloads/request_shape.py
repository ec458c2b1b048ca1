"""gpu-request-shape: extended GPU resources are whole device counts, and requests equal limits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab.grammar import parse_quantity
from ...vocab.labels import PROJECT
from ..declare import resource_policy
from ..fail_closed import fail_closed, pod_or_not_applicable, reads_pods
from ..props import UNKNOWN, as_dict, config_strings, show, string_list
from ..shapes import Container, containers


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
    found = pod_or_not_applicable(args)
    if found is None:
        return
    resource, pod = found
    prefixes = config_strings(args.get_config(), "resourcePrefixes", ("nvidia.com/",))
    for problem in request_shape_problems(pod, prefixes):
        report_violation(f"{resource.describe}: {problem} (in {resource.manifest_path}).", None)


_ANY_POD: Final = "Job, CronJob, Deployment, DaemonSet, StatefulSet, ReplicaSet or Pod"

GPU_REQUEST_SHAPE = resource_policy(
    "gpu-request-shape",
    (
        "Extended GPU resources (nvidia.com/*) in any pod template are whole numbers "
        "and their requests equal their limits."
    ),
    fail_closed(reads_pods)(gpu_request_shape_validator),
    severity=Severity.MEDIUM,
    remediation=(
        f"In the {_ANY_POD} manifest, request whole devices (1, 2, ...) and set "
        "limits equal to requests; share GPUs through time-slicing or MIG "
        f"({PROJECT}:cohorts[i].sharing), never with fractions."
    ),
    url="https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources",
    tags=["workloads", "gpu"],
    config={"resourcePrefixes": string_list(["nvidia.com/"], "Resource-name prefixes treated as GPU resources.")},
)
