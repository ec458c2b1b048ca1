"""Commands are commands: argv is parsed once into a frozen request, and the domain gets that request, never argparse.

`move-host`, `migrate` and `simulate preview|up|destroy` build their request at the edge; a name that is no name
stops there with one line and exit 2, before any cluster is reached; `migrate --merge-into` hands each host to
`move-host`'s domain as a MoveRequest.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from cluster.records.lease_records import started_this_process
from eks_hybrid_gpu import cli, migrate, movehost
from eks_hybrid_gpu.cli import parser
from eks_hybrid_gpu.simulate.rehearse import Rehearsal
from tests.support.configs import DRA_COHORT, PLUGIN_COHORT, cohort
from tests.unit.test_migrate import FakeUp, _stack_with, _two_cohorts, cluster

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


class Captured:
    """Stands in for a command's domain call: records what it was handed."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.keywords: list[dict[str, Any]] = []

    def __call__(self, *args: Any, **keywords: Any) -> int:
        self.calls.append(args)
        self.keywords.append(keywords)
        return 0


def _no_cluster(*_: object) -> object:
    return object()


def test_move_host_hands_the_domain_one_frozen_request_built_from_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    moved = Captured()
    monkeypatch.setattr(movehost, "move", moved)
    monkeypatch.setattr(movehost, "connect", _no_cluster)

    argv = ["move-host", "gpu-1", "--to", "dra", "--drain", "--timeout", "90s", "--context", "east", "--dry-run"]
    assert cli.main(argv) == 0

    assert len(moved.calls) == 1
    request = moved.calls[0][1]
    assert request == movehost.MoveRequest(
        node="gpu-1", to="dra", drain=True, timeout=90.0, dry_run=True, context="east"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.node = "gpu-2"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["move-host", "Not_A_Node", "--to", "dra"], "move-host: "),
        (["move-host", "gpu-1", "--to", "dra", "--ledger", "no-slash"], "move-host: "),
        (["migrate", "--stack", "bad stack", "--cohort", "plugin", "--to", "dra"], "migrate: "),
        (["migrate", "--stack", "t", "--cohort", "plugin", "--to", "dra", "--merge-into", "../x"], "migrate: "),
    ],
)
def test_a_bad_name_exits_2_with_one_line_before_any_cluster_is_reached(
    argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def reached(*_: object) -> object:
        pytest.fail("a bad name reached the cluster")

    monkeypatch.setattr(movehost, "connect", reached)
    monkeypatch.setattr(migrate.cli, "connect", reached)

    assert cli.main(argv) == 2

    err = capsys.readouterr().err
    assert err.startswith(says)
    assert err.count("\n") == 1


def test_migrate_hands_the_domain_one_frozen_request_and_the_stack_file_it_read(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    ran = Captured()
    monkeypatch.setattr(migrate.cli, "migrate", ran)
    monkeypatch.setattr(migrate.cli, "connect", _no_cluster)

    argv = ["migrate", "--stack", "t", "--cohort", "plugin", "--to", "dra", "--timeout", "1m", "--dry-run"]
    assert cli.main([*argv, "--project", str(project)]) == 0

    assert len(ran.calls) == 1
    _, stack, request, *_ = ran.calls[0]
    assert request == migrate.MigrateRequest(
        stack="t", cohort="plugin", to="dra", timeout=60.0, dry_run=True, project=project
    )
    assert stack.name == "t"
    assert request.rerun() == (
        f"eks-hybrid-gpu migrate --stack t --cohort plugin --to dra --project {project} --timeout 60.0"
    )
    assert started_this_process(ran.keywords[0]["holder"])  # its Leases' holder, which its own pulumi up is told


def test_merge_into_hands_move_host_a_move_request_per_host(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stack_with(project, [cohort(PLUGIN_COHORT), cohort(DRA_COHORT)], {})
    kube = cluster()
    _two_cohorts(kube)
    moved = Captured()
    monkeypatch.setattr(movehost, "move", moved)
    argv = ["migrate", "--stack", "t", "--cohort", "plugin", "--to", "dra", "--project", str(project)]
    request = migrate.MigrateRequest.from_args(
        parser("migrate").parse_args([*argv, "--merge-into", "dra", "--dry-run", "--context", "east"])
    )

    assert migrate.migrate(kube, migrate.read_stack_file("t", project), request, FakeUp(kube)) == 0  # type: ignore[arg-type]

    ledger = "gpu-system/gpu-allocation-ledger"
    assert [call[1] for call in moved.calls] == [
        movehost.MoveRequest(node=node, to="dra", dry_run=True, ledger=ledger, context="east")
        for node in ("gpu-1", "gpu-2")
    ]


@pytest.mark.parametrize("action", ["preview", "up", "destroy"])
def test_a_rehearsal_is_parsed_once_and_destroy_takes_no_chart_mirror(action: str) -> None:
    args = parser("simulate").parse_args(["simulate", action, "--stack-file", "./rehearse.yaml"])
    assert Rehearsal.from_args(args) == Rehearsal(action, "local", "./rehearse.yaml", None, yes=False)


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real run"])
def test_merge_into_runs_what_its_dry_run_shows(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], dry_run: bool
) -> None:
    """Both go through the command's edge; neither builds a `pulumi up` runner, which judged a second DRA cohort."""
    from eks_hybrid_gpu import projectdir
    from eks_hybrid_gpu.migrate import cli as migrate_cli

    _stack_with(project, [cohort(PLUGIN_COHORT), cohort(DRA_COHORT)], {})
    shutil.copy(projectdir.SHIPPED / "Pulumi.yaml", project)
    kube = cluster()
    _two_cohorts(kube)
    moved = Captured()
    monkeypatch.setattr(movehost, "move", moved)
    monkeypatch.setattr(migrate_cli, "connect", lambda *_: kube)

    def no_runner(*_: object) -> None:
        pytest.fail("a merge runs no pulumi up, so it builds no stack runner")

    monkeypatch.setattr(migrate_cli, "stack_runner", no_runner)
    argv = ["migrate", "--stack", "t", "--cohort", "plugin", "--to", "dra", "--merge-into", "dra"]
    argv += ["--project", str(project), *(["--dry-run"] if dry_run else ["--yes"])]

    assert migrate_cli.run(parser("migrate").parse_args(argv)) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert "a second dra cohort" not in out + err
    assert "merge: 2 host(s) of cohort plugin into cohort dra (dra), one at a time" in out
    assert [(call[1].node, call[1].dry_run) for call in moved.calls] == [("gpu-1", dry_run), ("gpu-2", dry_run)]
    if not dry_run:
        assert "every host of cohort plugin serves cohort dra; remove cohort plugin from" in out
        assert not [p for p in kube.objects if "/leases/" in p]  # the cohorts' Leases were taken and given back
