"""kubectl's and pulumi's habits: flags before the command, -o json|yaml with apiVersion/kind, tables that fit the
terminal, a question before a migration changes the cluster, org-qualified stacks, and shell completion."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.records.migration import PHASES
from eks_hybrid_gpu import cli, completion, confirm, migrate, movehost, terminal
from eks_hybrid_gpu.inspection import render, report
from eks_hybrid_gpu.migrate import cli as migrate_cli
from eks_hybrid_gpu.simulate import cli as simulate_cli
from tests.support.configs import DRA_COHORT, PLUGIN_COHORT, cohort
from tests.unit.test_migrate import RECORD, FakeUp, _stack_with, _two_cohorts, cluster

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
API_VERSION = "eks-hybrid-gpu/v1alpha1"


class Terminal(io.StringIO):
    """Typed answers on a terminal."""

    def isatty(self) -> bool:
        return True


# ---------------------------------------------------------------- shared flags where users put them


def _seen(monkeypatch: pytest.MonkeyPatch, module: str) -> list[Any]:
    seen: list[Any] = []
    monkeypatch.setattr(module, lambda args: seen.append(args) or 0)
    return seen


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "--kubeconfig", "/k", "--context", "prod", "-o", "yaml"],
        ["--kubeconfig", "/k", "--context", "prod", "-o", "yaml", "inspect"],
        ["--kubeconfig=/k", "--context=prod", "-oyaml", "inspect"],
        ["--kubeconfig", "/k", "inspect", "--context", "prod", "--output", "yaml"],
    ],
)
def test_shared_flags_are_taken_before_the_command_as_after_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _seen(monkeypatch, "eks_hybrid_gpu.inspection.run")
    assert cli.main(argv) == 0
    assert [(a.kubeconfig, a.context, a.output) for a in seen] == [("/k", "prod", "yaml")]


def test_a_flag_value_that_names_a_command_is_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _seen(monkeypatch, "eks_hybrid_gpu.inspection.run")
    assert cli.main(["--context", "local", "--namespace", "smoke", "inspect"]) == 0
    assert [(a.context, a.namespace) for a in seen] == [("local", "smoke")]


def test_shared_flags_before_a_nested_command_reach_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _seen(monkeypatch, "eks_hybrid_gpu.simulate.cli.run")
    assert cli.main(["--kubeconfig", "/k", "-o", "json", "simulate", "show"]) == 0
    assert [(a.simulate_command, a.kubeconfig, a.output) for a in seen] == [("show", "/k", "json")]


def test_a_shared_flag_the_command_lacks_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--yes", "inspect"]) == 2
    assert "unrecognized arguments: --yes" in capsys.readouterr().err
    assert cli.main(["--bogus", "inspect"]) == 2


# ---------------------------------------------------------------- org-qualified stacks


def test_an_org_qualified_stack_reads_the_file_of_its_last_segment(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    kube = cluster()
    monkeypatch.setattr(migrate_cli, "connect", lambda *_: kube)
    for stack in ("myorg/t", "myorg/eks-hybrid-gpu/t"):
        argv = [
            "migrate",
            "--stack",
            stack,
            "--cohort",
            "plugin",
            "--to",
            "dra",
            "--dry-run",
            "--project",
            str(project),
        ]
        assert cli.main(argv) == 0
        assert "--dry-run: nothing was changed" in capsys.readouterr().out
    assert migrate.read_stack_file("myorg/t", project).path == project / "stacks" / "Pulumi.t.yaml"


def test_another_projects_stack_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "fleet", "--stack", "myorg/other/prod"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("simulate fleet: --stack 'myorg/other/prod' names project 'other'")


# ---------------------------------------------------------------- migrate asks first


def _wired(project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, FakeUp]:
    """`migrate` from the command line against the recorded cluster, each phase's `pulumi up` the fake one."""
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    kube = cluster()
    up = FakeUp(kube)
    monkeypatch.setattr(migrate_cli, "connect", lambda *_: kube)
    monkeypatch.setattr(migrate_cli, "stack_runner", lambda *_: up)
    return kube, up


def _migrate_argv(project: Path, *extra: str) -> list[str]:
    return ["migrate", "--stack", "t", "--cohort", "plugin", "--to", "dra", "--project", str(project), *extra]


