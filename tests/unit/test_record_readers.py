"""One refusal for a record that cannot be read, in every reader: the preflight, inspect, move-host and migrate.

A broken or hostile ledger or migration record is never a traceback and never a plan: each reader stops with one
line naming the ConfigMap and what to do, and changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.judge.live import LiveReadError
from cluster.records.ledger import LedgerError
from cluster.records.migration import Migration
from cluster.records.read import read_records
from eks_hybrid_gpu import migrate, movehost
from eks_hybrid_gpu.cluster_access import run_reporting
from eks_hybrid_gpu.inspection import gather
from tests.unit.test_migrate import LEDGER, NS, RECORD, FakeKube, _args, cluster

pytestmark = pytest.mark.unit

NESTED = "[" * 200 + "]" * 200
HOSTILE_LEDGERS = {
    "bad JSON": '{"cohorts": ',
    "not an object": '["plugin"]',
    "no cohorts": '{"operatorMode": null}',
    "wrong types": '{"cohorts": {"plugin": {"owner": 7, "nodeSelector": "a=b"}}}',
    "deep nesting": '{"cohorts": ' + NESTED + "}",
    "shell metacharacters": '{"cohorts": {"$(reboot)": {"owner": "dra", "nodeSelector": {"k": "`id`"}}}}',
}
HOSTILE_MIGRATIONS = {
    "bad JSON": '{"phase": ',
    "unknown phase": json.dumps(
        {"cohort": "plugin", "from": "device-plugin", "to": "dra", "phase": "rm -rf /", "nodeSelector": {}}
    ),
    "wrong types": json.dumps(
        {"cohort": "plugin", "from": "device-plugin", "to": "dra", "phase": "remove", "nodeSelector": "a=b"}
    ),
    "no target": json.dumps({"cohort": "plugin", "from": "device-plugin", "phase": "remove", "nodeSelector": {}}),
    "deep nesting": '{"cohort": ' + NESTED + "}",
    "cohort not a name": json.dumps(
        {
            "cohort": "plugin;touch /tmp/owned;$(id)",
            "from": "device-plugin",
            "to": "dra",
            "phase": "remove",
            "nodeSelector": {},
        }
    ),
    "node not a name": json.dumps(
        {
            "cohort": "plugin",
            "from": "device-plugin",
            "to": "dra",
            "phase": "remove",
            "nodeSelector": {},
            "nodes": ["gpu-1/status"],
        }
    ),
    "moved node not a name": json.dumps(
        {
            "cohort": "plugin",
            "from": "device-plugin",
            "to": "dra",
            "phase": "remove",
            "nodeSelector": {},
            "moved": ["../gpu-1"],
        }
    ),
}


def _with(kube: FakeKube, path: str, key: str, text: str) -> FakeKube:
    name = path.rsplit("/", 1)[1]
    kube.objects[path] = {"metadata": {"name": name, "namespace": NS}, "data": {key: text}}
    return kube


def _preflight(kube: FakeKube) -> None:
    """What the program does with the records: read the ledger and the migration record, each checked."""
    read_records(kube, f"{NS}/gpu-allocation-ledger", leases=True)  # type: ignore[arg-type]


def _movehost(kube: FakeKube) -> None:
    request = movehost.MoveRequest(node="gpu-1", to="plugin", ledger=f"{NS}/gpu-allocation-ledger", dry_run=True)
    movehost.move(kube, request)  # type: ignore[arg-type]


def _readers(project: Path) -> dict[str, Any]:
    return {
        "preflight": _preflight,
        "inspect": lambda kube: gather(kube, "ai-workloads", f"{NS}/gpu-allocation-ledger"),
        "move-host": _movehost,
        "migrate": lambda kube: migrate.plan(
            kube, migrate.read_stack_file("t", project), migrate.ClusterRecords(kube, NS), _args(project, "--dry-run")
        ),
    }


@pytest.mark.parametrize("reader", ["preflight", "inspect", "move-host", "migrate"])
@pytest.mark.parametrize(("record", "path", "key", "text"), [
    *[(f"ledger: {k}", LEDGER, "ownership.json", v) for k, v in HOSTILE_LEDGERS.items()],
    *[(f"migration: {k}", RECORD, "migration.json", v) for k, v in HOSTILE_MIGRATIONS.items()],
])  # fmt: skip
def test_every_reader_refuses_a_broken_record_in_one_line_naming_it(
    project: Path, reader: str, record: str, path: str, key: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = _with(cluster(), path, key, text)
    read = _readers(project)[reader]
    writes = list(kube.writes)

    code = run_reporting(reader, lambda: read(kube) or 0, (LedgerError, LiveReadError, movehost.MoveRefused))

    line = capsys.readouterr().err
    assert code == 1, record
    assert line.count("\n") == 1, line
    assert f"ConfigMap {NS}/{path.rsplit('/', 1)[1]}" in line, line
    assert "Traceback" not in line
    assert line.count("nothing was changed") <= 1, line
    if record.startswith("migration"):
        assert "`pulumi up`" not in line, line
        assert "`eks-hybrid-gpu migrate`" in line, line
    assert kube.writes == writes


def test_move_host_refuses_a_host_moving_into_or_out_of_a_cohort_mid_migration() -> None:
    migration = Migration("dra", "device-plugin", "dra", "wait-unpublished", {})
    with pytest.raises(movehost.MoveRefused) as into:
        movehost.refuse_mid_migration(migration, "dra", "plugin", "gpu-9")
    assert str(into.value) == (
        "cohort dra is mid-migration (cohort dra from device-plugin to dra, phase wait-unpublished), so node gpu-9 "
        "cannot move into it now; finish it with `eks-hybrid-gpu migrate --stack STACK --cohort dra --to dra`, then "
        "run this move again"
    )
    with pytest.raises(movehost.MoveRefused, match="cannot move out of it now"):
        movehost.refuse_mid_migration(migration, "plugin", "dra", "gpu-9")
    movehost.refuse_mid_migration(migration, "plugin", "other", "gpu-9")  # neither cohort: the move may go on
    movehost.refuse_mid_migration(None, "dra", "plugin", "gpu-9")
