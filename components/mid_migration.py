"""What the program installs while `migrate` runs: the stack config with the migrating cohort as its phase needs.

The record (`cluster.records.migration`) decides the cohort's owner and selector, whatever the stack file says
meanwhile; `components.program` applies it to the raw config before the config is parsed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from cluster.findings import Problem
from cluster.records.migration import Migration
from policy.gpu_allocation.vocab.labels import DRA


def apply_to_raw(raw: Mapping[str, Any], migration: Migration) -> tuple[dict[str, Any], list[Problem]]:
    """The raw stack config with the migrating cohort's owner and selector as the recorded phase needs them.

    The stack file may say either owner meanwhile (the old one, or the new one after the refused one-step
    edit); the record decides. While the cohort is paused it keeps the old owner in the config (so the
    preflight judges its nodes against what is still there) and the program installs nothing for it.
    """
    changed = copy.deepcopy(dict(raw))
    cohorts = changed.get("cohorts")
    names = [c.get("name") for c in cohorts if isinstance(c, dict)] if isinstance(cohorts, list) else []
    if migration.cohort not in names or not isinstance(cohorts, list):
        problem = Problem(
            "cohorts",
            f"has no cohort {migration.cohort}, which is mid-migration in the cluster ({migration.describe()}); "
            f"put it back and finish with `eks-hybrid-gpu migrate --stack STACK --cohort {migration.cohort} "
            f"--to {migration.to_owner}`",
        )
        return changed, [problem]
    entry = cohorts[names.index(migration.cohort)]
    entry["owner"] = migration.installs or migration.from_owner
    entry["nodeSelector"] = dict(migration.selector_now)
    if migration.keeps_namespaces():
        namespaces = changed.get("namespaces")
        changed["namespaces"] = {**(namespaces if isinstance(namespaces, dict) else {}), **migration.kept_namespaces}
    _without_unused_mapping(changed, cohorts)
    return changed, []


def beside_raw(raw: Mapping[str, Any], migration: Migration) -> dict[str, Any] | None:
    """The raw config whose entry of the migrating cohort is installed beside its owner in this phase, or None.

    A move one node at a time installs the new owner, on the hosts' new selector, beside the old from its install
    phase until the old is removed: the config of its `remove` phase (the new owner alone, with its mapping).
    """
    if migration.beside is None:
        return None
    changed, _ = apply_to_raw(raw, migration.at("remove"))
    return changed


def _without_unused_mapping(changed: dict[str, Any], cohorts: list[Any]) -> None:
    """Drop `dra.extendedResourceName` from a phase in which no cohort is owned by dra.

    A stack file that moves its device-plugin cohort to DRA keeping `nvidia.com/gpu` declares the target: owner dra
    and the mapping. Until the install phase the cohort keeps its old owner, no DRA chart is installed, so the
    mapping class does not exist yet and the setting maps nothing (the config refuses it there as unused).
    """
    dra = changed.get("dra")
    if not isinstance(dra, dict) or "extendedResourceName" not in dra:
        return
    if any(isinstance(c, dict) and c.get("owner") == DRA for c in cohorts):
        return
    changed["dra"] = {key: value for key, value in dra.items() if key != "extendedResourceName"}