def test_without_a_terminal_or_yes_migrate_refuses_in_one_line_before_reading_anything(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_cluster(*_: object) -> None:
        pytest.fail("refused before any cluster is reached")

    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    monkeypatch.setattr(migrate_cli, "connect", no_cluster)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # a pipe: nobody is asked, even if it says yes
    assert cli.main(_migrate_argv(project)) == confirm.NO_TERMINAL_EXIT_CODE == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "migrate: this run changes the cluster and asks first, but stdin is not a terminal: pass --yes to run it "
        "without asking (or --dry-run to print the plan and change nothing)\n"
    )


@pytest.mark.parametrize(("answer", "code"), [("n\n", 1), ("\n", 1), ("", 1), ("yes please\n", 1), ("y\n", 0)])
def test_on_a_terminal_migrate_shows_the_plan_then_changes_only_on_yes(
    project: Path, answer: str, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kube, up = _wired(project, monkeypatch)
    monkeypatch.setattr("sys.stdin", Terminal(answer))

    assert cli.main(_migrate_argv(project, "--timeout", "5")) == code

    out, err = capsys.readouterr()
    question = "Run this plan (cohort plugin from device-plugin to dra, phase cordon)? [y/N] "
    assert err.startswith(question)
    assert "plan:\n  1. [cordon] cordon gpu-1, gpu-2" in out
    if code:
        assert "not confirmed: nothing was changed" in out
        assert up.calls == []
        assert RECORD not in kube.objects
        assert not [n for n in ("gpu-1", "gpu-2") if kube.objects[f"/api/v1/nodes/{n}"]["spec"].get("unschedulable")]
        assert not [p for p in kube.objects if "/leases/" in p]
    else:
        assert out.index("plan:") < out.index("[phase cordon] recorded")
        assert up.calls == ["remove", "install"]


def test_yes_and_dry_run_never_ask(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, up = _wired(project, monkeypatch)
    monkeypatch.setattr("sys.stdin", Terminal(""))  # an answer would be read as no
    assert cli.main(_migrate_argv(project, "--dry-run")) == 0
    assert cli.main(_migrate_argv(project, "-y", "--timeout", "5")) == 0
    assert up.calls == ["remove", "install"]


def test_the_rerun_line_keeps_yes_so_a_script_continues_as_it_started(project: Path) -> None:
    argv = _migrate_argv(project, "--yes")[1:]
    request = migrate.MigrateRequest.from_args(cli.parser("migrate").parse_args(["migrate", *argv]))
    assert " --yes" in request.rerun()
    without = migrate.MigrateRequest.from_args(cli.parser("migrate").parse_args(_migrate_argv(project)))
    assert "--yes" not in without.rerun()


def test_a_merge_asks_once_the_hosts_are_listed(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stack_with(project, [cohort(PLUGIN_COHORT), cohort(DRA_COHORT)], {})
    kube = cluster()
    _two_cohorts(kube)
    moved: list[object] = []
    monkeypatch.setattr(movehost, "move", lambda *args: moved.append(args) or 0)
    request = migrate.MigrateRequest.from_args(
        cli.parser("migrate").parse_args([*_migrate_argv(project), "--merge-into", "dra"])
    )
    asked: list[str] = []
    declined = migrate.migrate(
        kube, migrate.read_stack_file("t", project), request, FakeUp(kube), lambda q: asked.append(q) or False
    )
    assert declined == confirm.DECLINED_EXIT_CODE
    assert asked == ["Move these 2 host(s) into cohort dra?"]
    assert moved == []


# ---------------------------------------------------------------- -o json|yaml: one document with apiVersion and kind


def test_migrate_prints_one_typed_document_and_its_progress_on_stderr(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, up = _wired(project, monkeypatch)

    assert cli.main(_migrate_argv(project, "--yes", "--timeout", "5", "-o", "json")) == 0

    out, err = capsys.readouterr()
    document = json.loads(out)
    assert (document["apiVersion"], document["kind"]) == (API_VERSION, "MigrateResult")
    assert document["spec"] == {
        "stack": "t", "cohort": "plugin", "to": "dra", "drain": False, "dryRun": False, "mergeInto": None,
        "timeout": 5.0,
    }  # fmt: skip
    status = document["status"]
    assert (status["result"], status["exitCode"]) == ("done", 0)
    assert status["plan"][0].startswith("1. [cordon] cordon gpu-1, gpu-2")
    assert [n["name"] for n in status["before"]] == [n["name"] for n in status["after"]] == ["gpu-1", "gpu-2"]
    assert [n["publishes"]["resourceSlices"] for n in status["before"]] == [[], []]
    assert all(n["publishes"]["resourceSlices"] for n in status["after"])
    assert list(status["secondsPerPhase"]) == list(PHASES)
    assert "[phase cordon] recorded" in err  # the progress, where a script does not parse it
    assert up.calls == ["remove", "install"]


def test_a_dry_run_move_host_prints_its_plan_as_yaml(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = cluster()
    _two_cohorts(kube)
    monkeypatch.setattr(movehost, "connect", lambda *_: kube)

    assert cli.main(["move-host", "gpu-1", "--to", "dra", "--dry-run", "-o", "yaml"]) == 0

    out, err = capsys.readouterr()
    document = yaml.safe_load(out)
    assert (document["apiVersion"], document["kind"]) == (API_VERSION, "MoveHostResult")
    assert document["spec"]["node"] == "gpu-1"
    assert document["status"]["result"] == "planned"
    assert document["status"]["plan"][0] == "cordon gpu-1 and record the move on it"
    assert document["status"]["before"][0]["cordoned"] is False
    assert document["status"]["after"] == []
    assert "--dry-run: nothing was changed" in err


def test_a_refused_run_still_prints_its_document_with_the_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = cluster()
    monkeypatch.setattr(movehost, "connect", lambda *_: kube)
    assert cli.main(["move-host", "gpu-1", "--to", "nowhere", "-o", "json"]) == 1
    out, err = capsys.readouterr()
    status = json.loads(out)["status"]
    assert (status["result"], status["exitCode"]) == ("stopped", 1)
    assert err.splitlines()[-1] == "move-host: the ledger has no cohort nowhere; cohorts: plugin"


def test_simulate_show_is_a_typed_list(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"name": "sim-1", "labels": {}, "gpuResources": {}, "draDevices": []}]
    monkeypatch.setattr(simulate_cli.cluster_access, "connect", lambda *_: object())
    monkeypatch.setattr(simulate_cli, "describe", lambda _kube: rows)
    assert cli.main(["simulate", "show", "-o", "json", "--kubeconfig", "/k"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "apiVersion": API_VERSION,
        "kind": "SimulatedNodeList",
        "items": rows,
    }


# ---------------------------------------------------------------- tables that fit the terminal


def test_a_table_is_cut_with_an_ellipsis_then_narrowed_from_the_right() -> None:
    rows = [("node", "owner", "findings"), ("gpu-node-with-a-long-name", "dra", "x" * 80)]
    assert terminal.fitted(rows, None) == terminal.table_lines(rows)
    lines = terminal.fitted(rows, 60, indent=2)
    assert max(len(line) for line in lines) + 2 <= 60
    assert lines[1].startswith("gpu-node-with-a-long-name  dra  ")
    assert lines[1].endswith("…")
    narrow = terminal.fitted(rows, 30)
    assert [line.split()[0] for line in narrow] == ["node", "gpu-node-with-a-long-name"]
    assert max(len(line) for line in narrow) <= 30
    assert terminal.fitted(rows, 5)[1] == "gpu-node-with-a-long-name"  # the first column is always whole


def test_the_width_is_the_terminals_and_wide_or_a_pipe_prints_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "91")
    assert terminal.terminal_width() == 91
    assert terminal.terminal_width("wide") is None
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert terminal.terminal_width() is None


def test_inspects_tables_fit_an_80_column_terminal() -> None:
    from tests.unit.test_inspection import CLAIM, snapshot  # the recorded cluster inspect's own tests use

    document = report(snapshot([CLAIM]))
    full = render(document, wide=True).splitlines()
    fitted = render(document, width=80).splitlines()
    tables = [line for line in fitted if line.startswith("  ") and not line.startswith(("  CONFLICT", "  warning"))]
    assert max(len(line) for line in full) > 80
    assert tables
    assert max(len(line) for line in tables) <= 80


# ---------------------------------------------------------------- shell completion


def _bash_complete(script: str, words: list[str]) -> list[str]:
    program = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
        '_eks_hybrid_gpu; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_commands_nested_commands_flags_and_their_values() -> None:
    script = completion.script("bash")
    assert _bash_complete(script, ["eks-hybrid-gpu", ""]) == list(cli.COMMANDS)
    assert _bash_complete(script, ["eks-hybrid-gpu", "mi"]) == ["migrate"]
    assert _bash_complete(script, ["eks-hybrid-gpu", "migrate", "--y"]) == ["--yes"]
    assert _bash_complete(script, ["eks-hybrid-gpu", "migrate", "--to", ""]) == ["device-plugin", "dra", "gpu-operator"]
    assert _bash_complete(script, ["eks-hybrid-gpu", "inspect", "-o", "y"]) == ["yaml"]
    assert _bash_complete(script, ["eks-hybrid-gpu", "simulate", "sh"]) == ["show"]
    assert "--output" in _bash_complete(script, ["eks-hybrid-gpu", "simulate", "show", "--"])
    assert _bash_complete(script, ["eks-hybrid-gpu", "completion", ""]) == ["bash", "zsh", "fish"]


def test_every_command_and_flag_of_the_parser_is_in_each_shells_script() -> None:
    levels = list(completion.levels(cli.parser(every=True)))
    flags = {spelling for level in levels for flag in level.flags for spelling in flag.spellings}
    assert {"--kubeconfig", "--yes", "--output", "--dry-run", "--chart-mirror"} <= flags
    for shell in completion.SHELLS:
        script = completion.script(shell)
        for level in levels:
            for name in level.commands:
                assert name in script
        for spelling in flags:
            fish_form = f"-l {spelling[2:]}" if spelling.startswith("--") else f"-s {spelling[1:]}"
            assert (fish_form if shell == "fish" else spelling) in script, (shell, spelling)
    assert "bashcompinit" in completion.script("zsh")


def test_completion_prints_the_script_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["completion", "fish"]) == 0
    assert capsys.readouterr().out == completion.script("fish")
    assert cli.main(["completion", "tcsh"]) == 2


def test_review_prints_its_result_as_a_typed_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from contextlib import nullcontext
    from types import SimpleNamespace

    from eks_hybrid_gpu import engine
    from eks_hybrid_gpu import review as review_command
    from eks_hybrid_gpu.review import gitref
    from eks_hybrid_gpu.review import render as review_render
    from tests.unit.test_review_report import _review

    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.local.yaml").write_text("config: {}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    result = _review()
    base = SimpleNamespace(project_dir=tmp_path, label="`main` (abc)")
    monkeypatch.setattr(gitref, "export", lambda *_: base)
    monkeypatch.setattr(engine, "ensure_toolchain", lambda: SimpleNamespace(activate=lambda: None))
    monkeypatch.setattr(review_render, "chart_repository", lambda *_: None)
    monkeypatch.setattr(review_render, "chart_mirror", lambda _charts: nullcontext((None, None)))
    monkeypatch.setattr(review_render, "policy_setup", lambda *_: ({}, None))
    monkeypatch.setattr(review_command, "make_env", lambda *_a, **_k: None)
    monkeypatch.setattr(review_command, "review", lambda *_: result)
    argv = ["review", "--stack", "myorg/local", "--kubeconfig", str(kubeconfig), "--out", str(tmp_path / "out")]

    assert cli.main([*argv, "--project", str(tmp_path), "-o", "yaml"]) == 0

    assert yaml.safe_load(capsys.readouterr().out) == {
        "apiVersion": API_VERSION,
        "kind": "ReviewResult",
        **result.as_json(),
    }
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == result.as_json()


def test_local_status_is_a_typed_document_in_json_or_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from eks_hybrid_gpu import local, localcluster

    running = localcluster.LocalCluster(tmp_path, "https://127.0.0.1:6443", "t")
    monkeypatch.setattr(localcluster, "attach", lambda _state: running)
    monkeypatch.setattr(localcluster, "running", lambda _state: ["kube-apiserver", "etcd"])
    monkeypatch.setattr(local, "local_state_dir", lambda: tmp_path)
    body = {"server": running.server, "kubeconfig": str(running.kubeconfig), "running": ["kube-apiserver", "etcd"]}
    typed = {"apiVersion": API_VERSION, "kind": "LocalStatus", **body}

    assert cli.main(["local", "status"]) == 0
    assert json.loads(capsys.readouterr().out) == typed
    assert cli.main(["local", "status", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == typed


def test_smoke_is_a_typed_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from eks_hybrid_gpu.smoke import cli as smoke_cli
    from testkit.fake_kube import FakeKube

    monkeypatch.setattr(smoke_cli.cluster_access, "connect", lambda *_: FakeKube())
    assert cli.main(["smoke", "-o", "json", "--out", str(tmp_path / "results")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "apiVersion": API_VERSION,
        "kind": "SmokeReport",
        "namespace": "ai-workloads",
        "jobs": [],
        "captured": [],
        "simulatedNodes": [],
        "removed": [],
    }
