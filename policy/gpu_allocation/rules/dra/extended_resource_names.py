"""dra-extended-resource-name-unique: two DeviceClasses mapping one extendedResourceName are reviewed (advisory).

``DeviceClassSpec.extendedResourceName`` (resource.k8s.io/v1, KEP-5004): "The extended resource name ... should be
unique among all the device classes in a cluster. If two device classes have the same name, then the class created
later is picked to satisfy the pod's extended resource requests." Which one that is depends on creation order, so a
plain ``nvidia.com/gpu`` request may be served by a class nobody meant; the seed asks to review it, so the pack warns.
"""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from ...vocab.labels import PROJECT
from ...vocab.owners import DRA_KIND
from ..findings import report_findings
from ..props import UNKNOWN, dig
from ..resource import Resource
from ..stack_view import StackView

DEVICE_CLASS_KINDS = frozenset({"DeviceClass"})


def _is_device_class(resource: Resource) -> bool:
    return resource.kind == "DeviceClass" and resource.api_group_version.startswith("resource.k8s.io/")


def extended_resource_name_unique_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Warn when two DeviceClasses of the stack map the same extendedResourceName."""
    view = StackView.from_args(args, DEVICE_CLASS_KINDS)
    classes = [r for r in view.resources if _is_device_class(r)]
    if not classes:
        args.not_applicable("no DeviceClass in the stack")
        return
    by_name: dict[str, list[Resource]] = {}
    for resource in classes:
        name = dig(resource.props, "spec", "extendedResourceName")
        if name is UNKNOWN or name is None:
            continue
        if not isinstance(name, str):
            resource.cannot_read("spec.extendedResourceName", "is not a string (an extended resource name)")
            continue
        by_name.setdefault(name, []).append(resource)
    for name, owners in sorted(by_name.items()):
        if len(owners) < 2:
            continue
        listing = ", ".join(sorted(r.describe for r in owners))
        report_violation(
            f"{listing} all set spec.extendedResourceName {name!r}; the API asks for it to be unique among all "
            f"DeviceClasses, and the class created last serves every plain {name} request, so which devices a pod "
            f"gets depends on creation order. Review: keep extendedResourceName on one class and remove it from the "
            "others.",
            owners[-1].urn,
        )
    report_findings(view.problems(_is_device_class), report_violation)


DRA_EXTENDED_RESOURCE_NAME_UNIQUE = StackValidationPolicy(
    name="dra-extended-resource-name-unique",
    description=(
        "At most one DeviceClass maps each spec.extendedResourceName (the API asks for it to be unique); a second "
        "one is reviewed (advisory)."
    ),
    validate=extended_resource_name_unique_validator,
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.LOW,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        "Keep spec.extendedResourceName on one DeviceClass per name and remove it from the others; this program "
        f"drops it from the DRA chart's classes and sets none on its own ({PROJECT}:dra.*)."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra", "review"],
)
