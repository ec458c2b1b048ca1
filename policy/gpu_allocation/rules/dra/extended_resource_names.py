"""dra-extended-resource-name-unique: two DeviceClasses never map one extendedResourceName (mandatory).

``DeviceClassSpec.extendedResourceName`` (resource.k8s.io/v1, KEP-5004): "The extended resource name ... should be
unique among all the device classes in a cluster. If two device classes have the same name, then the class created
later is picked to satisfy the pod's extended resource requests." Which class serves a plain ``nvidia.com/gpu``
request then depends on creation order, and a foreign install's class silently shadows the cohort's: issue 40 makes
it a refusal, naming both.
"""

from __future__ import annotations

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import PROJECT
from ...vocab.owners import DRA_KIND
from ..declare import stack_policy
from ..findings import PREVIEW_AGAIN, report_findings
from ..name_mapping import MappingClass, describe_all, is_device_class, mapping_classes
from ..stack_view import StackView

DEVICE_CLASS_KINDS = frozenset({"DeviceClass"})
PROGRAM_SETTING = f"{PROJECT}:dra.extendedResourceName"
"""Where this program keeps the DRA chart's mapping (unset: the program drops it from the chart's classes)."""


def _fix(owners: list[MappingClass]) -> str:
    stamped = [c for c in owners if c.resource.stamped]
    program = (
        f"; for this program's class, remove {PROGRAM_SETTING} from the stack config to drop the chart's mapping"
        if stamped
        else ""
    )
    return (
        "Keep spec.extendedResourceName on exactly one of them and delete it from the others (a class that should "
        f"not serve plain requests is asked through a ResourceClaim){program}; {PREVIEW_AGAIN}"
    )


def extended_resource_name_unique_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two DeviceClasses of the stack mapping the same extendedResourceName, naming both."""
    view = StackView.from_args(args, DEVICE_CLASS_KINDS)
    mapped = mapping_classes(view)
    if not mapped and not any(is_device_class(r) for r in view.resources):
        args.not_applicable("no DeviceClass in the stack (nor one a DRA driver's Release renders)")
        return
    by_name: dict[str, list[MappingClass]] = {}
    for mapping in mapped:
        by_name.setdefault(mapping.name, []).append(mapping)
    for name, owners in sorted(by_name.items()):
        if len(owners) < 2:
            continue
        both = "both" if len(owners) == 2 else "all"
        report_violation(
            f"{describe_all(owners)} {both} set spec.extendedResourceName {name!r}. The API asks for the name to be "
            f"unique among all DeviceClasses: the class created last serves every plain {name} request, so which "
            f"devices (and which driver) a pod gets depends on creation order, and one class silently shadows the "
            f"other. {_fix(owners)}.",
            sorted(owners, key=lambda c: c.describe)[-1].resource.urn,
        )
    report_findings(view.problems(is_device_class), report_violation)


DRA_EXTENDED_RESOURCE_NAME_UNIQUE = stack_policy(
    name="dra-extended-resource-name-unique",
    description=(
        "At most one DeviceClass maps each spec.extendedResourceName: the API asks for it to be unique, and the "
        "class created last silently serves every plain request of the name."
    ),
    validate=extended_resource_name_unique_validator,
    severity=Severity.HIGH,
    # Nothing to tune: only the enforcement level is configurable (one class per name).
    remediation=(
        "Keep spec.extendedResourceName on one DeviceClass per name and remove it from the others; this program "
        f"keeps the DRA chart's mapping only with {PROGRAM_SETTING}: nvidia.com/gpu and sets none of its own."
    ),
    url=DRA_KIND.docs_url,
    tags=["dra", "gpu"],
)
