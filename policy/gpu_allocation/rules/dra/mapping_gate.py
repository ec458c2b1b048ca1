"""dra-extended-resource-gate-on: a mapping DeviceClass where DRAExtendedResource is off maps nothing (advisory).

On 1.34 and 1.35 the gate is alpha and off by default (:mod:`...vocab.kube_releases`): the API server drops
``spec.extendedResourceName`` from the stored class (observed on 1.34.4), so the mapping serves no plain request,
and it starts serving them the day the cluster moves to 1.36. A request that depends on the mapping today is
``dra-extended-resource-request-served``'s; this one warns about the class itself.
"""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab import kube_releases
from ...vocab.labels import PROJECT
from ...vocab.owners import DRA_KIND
from ..cluster_version import VERSION_CONFIG, cluster_version, how_to_tell
from ..declare import stack_policy
from ..findings import CANNOT_JUDGE, PREVIEW_AGAIN, report_findings
from ..name_mapping import is_device_class, mapping_classes
from ..stack_view import StackView

NAME = "dra-extended-resource-gate-on"
GATE = kube_releases.DRA_EXTENDED_RESOURCE


def mapping_gate_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Warn about a mapping DeviceClass on a version where DRAExtendedResource is off."""
    view = StackView.from_args(args, frozenset({"DeviceClass"}))
    mapped = mapping_classes(view)
    if not mapped:
        unreadable = view.problems(is_device_class)
        if unreadable:
            report_findings(unreadable, report_violation)
            return
        args.not_applicable("no DeviceClass maps an extended resource (spec.extendedResourceName)")
        return
    version = cluster_version(args.get_config(), NAME)
    for mapping in mapped:
        subject = f"{mapping.describe} maps spec.extendedResourceName {mapping.name!r}"
        if version.problem is not None:
            report_violation(
                f"{subject}, and whether that maps anything depends on the Kubernetes version ({GATE}: off in 1.34 "
                f"and 1.35, on from 1.36), but {version.problem}, {CANNOT_JUDGE}. {how_to_tell(NAME)}.",
                mapping.resource.urn,
            )
        elif not version.mapping_on:
            report_violation(
                f"{subject}, but {version.gate_words()}: the API server drops the field, so this class maps nothing "
                f"and plain {mapping.name} requests on the DRA driver's nodes stay Pending, until the cluster moves "
                f"to 1.36+ and the class starts serving them. Turn {GATE} on in the API server, controller-manager, "
                f"scheduler and every GPU node's kubelet and declare it ({PROJECT}:cluster.featureGates.{GATE}: true, "
                f"or featureGates in the config of {NAME}), or remove the mapping (this program: unset "
                f"{PROJECT}:dra.extendedResourceName); {PREVIEW_AGAIN}.",
                mapping.resource.urn,
            )
    report_findings(view.problems(is_device_class), report_violation)


DRA_EXTENDED_RESOURCE_GATE_ON = stack_policy(
    name=NAME,
    description=(
        f"A DeviceClass mapping an extended resource name runs where {GATE} is on (1.36+, or set on 1.34/1.35); "
        "elsewhere it maps nothing and is reported (advisory)."
    ),
    validate=mapping_gate_validator,
    level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    config=VERSION_CONFIG,
    remediation=(
        f"Upgrade to Kubernetes 1.36+, or turn {GATE} on in every control-plane component and kubelet and set "
        f"{PROJECT}:cluster.featureGates.{GATE}: true; or drop the mapping ({PROJECT}:dra.extendedResourceName unset)."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra", "review"],
)
