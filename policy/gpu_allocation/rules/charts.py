"""Helm resources and chart identity: the types the analyzer sees, and which owner's chart a reference names.

Which chart belongs to which allocation owner (current and old names) is the registry's answer
(:func:`..vocab.owners.owner_of_chart`); this module only adds what the analyzer's view of Helm needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..vocab.labels import PROJECT
from ..vocab.owners import OWNER_KINDS

CHART_TYPES: Final = frozenset({"kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart"})
RELEASE_TYPE: Final = "kubernetes:helm.sh/v3:Release"
HELM_TYPES: Final = CHART_TYPES | {RELEASE_TYPE}
HELM_CHART_LABEL: Final = "helm.sh/chart"
"""``<chart>-<version>`` on every object a chart renders."""

CHART_INPUTS_HIDDEN: Final = (
    "Chart v4 inputs are not sent to policy analyzers (a remote component arrives with empty props)"
)
"""Start of the not-applicable reason for a Chart whose props are empty."""


def chart_inputs_hidden(checked: str) -> str:
    """The not-applicable reason for a Chart with empty props: what is checked on its rendered objects instead."""
    return f"{CHART_INPUTS_HIDDEN}; {checked}"


NFD_NAME: Final = "node-feature-discovery"
"""Node Feature Discovery's chart name and app label: a subchart of the device plugin and Operator charts."""

CHART_VERSION_PATHS: Final[Mapping[str, str]] = {
    kind.owner: f"{PROJECT}:charts.{kind.config_key}.version" for kind in OWNER_KINDS.values()
}
"""The stack-config path that pins each owner's chart version."""
