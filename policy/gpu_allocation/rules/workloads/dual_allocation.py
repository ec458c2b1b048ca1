"""no-dual-allocation: a pod never asks for device-plugin GPUs and a DRA claim at once.

Seed: "Do not request the same GPU through both mechanisms".
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab.labels import PROJECT
from ..declare import resource_policy
from ..fail_closed import fail_closed, pod_or_not_applicable, reads_pods
from ..props import as_dict
from ..shapes import containers, is_device_plugin_gpu, pod_claims


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
    found = pod_or_not_applicable(args)
    if found is None:
        return
    resource, pod = found
    problem = dual_allocation_problem(pod)
    if problem is not None:
        report_violation(f"{resource.describe}: {problem} (in {resource.manifest_path}).", None)


NO_DUAL_ALLOCATION = resource_policy(
    "no-dual-allocation",
    (
        "A pod never requests device-plugin GPUs (nvidia.com/gpu*, nvidia.com/mig-*) "
        "and a DRA resource claim at the same time."
    ),
    fail_closed(reads_pods)(no_dual_allocation_validator),
    severity=Severity.HIGH,
    remediation=(
        "Pick one mechanism per pod: nvidia.com/gpu requests on a device-plugin cohort, "
        "or resourceClaims (resourceClaimTemplateName) on a DRA cohort; the smoke Jobs "
        f"follow the owner in {PROJECT}:cohorts[i].owner."
    ),
    url="https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/",
    tags=["workloads", "gpu", "dra"],
)
