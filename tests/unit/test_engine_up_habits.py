"""`pulumi up` as pulumi users expect it from `local up` and `simulate up`: the plan, one question or `--yes`, a
refusal without a terminal, and Ctrl-C inside the engine: it stops cleanly, the command exits 130 in one line.

The Ctrl-C tests run real processes: the command in its own session, its "engine" a real child that stops as the
Pulumi CLI does (tests/support/fake_engine_command.py), through the same `interruptible` as the real engine runs.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu import cli, confirm, engine, engine_up, local
from eks_hybrid_gpu.simulate import rehearse

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    """Typed answers on a terminal."""

    def isatty(self) -> bool:
        return True


class FakeStack:
    """A stack that records what the command asked of the engine."""

    name = "local"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def preview(self, **kwargs: Any) -> None:
        self.calls.append("preview")
        kwargs["on_output"]("+ 49 to create")

    def up(self, **_: Any) -> str:
        self.calls.append("up")
        return "result"


@pytest.fixture
def no_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "policy_packs", lambda: ["pack"])


@pytest.mark.usefixtures("no_packs")
@pytest.mark.parametrize(
    ("answer", "calls", "result"), [(True, ["preview", "up"], "result"), (False, ["preview"], None)]
)
def test_the_plan_is_shown_then_the_update_runs_only_on_yes(answer: bool, calls: list[str], result: str | None) -> None:
    stack, said, asked = FakeStack(), [], []

    def ask(question: str) -> bool:
        asked.append((question, list(stack.calls)))
        return answer

    assert engine_up.planned_up(stack, ask, said.append, "the local cluster at https://127.0.0.1:1") == result
    assert stack.calls == calls
    assert asked == [("Perform this update of stack local on the local cluster at https://127.0.0.1:1?", ["preview"])]
    assert "+ 49 to create" in said


@pytest.mark.usefixtures("no_packs")
def test_yes_updates_without_a_preview_or_a_question() -> None:
    stack = FakeStack()
    assert engine_up.planned_up(stack, None, print, "anywhere") == "result"
    assert stack.calls == ["up"]


def test_local_up_without_a_terminal_or_yes_refuses_in_one_line_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(local, "up", lambda **_: pytest.fail("refused before anything starts"))
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert cli.main(["local", "up"]) == confirm.NO_TERMINAL_EXIT_CODE == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "local up: this run changes the cluster and asks first, but stdin is not a terminal: pass --yes to run it "
        "without asking (or run it on a terminal to see the plan and answer)\n"
    )


@pytest.mark.parametrize(("argv", "stdin", "asks"), [(["--yes"], io.StringIO(""), False), ([], Terminal(""), True)])
def test_local_up_asks_on_a_terminal_and_not_with_yes(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], stdin: io.StringIO, asks: bool
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(local, "up", lambda **kwargs: seen.append(kwargs) or 0)
    monkeypatch.setattr("sys.stdin", stdin)
    assert cli.main(["local", "up", *argv]) == 0
    assert (seen[0]["confirm"] is not None) is asks


def test_simulate_up_without_a_terminal_or_yes_refuses_before_it_reaches_the_cluster(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from eks_hybrid_gpu import localcluster

    monkeypatch.setattr(localcluster, "attach", lambda *_: pytest.fail("refused before the cluster is reached"))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["simulate", "up", "--stack", "local"]) == 2
    assert capsys.readouterr().err == (
        "simulate up: this run changes the cluster and asks first, but stdin is not a terminal: pass --yes to run it "
        "without asking (or `eks-hybrid-gpu simulate preview --stack local` to print the plan alone)\n"
    )
    args = cli.parser("simulate").parse_args(["simulate", "up", "-y"])
    assert rehearse.Rehearsal.from_args(args).yes is True


def test_the_local_up_script_passes_yes_and_says_why() -> None:
    script = (ROOT / "scripts" / "local-up.sh").read_text()
    assert 'set -- up --yes "$@"' in script


# ---------------------------------------------------------------- Ctrl-C inside the engine, real processes

HARNESS = (
    "import sys\n"
    "from eks_hybrid_gpu import cli\n"
    "cli.COMMANDS['fake-up'] = ('tests.support.fake_engine_command', 'an engine that stops as pulumi up does')\n"
    "sys.exit(cli.main(['fake-up', '--marker', sys.argv[1]]))\n"
)


def _wait_for(marker: Path, line: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in (marker.read_text() if marker.exists() else ""):
        assert time.monotonic() < deadline, f"the engine never wrote {line!r}"
        time.sleep(0.02)


def _expected_line(marker: Path) -> str:
    return (
        "eks-hybrid-gpu fake-up: interrupted (Ctrl-C) during `pulumi up` of stack fake; the engine stopped after the "
        f"steps in flight and recorded them: run `eks-hybrid-gpu fake-up --marker {marker}` again to go on from there"
    )


def _on_a_terminal(tty: int) -> None:
    """In the child: a session of its own whose controlling terminal is the pty, the command in its foreground."""
    os.setsid()
    fcntl.ioctl(tty, termios.TIOCSCTTY, 0)


def test_ctrl_c_on_the_terminal_lets_the_engine_stop_then_exits_130_in_one_line(tmp_path: Path) -> None:
    marker = tmp_path / "engine.log"
    master, tty = pty.openpty()
    try:
        command = subprocess.Popen(
            [sys.executable, "-c", HARNESS, str(marker)],
            stdin=tty,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
            preexec_fn=lambda: _on_a_terminal(0),
        )
        _wait_for(marker, "ready")
        os.write(master, b"\x03")  # the terminal's Ctrl-C: SIGINT to its foreground process group
        out, err = command.communicate(timeout=30)
    finally:
        os.close(master)
        os.close(tty)
    assert command.returncode == 130
    assert marker.read_text().splitlines() == ["ready", "SIGINT", "stopped cleanly"]  # one SIGINT, not two
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == _expected_line(marker)
    assert out == ""


def test_a_sigint_to_the_command_alone_is_passed_on_to_the_engine_once(tmp_path: Path) -> None:
    marker = tmp_path / "engine.log"
    command = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(marker)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        text=True,
        start_new_session=True,
    )
    _wait_for(marker, "ready")
    command.send_signal(signal.SIGINT)  # `kill -INT PID`: no terminal, the engine itself is not signalled
    _, err = command.communicate(timeout=30)
    assert command.returncode == 130
    assert marker.read_text().splitlines() == ["ready", "SIGINT", "stopped cleanly"]
    assert "Traceback" not in err
    assert err.strip().splitlines() == [_expected_line(marker)]


def test_without_ctrl_c_the_engine_finishes_and_the_command_succeeds(tmp_path: Path) -> None:
    marker = tmp_path / "engine.log"
    marker.write_text("")
    code = subprocess.run(
        [sys.executable, "-c", HARNESS, str(marker)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "FAKE_ENGINE_QUICK": "1"},
        check=False,
    ).returncode
    assert code == 0
    assert marker.read_text().splitlines() == ["ready", "finished"]


def test_the_line_after_an_interrupted_preview_says_nothing_changed() -> None:
    from eks_hybrid_gpu.engine_interrupt import EngineInterrupted

    argv = ["local", "up", "--chart-mirror", "/m x"]
    assert cli.interrupted_line(argv, EngineInterrupted("the preview of stack local", changes=False)) == (
        "eks-hybrid-gpu local: interrupted (Ctrl-C) during the preview of stack local; nothing was changed: run "
        "`eks-hybrid-gpu local up --chart-mirror '/m x'` again to start over"
    )
    assert cli.interrupted_line(argv, KeyboardInterrupt()) == "eks-hybrid-gpu local: interrupted (Ctrl-C)"
