"""One command line: every command is a subcommand of one argparse parser, imported only when chosen."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eks_hybrid_gpu import cli

pytestmark = pytest.mark.unit


def test_help_lists_every_command_without_importing_them() -> None:
    code = "import sys; from eks_hybrid_gpu import cli; cli.parser().format_help(); print(sorted(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for module, _ in cli.COMMANDS.values():
        assert f"'{module}'" not in loaded
    text = cli.parser().format_help()
    for name in cli.COMMANDS:
        assert name in text


@pytest.mark.parametrize(
    ("argv", "code"),
    [([], 2), (["nope"], 2), (["--help"], 0), (["inspect", "--bogus"], 2), (["local"], 2), (["local", "up", "x"], 2)],
)
def test_usage_errors_exit_2_and_help_0(argv: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == code


def test_a_command_gets_its_parsed_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, str, bool]] = []
    monkeypatch.setattr(
        "eks_hybrid_gpu.inspection.run", lambda args: seen.append((args.context, args.namespace, args.json)) or 3
    )
    assert cli.main(["inspect", "--context", "prod", "--json"]) == 3
    assert seen == [("prod", "ai-workloads", True)]


def test_inspect_and_smoke_share_the_cluster_options() -> None:
    for name in ("inspect", "smoke"):
        options = cli.parser(name)._subparsers._group_actions[0].choices[name]._option_string_actions  # type: ignore[union-attr]
        assert {"--kubeconfig", "--context", "--json"} <= set(options)
