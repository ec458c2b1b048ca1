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
    entry["nodeSelector"] = dict(migration.node_selector)
    if migration.keeps_namespaces():
        namespaces = changed.get("namespaces")
        changed["namespaces"] = {**(namespaces if isinstance(namespaces, dict) else {}), **migration.kept_namespaces}
    return changed, []
