"""The cohort model of the ownership rules: every cohort (or unlabelled install) of a stack, its owners and placements.

A unit gathers what the stack says about one cohort from every source: the program's stamps, the ledger, and the
installs themselves (an install this program did not stamp is a unit of its own, named by its object). The
single-owner and disjointness checks judge units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from ...vocab import labels as vocab
from ...vocab.labels import GPU_OPERATOR, PROJECT
from ...vocab.ledger import beside_of
from ...vocab.selectors import Placement
from ..ledger import Ledger, beside_key
from ..props import string_map
from ..shapes import pod_placement
from ..stack_view import StackView

_FOREIGN_FIELDS: Final = {
    ".nodeSelector": "the nodeSelector (or required node affinity) of the allocator pods",
    ".owner": "the allocator",
}
"""What to change on an install without stamps, per config-path suffix."""


def cohort_path(name: str, suffix: str) -> str:
    """The stack-config path of one cohort's entry, for messages."""
    return f"{PROJECT}:cohorts[i]{suffix} (the entry of cohort '{name}')"


@dataclass
class Unit:
    """Everything the stack says about one cohort (or one unlabelled install)."""

    key: str
    cohort: str | None
    owners: dict[str, list[str]] = field(default_factory=dict)
    selectors: list[tuple[Placement, str]] = field(default_factory=list)
    config_path: str | None = None
    urn: str | None = None
    installs: dict[str, str] = field(default_factory=dict)
    foreign: str | None = None
    """For an install this program did not stamp: the object, named in messages instead of a config path."""

    @property
    def title(self) -> str:
        """The unit, for messages."""
        if self.cohort is not None:
            return f"cohort '{self.cohort}'"
        if self.foreign is not None:
            return self.foreign
        return f"installation '{self.key}'"

    def path(self, suffix: str) -> str:
        """Where to fix the unit's setting ``suffix``: its stack-config path, or the foreign install's own field."""
        if self.config_path is not None:
            return f"{self.config_path}{suffix}"
        if self.foreign is not None:
            field_name = _FOREIGN_FIELDS.get(suffix, suffix.lstrip("."))
            return f"{field_name} of {self.foreign}"
        return cohort_path(self.cohort or self.key, suffix)

    def add_owner(self, owner: str, source: str, urn: str | None) -> None:
        """Record that ``source`` says this unit has ``owner``."""
        self.owners.setdefault(owner, []).append(source)
        if self.urn is None:
            self.urn = urn


def cohort_units(view: StackView, ledger: Ledger | None) -> dict[str, Unit]:
    """Every unit of the stack, by cohort name (or install URN): stamps first, then the ledger, then the installs."""
    units: dict[str, Unit] = {}

    def unit(key: str, cohort: str | None) -> Unit:
        return units.setdefault(key, Unit(key, cohort))

    for resource in view.resources:
        owner = resource.owner
        if owner is None or resource.is_ledger:
            continue
        cohort = resource.cohort
        key = beside_key(ledger, cohort, owner) or cohort or view.installation_urn(resource) or resource.urn
        current = unit(key, cohort)
        current.add_owner(owner, resource.describe, resource.urn)
        stamped = resource.annotation(vocab.CONFIG_PATH_ANNOTATION)
        if current.config_path is None and isinstance(stamped, str) and stamped:
            current.config_path = stamped
        selector = resource.stamped_selector
        if selector is not None:
            current.selectors.append((Placement.of(selector), f"{resource.describe} ({vocab.SELECTOR_ANNOTATION})"))
        pod = resource.read_pod()
        # Per-node allocators (DaemonSets) and smoke Jobs follow the cohort selector; NFD labels every node
        # by design, and a chart's controller or webhook Deployment runs a few replicas anywhere.
        if isinstance(pod, dict) and not resource.is_nfd and resource.kind != "Deployment":
            placement = pod_placement(pod)
            if placement is not None:
                current.selectors.append((placement, f"{resource.describe} (nodeSelector)"))

    if ledger is not None and ledger.known:
        for name, entry in ledger.cohorts.items():
            current = unit(name, name)
            owner = entry.get("owner")
            if isinstance(owner, str):
                current.add_owner(owner, ledger.resource.describe, None)
            selector = string_map(entry.get("nodeSelector"))
            if selector is not None:
                current.selectors.append((Placement.of(selector), f"{ledger.resource.describe} (cohort '{name}')"))
            beside = beside_of(entry)
            beside_unit = beside_key(ledger, name, beside[0]) if beside is not None else None
            if beside is not None and beside_unit is not None:
                other = unit(beside_unit, name)
                other.add_owner(beside[0], ledger.resource.describe, None)
                where = f"{ledger.resource.describe} (cohort '{name}', {beside[0]} beside)"
                other.selectors.append((Placement.of(beside[1]), where))

    for install in view.installations():
        if install.owner == GPU_OPERATOR or install.publishes_gpus is False:
            continue
        setting = install.placement_setting
        placement = setting.value
        keys = [beside_key(ledger, c, install.owner) or c for c in install.cohorts]
        keys = keys or _matching_cohorts(units, install.owner, placement)
        for key in keys or [install.resource.urn]:
            current = unit(key, key if keys else None)
            if not keys and not install.stamped:
                current.foreign = install.describe
            current.add_owner(install.owner, install.describe, None if install.stamped else install.resource.urn)
            current.installs[install.resource.urn] = install.describe
            # A stamped allocator's rendered placement is already among the unit's selectors.
            known = any(s == placement for s, _ in current.selectors) and not install.inputs_visible
            if isinstance(placement, Placement) and not known:
                current.selectors.append((placement, setting.subject))
    return units


def _matching_cohorts(units: dict[str, Unit], owner: str, placement: Any) -> list[str]:
    """Cohorts of ``owner`` with exactly this nodeSelector, for a Chart whose children are not visible."""
    if not isinstance(placement, Placement):
        return []
    return sorted(
        u.key
        for u in units.values()
        if u.cohort is not None and owner in u.owners and any(s.selector == placement.selector for s, _ in u.selectors)
    )
