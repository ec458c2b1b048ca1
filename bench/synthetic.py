"""Synthetic stacks of n cohorts, built on the local stack file.

n device-plugin cohorts for n == 1; otherwise n - 1 device-plugin cohorts and one dra cohort (validation
allows at most one). Every device-plugin cohort gets its own value of the cohort label, so the selectors
are disjoint, and every cohort is driver-verified, as validation requires of standalone owners. Everything
else (cluster, runtime class) is the local stack's, so the synthetic stacks are valid for the local API
server too. The benchmarks' API server has no nodes (they measure previews, not pods): `local_document`
turns off the preflight and the await and takes the charts from the chain `local up` uses (a chart mirror,
../shared/charts, or upstream through the user cache).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL, DEFAULT_COHORT_LABEL_KEY, HYBRID, PROJECT
from policy.gpu_allocation.vocab.stack_files import stack_file_name

ROOT = Path(__file__).resolve().parents[1]
LOCAL_STACK_FILE = ROOT / stack_file_name("local")


def local_document() -> dict[str, Any]:
    """The local stack file, parsed, for a node-less API server and charts from `local up`'s chart source."""
    from eks_hybrid_gpu import chartmirror
    from eks_hybrid_gpu.stackfile import stack_config

    document: dict[str, Any] = yaml.safe_load(LOCAL_STACK_FILE.read_text())
    config = document["config"]
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "skipAwait": True, "preflight": False}
    config[f"{PROJECT}:charts"] = chartmirror.choose(stack_config("local")).overrides
    return document


def local_config() -> dict[str, Any]:
    """The local stack's config values, keys without the project namespace."""
    prefix = f"{PROJECT}:"
    return {key.removeprefix(prefix): value for key, value in local_document()["config"].items()}


def synthetic_cohorts(n: int) -> list[dict[str, Any]]:
    """The cohort list of a synthetic stack of `n` cohorts."""
    if n < 1:
        msg = f"a stack needs at least one cohort, not {n}"
        raise ValueError(msg)
    plugins = n if n == 1 else n - 1
    cohorts: list[dict[str, Any]] = [
        {
            "name": f"plugin-{i}",
            "owner": "device-plugin",
            "hostDriverVerified": True,
            "nodeSelector": {COMPUTE_TYPE_LABEL: HYBRID, DEFAULT_COHORT_LABEL_KEY: f"plugin-{i}"},
        }
        for i in range(plugins)
    ]
    if n > 1:
        cohorts.append({"name": "dra", "owner": "dra", "hostDriverVerified": True})
    return cohorts


def synthetic_config(n: int) -> dict[str, Any]:
    """Config values (keys without the project namespace) of a synthetic stack of `n` cohorts."""
    config = copy.deepcopy(local_config())
    config["cohorts"] = synthetic_cohorts(n)
    return config


def synthetic_document(n: int) -> dict[str, Any]:
    """A stack file (`stacks/Pulumi.<name>.yaml` content) of a synthetic stack of `n` cohorts."""
    document = copy.deepcopy(local_document())
    document["config"][f"{PROJECT}:cohorts"] = synthetic_cohorts(n)
    return document
