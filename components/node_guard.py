"""The cluster guards the cohort label: no Node changes cohort while it is schedulable.

Relabelling a busy host into another cohort starts the new owner's allocator at once (DaemonSets follow labels
and tolerate cordons) beside pods that still hold GPUs through the old one. A ValidatingAdmissionPolicy
(`admissionregistration.k8s.io/v1`, no webhook) refuses an UPDATE of a Node that changes the stack's cohort label
while the node is not cordoned, and names the supported path, `eks-hybrid-gpu move-host`, which cordons, drains
the GPU consumers, relabels, and waits for the old allocator to leave before the new one starts.

It matches UPDATEs of `nodes` and of the `nodes/status` subresource: the API server keeps a status update's
metadata, so a relabel sent through `nodes/status` changes the label as surely as one through `nodes`. What it
never refuses: node registration (CREATE) is not matched, and an update that leaves the label as it was always
passes — the kubelet's status heartbeats never touch labels, so they always pass. It cannot see pods
(admission policies read only the object, the old object and params), so cordoning is what it checks; draining
is `move-host`'s job. The label key reaches CEL as a quoted string literal, never pasted as code.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from policy.gpu_allocation.vocab.labels import LABEL_PREFIX

POLICY_NAME = "eks-hybrid-gpu-cohort-label-guard"


def cel_string(value: str) -> str:
    """A CEL double-quoted string literal of `value`, every character outside [A-Za-z0-9./_-] escaped."""
    safe = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./_-")
    return '"' + "".join(c if c in safe else f"\\u{ord(c):04x}" for c in value) + '"'


def label_of(variable: str, key: str) -> str:
    """CEL for the label `key` of `variable` ('' when the object has no labels or not that one)."""
    quoted = cel_string(key)
    return (
        f"(has({variable}.metadata.labels) && {quoted} in {variable}.metadata.labels ? "
        f"{variable}.metadata.labels[{quoted}] : '')"
    )


def guard_expression(key: str) -> str:
    """True when the update keeps the cohort label, or the node is cordoned (spec.unschedulable)."""
    return (
        f"{label_of('oldObject', key)} == {label_of('object', key)} || "
        "(has(object.spec.unschedulable) && object.spec.unschedulable == true)"
    )


def refusal_message(key: str) -> str:
    """What the person who relabelled a schedulable node reads."""
    return (
        f"the {key} label of a schedulable node cannot change: its GPUs may be in use, and the new cohort's "
        "allocator would start beside them. Move the host with `eks-hybrid-gpu move-host NODE --to COHORT` "
        "(cordon, drain the GPU pods, relabel, wait for the old allocator to leave, then the new one)"
    )


class CohortLabelGuard(pulumi.ComponentResource):
    """A ValidatingAdmissionPolicy and its Deny binding that keep a schedulable Node in its cohort."""

    policy_name: pulumi.Output[str]
    """Name of the ValidatingAdmissionPolicy (and its binding)."""

    def __init__(self, name: str, *, cohort_label_key: str, opts: pulumi.ResourceOptions | None = None) -> None:
        """`cohort_label_key` is the stack's validated cohort label key."""
        super().__init__("eks-hybrid-gpu:cluster:CohortLabelGuard", name, None, opts)
        labels = {f"{LABEL_PREFIX}/component": "cohort-label-guard"}
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata={"name": POLICY_NAME, "labels": labels},
            spec={
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["nodes", "nodes/status"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": guard_expression(cohort_label_key),
                        "message": refusal_message(cohort_label_key),
                        "reason": "Forbidden",
                    }
                ],
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-binding",
            metadata={"name": POLICY_NAME, "labels": labels},
            spec={"policyName": POLICY_NAME, "validationActions": ["Deny"]},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        self.policy_name = pulumi.Output.from_input(POLICY_NAME)
        self.register_outputs({"policy_name": self.policy_name})
