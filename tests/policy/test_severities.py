"""Severities as the seed states them, and findings kept as records until they become text.

An unattached time-slicing ConfigMap "changes nothing": an advisory. An unsuspended GPU smoke Job in a stack this
program did not build may be the approved run: an advisory naming the rule. This program's own stamped smoke Job
stays under the mandatory smoke-job-hardened.
"""

from __future__ import annotations

import pytest
from pulumi_policy import EnforcementLevel

from policy.gpu_allocation.rules.sharing import SHARED_GPU_RESOURCE_NAME, TIME_SLICING_CONFIG_ATTACHED
from policy.gpu_allocation.rules.workloads.smoke_jobs import SMOKE_JOB_HARDENED, SMOKE_JOB_RUN_APPROVED, JobFinding
from policy.gpu_allocation.vocab import labels as vocab
from tests.support.policy_harness import DP_SELECTOR, Harness

from .test_foreign_stacks import device_plugin, foreign, smoke_job
from .test_time_slicing_selection import SHARED

pytestmark = [pytest.mark.policy, pytest.mark.charts]  # renders the pinned archives


def loose_config_map() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "team-time-slicing", "namespace": "gpu-system"},
        "data": {"shared": SHARED},
    }


def test_levels() -> None:
    assert TIME_SLICING_CONFIG_ATTACHED.enforcement_level == EnforcementLevel.ADVISORY
    assert SMOKE_JOB_RUN_APPROVED.enforcement_level == EnforcementLevel.ADVISORY
    assert SMOKE_JOB_HARDENED.enforcement_level == EnforcementLevel.MANDATORY
    assert SHARED_GPU_RESOURCE_NAME.enforcement_level == EnforcementLevel.MANDATORY


def test_an_unattached_time_slicing_config_map_is_an_advisory_only(harness: Harness) -> None:
    items = foreign([*device_plugin(), loose_config_map()])
    harness.passes(harness.stack(SHARED_GPU_RESOURCE_NAME, items))
    message = harness.stack(TIME_SLICING_CONFIG_ATTACHED, items).one()
    assert "ConfigMap 'gpu-system/team-time-slicing' holds a time-slicing device-plugin config" in message
    attached = foreign(device_plugin(config__name="team-time-slicing", config__default="shared"))
    harness.passes(harness.stack(TIME_SLICING_CONFIG_ATTACHED, [*attached, *foreign([loose_config_map()])]))


def test_a_foreign_unsuspended_smoke_job_is_an_advisory_naming_the_rule(harness: Harness) -> None:
    job = smoke_job()
    job["spec"]["suspend"] = False
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, job))
    message = harness.manifest_check(SMOKE_JOB_RUN_APPROVED, job).one()
    assert "spec.suspend is false" in message
    assert "rule smoke-job-run-approved" in message
    del job["spec"]["suspend"]
    assert "spec.suspend is null (absent means false)" in harness.manifest_check(SMOKE_JOB_RUN_APPROVED, job).one()
    harness.passes(harness.manifest_check(SMOKE_JOB_RUN_APPROVED, smoke_job()))


def test_the_programs_own_unapproved_smoke_job_stays_mandatory(harness: Harness) -> None:
    job = harness.stamp(smoke_job(), "device-plugin", "plugin", DP_SELECTOR)
    job["metadata"]["labels"][vocab.SMOKE_JOB_LABEL] = "true"
    job["spec"]["suspend"] = False
    message = harness.manifest_check(SMOKE_JOB_HARDENED, job).one()
    assert f"annotation {vocab.APPROVED_ANNOTATION} is null" in message
    outcome = harness.manifest_check(SMOKE_JOB_RUN_APPROVED, job)
    assert harness.not_applicable(outcome) == "a smoke Job of this program: smoke-job-hardened enforces its approval"
    job["metadata"]["annotations"][vocab.APPROVED_ANNOTATION] = "true"
    harness.passes(harness.manifest_check(SMOKE_JOB_HARDENED, job))


def test_a_job_finding_is_worded_for_who_built_the_job() -> None:
    finding = JobFinding(
        "spec.activeDeadlineSeconds",
        "spec.activeDeadlineSeconds is 0, so the Job is unbounded",
        "Set {target} to 1..600",
        "eks-hybrid-gpu:smokeJobs.activeDeadlineSeconds",
    )
    assert finding.text(True).endswith("Set eks-hybrid-gpu:smokeJobs.activeDeadlineSeconds to 1..600")
    assert finding.text(False).endswith("Set spec.activeDeadlineSeconds to 1..600")
    template = JobFinding("spec.backoffLimit", "spec.backoffLimit is 3", "Set it to 0", template=True)
    assert "restore the hardened smoke Job template" in template.text(True)
    assert "in the Job's manifest" in template.text(False)
