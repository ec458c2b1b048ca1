"""chart-version-pinned: every Helm Release, and every object a Chart renders, names an exact chart version.

Seed: the reviewed chart versions ("verify the desired upgrade path"); STYLE.md "Avoid" 5: floating chart versions.
A Chart v4's own inputs are hidden from the analyzer, so its version is read from the ``eks-hybrid-gpu.io/chart``
stamp on what it renders.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)

from ...vocab import labels as vocab
from ...vocab import versioning
from ...vocab.labels import PROJECT
from ...vocab.owners import OWNER_KINDS, owner_of_chart
from ..charts import CHART_VERSION_PATHS
from ..declare import resource_policy
from ..fail_closed import fail_closed
from ..props import UNKNOWN, config_bool, show
from ..resource import Resource

_PINNED_EXAMPLES: Final = ", ".join(kind.chart.version for kind in OWNER_KINDS.values())
"""The registry's pinned releases, as examples of an exact version."""
_CHART_KEYS: Final = tuple(f"charts.{kind.config_key}.version" for kind in OWNER_KINDS.values())
_ARCHIVE_RE: Final = re.compile(r"-v?\d+\.\d+\.\d+[^/]*\.tgz$")


def version_problem(chart: Any, version: Any, *, allow_prerelease: bool) -> Any:
    """Why a chart version is not an exact pin; None if it is; UNKNOWN in preview."""
    if version is UNKNOWN or chart is UNKNOWN:
        return UNKNOWN
    if version is None or version == "":
        if isinstance(chart, str) and _ARCHIVE_RE.search(chart):
            return None
        return "is not set, so Helm installs whatever is latest"
    if not isinstance(version, str):
        return "is not a version string"
    exact = versioning.parse_exact(version)
    if exact is None:
        return "is a range or tag, not an exact version (no ^, ~, >, *, x, latest)"
    if exact.prerelease and not allow_prerelease:
        return "is a pre-release"
    return None


def chart_version_pinned_validator(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse Helm charts without an exact version: Release inputs, and the chart stamp of rendered objects."""
    resource = Resource.from_args(args)
    resource.not_applicable_if_inputs_hidden(
        args, f"the version is checked on the {vocab.CHART_ANNOTATION} annotation of every object it renders"
    )
    if resource.is_helm:
        chart = resource.props.get("chart")
        version = resource.props.get("version")
        subject = f"{resource.describe}: chart {show(chart)} version {show(version)}"
        owner = resource.chart_owner
    else:
        stamp = resource.chart_stamp
        if stamp is None:
            args.not_applicable(f"not a Helm Chart or Release, and no {vocab.CHART_ANNOTATION} annotation")
            return
        if stamp is UNKNOWN:
            args.not_applicable("the chart annotation is unknown during preview")
            return
        chart, version = stamp
        rendered_by = f" (rendered by Chart '{resource.parent_name}')" if resource.rendered_by_chart else ""
        subject = (
            f"{resource.describe}{rendered_by}: annotation {vocab.CHART_ANNOTATION} says chart {show(chart)} "
            f"version {show(version)}"
        )
        owner = owner_of_chart(chart)
    allow_prerelease = config_bool(args.get_config(), "allowPrerelease", True)
    problem = version_problem(chart, version, allow_prerelease=allow_prerelease)
    if problem is UNKNOWN:
        args.not_applicable("the chart version is unknown during preview")
        return
    if problem is None:
        return
    path = CHART_VERSION_PATHS.get(owner or "", "the version input of this chart")
    report_violation(
        f"{subject} {problem}. A floating version changes the installed allocator without review. Set "
        f"{path} to an exact reviewed version (e.g. {_PINNED_EXAMPLES}).",
        None,
    )


def _reads_any(resource: Resource) -> bool:
    """Every object can carry the chart stamp."""
    return resource.is_kubernetes or resource.is_helm


CHART_VERSION_PINNED = resource_policy(
    "chart-version-pinned",
    (
        "Every Helm Release, and every object a Chart v4 renders (its eks-hybrid-gpu.io/chart stamp), "
        "names an exact chart version, never a range, latest, an empty version, *, ^, ~ or >."
    ),
    fail_closed(_reads_any)(chart_version_pinned_validator),
    severity=Severity.MEDIUM,
    remediation=f"Pin {PROJECT}:{', '.join(_CHART_KEYS[:-1])} and {_CHART_KEYS[-1]} to exact reviewed versions.",
    url="https://helm.sh/docs/helm/helm_install/",
    tags=["drivers", "supply-chain"],
    config={
        "allowPrerelease": {
            "type": "boolean",
            "default": True,
            "description": "Accept exact pre-release versions such as 0.5.0-rc.1.",
        }
    },
)
