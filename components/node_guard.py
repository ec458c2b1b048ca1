"""The cluster guards the labels that pick a node's allocator: no schedulable Node changes cohort or allocator.

Relabelling a busy host into another cohort starts the new owner's allocator at once (DaemonSets follow labels
and tolerate cordons) beside pods that still hold GPUs through the old one. A ValidatingAdmissionPolicy
(`admissionregistration.k8s.io/v1`, no webhook) refuses an UPDATE of a Node that changes the stack's cohort label
while the node is not cordoned, and names the supported path, `eks-hybrid-gpu move-host`, which cordons, drains
the GPU consumers, relabels, and waits for the old allocator to leave before the new one starts.

The same policy guards `ALLOCATOR_LABEL`, the label `migrate` moves a cohort to DRA by, one node at a time, keeping
`nvidia.com/gpu` (KEP-5004): the device plugin selects `=device-plugin`, DRA `=dra`, so changing the value on a
busy node starts DRA beside pods that hold GPUs through the device plugin, skipping the drain. On a schedulable node
it lets through only an update that keeps the value, or one that adds the value a move one node at a time starts
from (`device-plugin`, `cluster.records.migration.PER_NODE`) to a node without it: `migrate`'s `label` phase, while
the device plugin still selects the hosts by their cohort label alone, so the allocator stays the same. Removing
the label is a change too (refused), so no two schedulable updates (remove, then set the other value) move a node.
Every other change — `migrate`'s and `move-host`'s moves of each node — happens under their cordon.

It matches UPDATEs of `nodes` and of the `nodes/status` subresource: the API server keeps a status update's
metadata, so a relabel sent through `nodes/status` changes the label as surely as one through `nodes`. What it
never refuses: node registration (CREATE) is not matched, and an update that leaves both labels as they were always
passes — the kubelet's status heartbeats never touch labels, so they always pass. It cannot see pods
(admission policies read only the object, the old object and params), so cordoning is what it checks; draining
is `move-host`'s and `migrate`'s job. Label keys and values reach CEL as quoted string literals, never pasted as code.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from cluster.records.migration import PER_NODE
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL, LABEL_PREFIX

POLICY_NAME = "eks-hybrid-gpu-cohort-label-guard"


def cel_string(value: str) -> str:
    """A CEL double-quoted string literal of `value`, every character outside [A-Za-z0-9./_-] escaped.

    CEL's short unicode escape takes exactly four hex digits; a character past U+FFFF takes the long one, eight.
    """
    safe = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./_-")
    return '"' + "".join(c if c in safe else _escaped(c) for c in value) + '"'


def _escaped(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def label_of(variable: str, key: str) -> str:
    """CEL for the label `key` of `variable` ('' when the object has no labels or not that one)."""
    quoted = cel_string(key)
    return (
        f"(has({variable}.metadata.labels) && {quoted} in {variable}.metadata.labels ? "
        f"{variable}.metadata.labels[{quoted}] : '')"
    )


CORDONED = "(has(object.spec.unschedulable) && object.spec.unschedulable == true)"
"""CEL: the node as updated is cordoned."""
FIRST_ALLOCATORS = tuple(sorted({old for old, _new in PER_NODE}))
"""The allocator values a move one node at a time labels every host with first, before either owner selects by it."""


def guard_expression(key: str) -> str:
    """True when the update keeps the cohort label, or the node is cordoned (spec.unschedulable)."""
    return f"{label_of('oldObject', key)} == {label_of('object', key)} || {CORDONED}"


def allocator_expression(key: str = ALLOCATOR_LABEL, first: tuple[str, ...] = FIRST_ALLOCATORS) -> str:
    """True when the update keeps the allocator label, adds one of `first` to a node without it, or is cordoned.

    Absent and empty are one value here ('' is what `label_of` gives for both), so removing the label is a change.
    """
    old, new = label_of("oldObject", key), label_of("object", key)
    added = " || ".join(f"{new} == {cel_string(value)}" for value in first) or "false"
    return f"{old} == {new} || ({old} == '' && ({added})) || {CORDONED}"


def refusal_message(key: str) -> str:
    """What the person who relabelled a schedulable node reads."""
    return (
        f"the {key} label of a schedulable node cannot change: its GPUs may be in use, and the new cohort's "
        "allocator would start beside them. Move the host with `eks-hybrid-gpu move-host NODE --to COHORT` "
        "(cordon, drain the GPU pods, relabel, wait for the old allocator to leave, then the new one)"
    )


def allocator_refusal_message(key: str = ALLOCATOR_LABEL) -> str:
    """What the person who changed the allocator label of a schedulable node reads."""
    return (
        f"the {key} label of a schedulable node cannot change which allocator serves it: its GPUs may be in use "
        "through the device plugin or DRA, and the other would start beside them, booking them twice. Move the "
        "cohort with `eks-hybrid-gpu migrate --stack STACK --cohort COHORT --to dra` (one node at a time: cordon, "
        "drain the GPU pods, relabel, wait for the old allocator to leave, then the new one), or one host with "
        "`eks-hybrid-gpu move-host NODE --to COHORT`"
    )


class CohortLabelGuard(pulumi.ComponentResource):
    """A ValidatingAdmissionPolicy and its Deny binding that keep a schedulable Node in its cohort and allocator."""

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
                    },
                    {
                        "expression": allocator_expression(),
                        "message": allocator_refusal_message(),
                        "reason": "Forbidden",
                    },
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
