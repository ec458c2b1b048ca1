"""Random command lines for every command: exit 0, 1 or 2, never a traceback, one escaped line on stderr.

Each example walks one command's parser (`eks_hybrid_gpu.cli.parser`): a subcommand where it has them, its
positionals, a random subset of its options, each with a value drawn from hostile and plausible ones (newlines, NUL
bytes, `..`, folders, missing files, huge text, durations), plus stray tokens. No cluster is reachable
(`$KUBECONFIG` names a file that does not exist, the cache is empty): what reads a cluster refuses in one line
with exit 2; what would start processes, build the toolchain or run the engine (`local`, `review`, `hostcheck`,
`simulate start|stop|preview|up|destroy`) is parsed only. Nothing is written in the working directory.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.findings import show
from eks_hybrid_gpu import cli

pytestmark = pytest.mark.unit

PARSED_ONLY = {"local", "review", "hostcheck"}
"""Commands whose body starts processes, builds the toolchain or runs the engine (or is another module's to fuzz)."""
SIMULATE_PARSED_ONLY = ("_start", "_stop", "_rehearse")
PLAUSIBLE = st.sampled_from(
    ["local", "dra", "plugin", "gpu-1", "gpu-system/gpu-allocation-ledger", "kube-system", "10m"]
)
VALUES = st.one_of(
    PLAUSIBLE,
    st.sampled_from(
        [
            "",
            "-",
            "--",
            "x\ny",
            "a\x00b",
            "\x1b[31mred",
            "..",
            "../../etc",
            "/",
            "/dev/null",
            "/etc/hostname",
            "/nonexistent/kubeconfig",
            "local",
            "dra",
            "plugin",
            "gpu-1",
            "gpu-system/gpu-allocation-ledger",
            "kube-system",
            "10m",
            "0",
            "-1",
            "1e999",
            "1h30m",
            "json",
            "é",
            "a" * 400,
        ]
    ),
    st.text(max_size=16),
)


def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def argv_of(parser: argparse.ArgumentParser, draw: Callable[[Any], Any]) -> list[str]:
    """A command line for `parser`: subcommand, positionals, some options with values, some stray tokens."""
    argv: list[str] = []
    for action in actions(parser):
        if isinstance(action, argparse._SubParsersAction):
            name = draw(st.sampled_from(sorted(action.choices)))
            return [*argv, name, *argv_of(action.choices[name], draw)]
        if not action.option_strings:
            if draw(st.integers(0, 9)) > 0:
                argv.append(draw(VALUES))
            continue
        # A required option is mostly given and --project (every command's, checked first) seldom: bodies run.
        wanted = action.required and draw(st.integers(0, 9)) > 0
        rare = action.dest == "project" and draw(st.integers(0, 9)) > 0
        if action.dest in ("help", "version") or rare or not (wanted or draw(st.booleans())):
            continue
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            choose = action.choices and draw(st.integers(0, 9)) > 0
            argv.append(draw(st.sampled_from(sorted(action.choices))) if choose else draw(VALUES))  # type: ignore[arg-type]
    if draw(st.integers(0, 7)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(VALUES))
    return argv


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one command, its arguments filled in as `cli.main` fills them."""
    found = next(a for a in actions(cli.parser(command)) if isinstance(a, argparse._SubParsersAction))
    return found.choices[command]


@pytest.fixture(name="isolated")
def isolated_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No cluster, no cache, no home; the bodies that would start anything parsed only; cwd an empty folder."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EKS_HYBRID_GPU_CACHE", str(tmp_path / "cache"))
    for name in PARSED_ONLY:
        monkeypatch.setattr(importlib.import_module(cli.COMMANDS[name][0]), "run", lambda _args: 0)
    simulate_cli = importlib.import_module("eks_hybrid_gpu.simulate.cli")
    for handler in SIMULATE_PARSED_ONLY:
        monkeypatch.setattr(simulate_cli, handler, lambda _args: 0)
    return work


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
@settings(
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_argv_exits_0_1_or_2_with_one_line(
    command: str, data: st.DataObject, isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, *argv_of(command_parser(command), data.draw)]
    try:
        code = cli.main(argv)
    except SystemExit as stop:  # pragma: no cover - main returns; a SystemExit escaping it is a finding
        pytest.fail(f"{argv!r}: SystemExit({stop.code}) escaped main")
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code != 0:
        lines = err.strip("\n").split("\n")
        assert len(lines) == 1, (argv, err)
        assert lines[0].isprintable(), (argv, err)
    assert list(isolated.iterdir()) == [], (argv, "wrote into the working directory")
    del out


def test_a_usage_error_is_one_escaped_line_naming_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", "--bogus", "a\nb\x00c"]) == 2
    assert capsys.readouterr().err == (
        "eks-hybrid-gpu: unrecognized arguments: --bogus a\\nb\\x00c; see `eks-hybrid-gpu --help`\n"
    )
    assert cli.main(["move-host", "gpu-1"]) == 2
    assert capsys.readouterr().err == (
        "eks-hybrid-gpu move-host: the following arguments are required: --to; see `eks-hybrid-gpu move-host --help`\n"
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["simulate", "fleet", "--stack", "a\nb"],
            "simulate fleet: --stack 'a\\nb' is not a stack name (STACK, ORG/STACK or ORG/PROJECT/STACK, each part "
            "letters, digits, '-', '_' and '.', at most 100 characters, starting with a letter or digit): pass NAME of "
            "stacks/Pulumi.NAME.yaml (or ORG/NAME)",
        ),
        (
            ["simulate", "apply", "--file", "/nonexistent/cohorts.yaml"],
            "simulate apply: --file '/nonexistent/cohorts.yaml': no such file; pass the path of a cohorts YAML file "
            "(`simulate fleet` prints one)",
        ),
        (
            ["simulate", "apply", "--file", "/"],
            "simulate apply: --file '/': is a folder, not a file; pass the path of a cohorts YAML file (`simulate "
            "fleet` prints one)",
        ),
    ],
)
def test_simulate_arguments_it_cannot_use_exit_2_in_words(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == line + "\n"
    assert "Errno" not in err


def test_a_fleet_file_that_is_not_utf8_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cohorts.yaml"
    path.write_bytes(b"nodes:\n  - name: sim-\xff\n")
    assert cli.main(["simulate", "apply", "--file", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"simulate apply: --file {show(str(path))} is not UTF-8 text (byte 0xff at offset 21); save it as UTF-8 and "
        "pass the "
        "path of a cohorts YAML file (`simulate fleet` prints one)\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "--kubeconfig", "a" * 300],  # found by the walk above: a name too long for the file system
        ["simulate", "preview", "--stack-file", "a" * 300],
        ["simulate", "apply", "--file", "a" * 300],
    ],
)
def test_a_path_too_long_for_the_file_system_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # Each is refused before any cluster or engine is reached.
    assert cli.main(argv) == 2
    lines = capsys.readouterr().err.strip().split("\n")
    assert len(lines) == 1, lines
    assert "Errno" not in lines[0]
