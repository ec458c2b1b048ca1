"""One command line: every command is a subcommand of one argparse parser, imported only when chosen."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from eks_hybrid_gpu import cli

pytestmark = pytest.mark.unit


def test_help_lists_every_command_without_importing_them() -> None:
    code = (
        "import sys; from eks_hybrid_gpu import cli; code = cli.main(['--help']); "
        "print(sorted(sys.modules), file=sys.stderr); sys.exit(code)"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for module, _ in cli.COMMANDS.values():
        assert f"'{module}'" not in shown.stderr
    for name, (_, summary) in cli.COMMANDS.items():
        assert name in shown.stdout
        assert " ".join(summary.split()[:3]) in " ".join(shown.stdout.split())


@pytest.mark.parametrize(
    ("argv", "code"),
    [([], 2), (["nope"], 2), (["--help"], 0), (["inspect", "--bogus"], 2), (["local"], 2), (["local", "up", "x"], 2)],
)
def test_usage_errors_exit_2_and_help_0(argv: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == code


def test_a_command_gets_its_parsed_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, str, str]] = []
    monkeypatch.setattr(
        "eks_hybrid_gpu.inspection.run", lambda args: seen.append((args.context, args.namespace, args.output)) or 3
    )
    assert cli.main(["inspect", "--context", "prod", "--json"]) == 3
    assert cli.main(["inspect", "-o", "yaml"]) == 3
    assert cli.main(["inspect"]) == 3
    assert seen == [("prod", "ai-workloads", "json"), (None, "ai-workloads", "yaml"), (None, "ai-workloads", "table")]


@pytest.mark.parametrize("name", ["inspect", "smoke"])
def test_inspect_and_smoke_share_the_cluster_options(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str, str]] = []
    command = importlib.import_module(cli.COMMANDS[name][0])
    monkeypatch.setattr(command, "run", lambda args: seen.append((args.kubeconfig, args.context, args.output)) or 0)
    assert cli.main([name, "--kubeconfig", "/k/config", "--context", "prod", "--json"]) == 0
    assert seen == [("/k/config", "prod", "json")]
