"""A plan that starts a cohort's allocator where another DaemonSet of it runs, judged on the recorded cluster."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cluster.judge.live import LiveCluster
from cluster.judge.owner_change import check_ledger, namespace_move
from cluster.judge.preflight import check
from cluster.judge.replacements import check_replacements
from cluster.records.ledger import LedgerCohort, ledger_of
from components.config import StackConfig
from tests.support.configs import DRA_COHORT, OPERATOR_COHORT, PLUGIN_COHORT, _base_config, cohort

pytestmark = pytest.mark.unit

RECORDED = Path(__file__).parents[1] / "fixtures" / "publishers" / "cluster.json"
CLEAN = {"dp-ours", "dp-bare", "dra-ours", "cpu-0"}
"""The recorded nodes where only this program's own allocators run."""


def _config(**overrides: Any) -> StackConfig:
    return StackConfig.model_validate(_base_config(**overrides))


def _live() -> LiveCluster:
    lists = {key: value["items"] for key, value in json.loads(RECORDED.read_text()).items()}
    nodes = [n for n in lists["nodes"] if n["metadata"]["name"] in CLEAN]
    return LiveCluster(nodes, lists["resourceSlices"], lists["pods"], lists["daemonSets"])


def test_the_stacks_own_allocators_where_it_runs_them_are_no_replacement() -> None:
    assert check_replacements(_config(cohorts=[PLUGIN_COHORT, DRA_COHORT]), _live(), "s") == []


def test_a_dra_namespace_move_is_refused_naming_the_nodes_and_the_ordered_command() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT], namespaces={"draDriver": "team-dra"})

    problems = check_replacements(config, _live(), "prod")

    assert [str(p) for p in problems] == [
        "eks-hybrid-gpu:cohorts[1]: would start dra's allocator for cohort dra in namespace team-dra on nodes "
        "dra-ours, where another DaemonSet of it runs (dra-ours: pod gpu-dra-system/"
        "dra-driver-nvidia-gpu-kubelet-plugin-r2d2c (a DRA driver run by DaemonSet "
        "gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin, stamped for cohort dra (dra))); Pulumi creates the new "
        "DaemonSet before it deletes the old one, so both would run on those GPUs: change it in order with "
        "`eks-hybrid-gpu migrate --stack prod --cohort dra --to dra`, which removes the old DaemonSet, waits until "
        "its publication has ended, then installs this one; see docs/migrating-owners.md"
    ]
    # The whole preflight says it once, beside nothing else: the device-plugin cohort stays where it is.
    assert [p.path for p in check(config, _live(), "prod")] == ["cohorts[1]"]


def test_a_device_plugin_namespace_move_is_refused_too() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT], namespaces={"devicePlugin": "team-gpu"})

    problems = check_replacements(config, _live(), "prod")

    assert [p.path for p in problems] == ["cohorts[0]"]
    assert "in namespace team-gpu on nodes dp-ours" in problems[0].message
    assert "pod gpu-system/hybrid-gpu-plugin-nvidia-device-plugin-x7k2p" in problems[0].message


def test_a_cohort_rename_starts_a_second_release_and_is_refused() -> None:
    config = _config(cohorts=[PLUGIN_COHORT, cohort(DRA_COHORT, name="h200")])

    problems = check_replacements(config, _live(), "prod")

    assert [p.path for p in problems] == ["cohorts[1]"]
    assert "for cohort h200 in namespace gpu-dra-system on nodes dra-ours" in problems[0].message
    assert "`eks-hybrid-gpu migrate --stack prod --cohort h200 --to dra`" in problems[0].message


def test_a_host_relabelled_from_another_declared_cohort_names_move_host() -> None:
    relabelled = {"workload.example.com/gpu-allocation": "fast"}
    live = _live()
    nodes = [
        {**n, "metadata": {**n["metadata"], "labels": {**n["metadata"]["labels"], **relabelled}}}
        if n["metadata"]["name"] == "dra-ours"
        else n
        for n in live.nodes
    ]
    fast = {"name": "fast", "owner": "dra", "hostDriverVerified": True, "nodeSelector": relabelled}
    config = _config(cohorts=[PLUGIN_COHORT, DRA_COHORT, fast])

    problems = check_replacements(config, replace(live, nodes=nodes), "prod")

    assert [p.path for p in problems] == ["cohorts[2]"]
    assert "those hosts are moving from cohort dra" in problems[0].message
    assert "`eks-hybrid-gpu move-host NODE --to fast --drain`" in problems[0].message


def _ledger(owner: str, namespace: str) -> dict[str, Any]:
    name = {"device-plugin": "plugin", "dra": "dra", "gpu-operator": "operator"}[owner]
    return {"cohorts": {name: {"owner": owner, "namespace": namespace, "nodeSelector": {}}}, "operatorMode": None}


@pytest.mark.parametrize(
    ("owner", "key", "base", "fix"),
    [
        ("dra", "draDriver", DRA_COHORT, "`eks-hybrid-gpu migrate --stack prod --cohort dra --to dra`"),
        ("device-plugin", "devicePlugin", PLUGIN_COHORT, "move it in two updates: remove the device-plugin cohorts"),
        ("gpu-operator", "gpuOperator", OPERATOR_COHORT, "two GPU Operators would reconcile the same nodes"),
    ],
)
def test_a_namespace_move_the_ledger_shows_is_refused_per_owner(
    owner: str, key: str, base: dict[str, Any], fix: str
) -> None:
    config = _config(cohorts=[base], namespaces={key: "elsewhere"})
    ledger = _ledger(owner, "before")
    if owner == "gpu-operator":
        ledger["operatorMode"] = config.operator_mode

    ref = "before/gpu-allocation-ledger"
    problems = check_ledger(config, ledger_of(ledger, ref), None, [], {}, "prod", ref)

    assert [p.path for p in problems] == [f"namespaces.{key}"]
    assert problems[0].message.startswith(
        f"moves cohort {config.cohorts[0].name}'s {owner} from namespace before (the cluster's ledger "
        "before/gpu-allocation-ledger) to elsewhere in one step"
    )
    assert fix in problems[0].message


def test_the_same_namespace_or_an_old_ledger_without_one_is_no_move() -> None:
    config = _config(cohorts=[DRA_COHORT])
    same = LedgerCohort("dra", "dra", {}, "gpu-dra-system", {"owner": "dra", "namespace": "gpu-dra-system"})
    old = LedgerCohort("dra", "dra", {}, None, {"owner": "dra"})
    assert namespace_move(config, "dra", same, 0, "s", "l") is None
    assert namespace_move(config, "dra", old, 0, "s", "l") is None
