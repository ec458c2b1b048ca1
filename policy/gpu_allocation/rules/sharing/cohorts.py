"""The device-plugin cohorts the sharing rules judge: each install, its cohorts, their sharing, its MIG strategy."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...vocab.labels import DEVICE_PLUGIN, DRA
from ...vocab.selectors import INSIDE, Placement, cohort_membership, cohort_selector
from ..installations import Installation, Setting
from ..ledger import Ledger
from ..plugin_configs import (
    SharingConfig,
    rendered_sharing_config,
)
from ..props import as_dict, dig, one_of, string_map
from ..resource import CONFIG_MAP_TYPE, Resource
from ..shapes import POD_SPEC_PATHS, Container, containers, pod_placement
from ..stack_view import StackView


def ledger_sharing(ledger: Ledger | None, cohorts: Sequence[str]) -> tuple[Any, Any]:
    """(sharing annotation-like value, gpuModel) recorded in the ledger."""
    if ledger is None or not ledger.known:
        return None, None
    for name in cohorts:
        sharing = as_dict(ledger.cohorts.get(name)).get("sharing")
        if isinstance(sharing, str):
            return sharing, None
        if isinstance(sharing, dict):
            mode = sharing.get("mode")
            strategy = sharing.get("migStrategy")
            if mode == "mig" and one_of(strategy, ("single", "mixed")):
                mode = f"mig-{strategy}"
            model = sharing.get("gpuModel")
            return (
                mode if isinstance(mode, str) else None,
                model if isinstance(model, str) else None,
            )
    return None, None


@dataclass
class PluginCohort:
    """One device-plugin install, the cohorts it serves and what they declare about sharing."""

    install: Installation
    selector: dict[str, str] | None
    names: list[str]
    sharing: Any
    gpu_model: Any
    strategy: Setting
    """The plugin's MIG strategy: its env, else its config file's flags.migStrategy, else the default none."""
    cohort: dict[str, str] | None = None
    """The part of ``selector`` that tells this cohort from the stack's others (``vocab.selectors.cohort_selector``)."""

    def confines(self, workload: Resource, placement: Placement) -> bool:
        """Tell whether the workload only runs where this plugin runs (its cohort stamp, or its node selection).

        The node selection is the scheduler's (:func:`..shapes.node_selection`: nodeSelector and the ORed required
        terms), so a workload pinned to the cohort only through ``nodeAffinity`` is confined too. A selection that
        leaves the cohort through ``NotIn``/``Exists`` on its label (:data:`...vocab.selectors.CANNOT_TELL`) is not
        confined: these rules refuse only what is sure to fail (a missed refusal leaves a pod Pending, it double-books
        nothing).
        """
        if workload.cohort is not None and workload.cohort in self.names:
            return True
        return self.cohort is not None and cohort_membership(placement, self.cohort)[0] == INSIDE

    @property
    def title(self) -> str:
        """The install and its cohorts, for messages."""
        names = ", ".join(self.names)
        return f"{self.install.resource.describe}" + (f" (cohort {names})" if names else "")


def plugin_cohorts(view: StackView, ledger: Ledger | None) -> list[PluginCohort]:
    """Every device-plugin install of the stack as a cohort the sharing rules judge."""
    result = []
    selectors = cohort_selectors(view, ledger)
    for install in view.by_owner(DEVICE_PLUGIN):
        selector = install.selector
        names = install.cohorts
        sharing, model = ledger_sharing(ledger, names)
        known = selector if isinstance(selector, dict) else None
        result.append(
            PluginCohort(
                install,
                known,
                names,
                install.sharing or sharing,
                model,
                _strategy(install, view),
                None if known is None else cohort_selector(known, [s for s in selectors if s != known]),
            )
        )
    return result


def cohort_selectors(view: StackView, ledger: Ledger | None) -> list[dict[str, str]]:
    """The nodeSelector of every allocator install of the stack and of every cohort its ledger records."""
    found = [i.selector for i in view.installations() if i.owner in {DEVICE_PLUGIN, DRA}]
    if ledger is not None and ledger.known:
        found += [as_dict(entry).get("nodeSelector") for entry in ledger.cohorts.values()]
    return [s for s in (string_map(f) if isinstance(f, dict) else None for f in found) if s]


def _strategy(install: Installation, view: StackView) -> Setting:
    """The MIG strategy in force: ``MIG_STRATEGY`` env (or values), else ``flags.migStrategy`` of the config."""
    setting = install.mig_strategy()
    if not setting.defaulted or install.inputs_visible:
        return setting
    config = rendered_sharing_config(install, view)
    if not isinstance(config, SharingConfig) or config.default_key is None:
        return setting
    flag = dig(config.documents.get(config.default_key), "flags", "migStrategy")
    if not isinstance(flag, str):
        return setting
    return Setting(flag, f"{config.where}.{config.default_key} flags.migStrategy")


def workload_requests(
    view: StackView,
) -> Iterator[tuple[Resource, Placement, Container, str, Any]]:
    """(workload, its node selection, container, resource name, request value).

    A workload whose node selection is unknown during preview is judged at ``up``; one whose selection is of the
    wrong type is reported by :meth:`.Resource.read_pod` (fail closed).
    """
    for resource, pod in view.workloads():
        placement = pod_placement(pod)
        if placement is None:
            continue
        for container in containers(pod):
            table = {**container.limits, **container.requests}
            for name, value in sorted(table.items()):
                yield resource, placement, container, name, value


def reads_sharing(resource: Resource) -> bool:
    """The objects the sharing checks read: workloads, ConfigMaps (the configs, the ledger), Helm resources."""
    return resource.is_helm or resource.kind in POD_SPEC_PATHS or resource.resource_type == CONFIG_MAP_TYPE
