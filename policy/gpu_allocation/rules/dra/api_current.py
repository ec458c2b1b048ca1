"""dra-api-current: DRA objects, pod claims and DRA chart values use resource.k8s.io/v1 and its current shapes.

Seed: "These examples use resource.k8s.io/v1. Kubernetes 1.31's former alpha shape is not a drop-in manifest",
"DeviceClass has no suitableNodes field", "The request uses requests[].exactly; Pod claims refer directly to
resourceClaimTemplateName, without the old source wrapper" and "The old resourceHandles example is not the current
structured-allocation shape".
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab.labels import DRA, PROJECT
from ..declare import resource_policy
from ..fail_closed import fail_closed, reads_pods_and_helm
from ..props import UNKNOWN, as_dict, as_list, compact_json, config_strings, dig, show, string_list
from ..resource import Resource

DRA_GROUP: Final = "resource.k8s.io"
CURRENT_API: Final = f"{DRA_GROUP}/v1"
DRA_KINDS: Final = frozenset(
    {
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceSlice",
        "ResourceClass",
        "ResourceClaimParameters",
        "ResourceClassParameters",
        "PodSchedulingContext",
    }
)
_REMOVED_KINDS: Final = {
    "ResourceClass": "DeviceClass",
    "ResourceClaimParameters": "DeviceClass/requests selectors",
    "ResourceClassParameters": "DeviceClass config",
    "PodSchedulingContext": "structured parameters (no replacement object)",
}
_LEGACY_REQUEST_KEYS: Final = (
    "deviceClassName",
    "allocationMode",
    "count",
    "selectors",
    "adminAccess",
    "tolerations",
)
_DRA_PATH: Final = f"{PROJECT}:dra"


def _find_key(value: Any, key: str, path: str = "") -> str | None:
    """Return the path of the first ``key`` anywhere in plain data."""
    if isinstance(value, dict):
        for name, item in value.items():
            here = f"{path}.{name}" if path else name
            if name == key:
                return here
            found = _find_key(item, key, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_key(item, key, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _request_findings(requests: Any, where: str) -> list[str]:
    findings = []
    for index, request in enumerate(as_list(requests)):
        if not isinstance(request, dict):
            continue
        legacy = [k for k in _LEGACY_REQUEST_KEYS if k in request]
        if "exactly" not in request and "firstAvailable" not in request:
            findings.append(
                f"{where}[{index}] ({compact_json(request)}) has no 'exactly' block: in "
                f"{CURRENT_API} a request is {{name, exactly: {{deviceClassName, "
                "allocationMode, count, selectors}}"
            )
        elif legacy:
            findings.append(
                f"{where}[{index}] sets {', '.join(legacy)} directly on the request; in "
                f"{CURRENT_API} they belong under {where}[{index}].exactly"
            )
    return findings


def _object_findings(resource: Resource, allowed: tuple[str, ...]) -> list[str]:
    findings = []
    group_version = resource.api_group_version
    if group_version not in allowed:
        findings.append(
            f"uses {group_version}, not {CURRENT_API}: the former alpha/beta shapes are "
            "not drop-in manifests for current clusters"
        )
    api_version = resource.props.get("apiVersion")
    if isinstance(api_version, str) and api_version not in allowed:
        if api_version != group_version:
            findings.append(f"sets apiVersion {show(api_version)}")
    replacement = _REMOVED_KINDS.get(resource.kind)
    if replacement is not None:
        findings.append(f"kind {resource.kind} is gone; use {replacement}")
    spec = as_dict(resource.props.get("spec"))
    if resource.kind == "DeviceClass" and "suitableNodes" in spec:
        findings.append(
            f"spec.suitableNodes is {show(spec['suitableNodes'])}, but DeviceClass has "
            "no suitableNodes field in this API; constrain workloads with their node "
            "selector/affinity and let DRA match devices"
        )
    if resource.kind == "ResourceClaim":
        findings += _request_findings(dig(spec, "devices", "requests"), "spec.devices.requests")
        claim_spec = spec
        prefix = "spec"
    elif resource.kind == "ResourceClaimTemplate":
        findings += _request_findings(dig(spec, "spec", "devices", "requests"), "spec.spec.devices.requests")
        claim_spec = as_dict(spec.get("spec"))
        prefix = "spec.spec"
    else:
        claim_spec, prefix = {}, ""
    for old in ("resourceClassName", "parametersRef"):
        if old in claim_spec:
            findings.append(
                f"{prefix}.{old} is the Kubernetes 1.31 alpha claim shape; use "
                "devices.requests[].exactly.deviceClassName"
            )
    handles = _find_key(resource.props, "resourceHandles")
    if handles is not None:
        findings.append(
            f"{handles} is the old resourceHandles shape, not the current structured "
            "allocation (status.allocation.devices.results)"
        )
    return findings


def _pod_findings(pod: dict[str, Any]) -> list[str]:
    findings = []
    for index, claim in enumerate(as_list(pod.get("resourceClaims"))):
        if isinstance(claim, dict) and "source" in claim:
            findings.append(
                f"pod resourceClaims[{index}] wraps its reference in 'source' "
                f"({compact_json(claim['source'])}); Pod claims refer directly to "
                "resourceClaimTemplateName or resourceClaimName"
            )
    return findings


def dra_api_current_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse old DRA API versions and shapes in DRA objects, pods and chart values."""
    resource = Resource.from_args(args)
    allowed = config_strings(args.get_config(), "allowedApiVersions", (CURRENT_API,))
    path = resource.config_path("", _DRA_PATH)
    resource.not_applicable_if_inputs_hidden(args, "the DeviceClasses and pod templates it renders are checked instead")
    if resource.is_kubernetes and resource.api_group_version.startswith(f"{DRA_GROUP}/") and resource.kind in DRA_KINDS:
        findings = _object_findings(resource, allowed)
    elif resource.chart_owner == DRA:
        version = dig(resource.values, "resourceApiVersion")
        if version is UNKNOWN:
            args.not_applicable("the chart values are unknown during preview")
            return
        findings = []
        if isinstance(version, str) and version and version not in allowed:
            findings.append(
                f"values resourceApiVersion is {show(version)}; leave it empty (the "
                f"chart detects {CURRENT_API}) or set {CURRENT_API}"
            )
    elif isinstance(resource.pod_spec, dict):
        findings = _pod_findings(resource.pod_spec)
        path = resource.manifest_path
    else:
        args.not_applicable("not a DRA object, DRA chart or pod template")
        return
    for finding in findings:
        report_violation(f"{resource.describe}: {finding}. Write it for {CURRENT_API} ({path}).", None)


def _reads_dra_objects(resource: Resource) -> bool:
    return reads_pods_and_helm(resource) or resource.api_group_version.startswith(f"{DRA_GROUP}/")


DRA_API_CURRENT = resource_policy(
    "dra-api-current",
    (
        "DeviceClasses, ResourceClaims and ResourceClaimTemplates use "
        "resource.k8s.io/v1 with requests[].exactly, and no object uses suitableNodes, "
        "a pod-claim source wrapper or resourceHandles."
    ),
    fail_closed(_reads_dra_objects)(dra_api_current_validator),
    severity=Severity.MEDIUM,
    remediation=(
        f"Write DRA objects for {CURRENT_API}: DeviceClass without suitableNodes, "
        "claims with devices.requests[].exactly, Pod resourceClaims with "
        f"resourceClaimTemplateName directly ({PROJECT}:dra.*)."
    ),
    url="https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/",
    tags=["dra"],
    config={"allowedApiVersions": string_list([CURRENT_API], "DRA API versions accepted for DRA objects.")},
)
