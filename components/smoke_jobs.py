"""Suspended, hardened GPU smoke Jobs: one per cohort, each through its owner's mechanism only.

A Job never requests the same GPU through both mechanisms: device-plugin cohorts request an extended
resource, DRA cohorts a claim. Unsuspending is an explicit per-cohort config switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import CohortConfig, OperatorConfig, SmokeJobsConfig
from components.device_plugin import advertised_resource
from components.dra_objects import CLAIM_TEMPLATE
from components.stamping import Ownership
from policy.gpu_allocation.vocab.labels import APPROVED_ANNOTATION, SMOKE_JOB_LABEL
from policy.gpu_allocation.vocab.owners import allocates_through_dra

PROBE_MOUNT = "/opt/gpu-probe"
PROBE_FILE = "cuda_probe.py"
PROBE_BUDGET_SECONDS = 20
CLAIM_NAME = "gpu-resource"


@dataclass(frozen=True)
class SmokeRequest:
    """How one cohort's smoke Job gets its GPU."""

    extended_resource: str | None
    """nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<profile>; None for a DRA claim."""
    runtime_class: str | None


def smoke_request(cohort: CohortConfig, operator: OperatorConfig, runtime_class: str) -> SmokeRequest:
    """The one allocation mechanism of a cohort's owner."""
    if allocates_through_dra(cohort.owner, operator.mode):
        return SmokeRequest(None, None)
    return SmokeRequest(advertised_resource(cohort), runtime_class)


def smoke_job_name(cohort: CohortConfig) -> str:
    """hybrid-gpu-<cohort>-smoke, the GPU integration guide's naming."""
    return f"hybrid-gpu-{cohort.name}-smoke"


def smoke_job_spec(
    request: SmokeRequest,
    selector: dict[str, str],
    smoke: SmokeJobsConfig,
    approved: bool,
    probe_config_map: str | None,
) -> dict[str, Any]:
    """The Job spec, hardened exactly as the GPU integration guide shows.

    The deadline bounds the Job after it starts, not image preparation; the TTL removes it after the
    result was captured (`eks-hybrid-gpu smoke` captures it before that).
    """
    requests: dict[str, Any] = {"cpu": "100m", "memory": "128Mi"}
    limits: dict[str, Any] = {"cpu": "500m", "memory": "256Mi"}
    resources: dict[str, Any] = {"requests": requests, "limits": limits}
    if request.extended_resource is not None:
        requests[request.extended_resource] = 1
        limits[request.extended_resource] = 1
    else:
        resources["claims"] = [{"name": CLAIM_NAME}]
    command = ["nvidia-smi", "-L"]
    container: dict[str, Any] = {
        "name": "gpu-check",
        "image": smoke.image,
        "command": command,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": resources,
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "nodeSelector": dict(selector),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": smoke.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
    if request.runtime_class is not None:
        pod["runtimeClassName"] = request.runtime_class
    if request.extended_resource is None:
        pod["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": CLAIM_TEMPLATE}]
    if probe_config_map is not None:
        container["command"] = ["python3", f"{PROBE_MOUNT}/{PROBE_FILE}", "--budget-seconds", str(PROBE_BUDGET_SECONDS)]
        container["volumeMounts"] = [{"name": "gpu-probe", "mountPath": PROBE_MOUNT, "readOnly": True}]
        pod["volumes"] = [{"name": "gpu-probe", "configMap": {"name": probe_config_map, "defaultMode": 0o444}}]
    return {
        "suspend": not approved,
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 0,
        "activeDeadlineSeconds": smoke.active_deadline_seconds,
        "ttlSecondsAfterFinished": smoke.ttl_seconds_after_finished,
        "template": {"spec": pod},
    }


class SmokeJob(pulumi.ComponentResource):
    """One cohort's smoke Job, suspended unless the stack config approves that cohort."""

    job_name: pulumi.Output[str]
    """metadata.name of the Job."""
    approved: pulumi.Output[bool]
    """Whether the Job is allowed to run (unsuspended)."""

    def __init__(
        self,
        name: str,
        *,
        cohort: CohortConfig,
        ownership: Ownership,
        request: SmokeRequest,
        smoke: SmokeJobsConfig,
        namespace: pulumi.Input[str],
        probe_config_map: str | None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("eks-hybrid-gpu:smoke:SmokeJob", name, None, opts)
        approved = smoke.approved_cohort == cohort.name
        job_name = smoke_job_name(cohort)
        annotations = {
            **ownership.annotations,
            APPROVED_ANNOTATION: "true" if approved else "false",
            # A suspended Job never completes, and an approved one runs on GPU hardware the provider cannot
            # see: waiting here would only stall `pulumi up`. `eks-hybrid-gpu smoke` reports the result.
            "pulumi.com/skipAwait": "true",
            # skipAwait also skips waiting for a Job's deletion, and the provider deletes in the foreground: a
            # replacement (its pod template is immutable; a cohort change edits its selector) then races the old
            # Job, still there under its foregroundDeletion finalizer, into a Server-Side Apply conflict. In the
            # background the API server removes the Job at once and collects its pods afterwards.
            "pulumi.com/deletionPropagationPolicy": "background",
        }
        k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": job_name,
                "namespace": namespace,
                "labels": {**ownership.labels, SMOKE_JOB_LABEL: "true"},
                "annotations": annotations,
            },
            spec=smoke_job_spec(request, dict(ownership.selector), smoke, approved, probe_config_map),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.job_name = pulumi.Output.from_input(job_name)
        self.approved = pulumi.Output.from_input(approved)
        self.register_outputs({"job_name": self.job_name, "approved": self.approved})
