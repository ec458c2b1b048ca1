"""Ctrl-C inside `local up`'s real `pulumi up`: the engine stops cleanly, the command exits 130 in one line, and the
same command run again goes on from there.

`eks-hybrid-gpu local up --yes` runs as a real process in its own session whose controlling terminal is a pty: the
Ctrl-C is the byte a terminal sends (the kernel signals the foreground process group: the command and the engine),
typed once the engine has begun creating resources.
"""

from __future__ import annotations

import fcntl
import os
import pty
import shlex
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from eks_hybrid_gpu import localcluster
from eks_hybrid_gpu.localpaths import CACHE_ENV
from tests.support import charts

pytestmark = [pytest.mark.integration, pytest.mark.charts]

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "eks-hybrid-gpu")


def _on_a_terminal() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _local_up(env: dict[str, str], tty: int) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "eks_hybrid_gpu", "local", "up", "--yes", "--chart-mirror", str(charts.folder())]
    return subprocess.Popen(
        argv,
        stdin=tty,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
        text=True,
        preexec_fn=_on_a_terminal,
    )


def _collect(stream: object, into: list[str]) -> threading.Thread:
    def read() -> None:  # by character: the question ends in "[y/N] ", with no newline
        for char in iter(lambda: stream.read(1), ""):  # type: ignore[attr-defined]
            into.append(char)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


@pytest.mark.usefixtures("toolchain")
def test_ctrl_c_inside_local_ups_pulumi_up_exits_130_and_the_rerun_finishes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "toolchain").symlink_to(CACHE / "toolchain")
    env = {**os.environ, CACHE_ENV: str(cache)}
    master, tty = pty.openpty()
    try:
        started = time.monotonic()
        command = _local_up(env, tty)
        out: list[str] = []
        err: list[str] = []
        readers = [_collect(command.stdout, out), _collect(command.stderr, err)]
        deadline = time.monotonic() + 300
        while "creating" not in "".join(out):
            assert command.poll() is None, "".join(out + err)
            assert time.monotonic() < deadline, "the engine never began creating resources"
            time.sleep(0.1)
        typed_at = time.monotonic()
        os.write(master, b"\x03")
        code = command.wait(timeout=300)
        stopped = time.monotonic() - typed_at
        for reader in readers:
            reader.join(timeout=10)
        assert code == 130, "".join(out + err)
        assert "Ownership map" not in "".join(out)  # stopped inside the update, not after it
        print("\n".join("".join(out).splitlines()[-6:]))
        assert "Traceback" not in "".join(err), "".join(err)
        rerun = shlex.join(["eks-hybrid-gpu", "local", "up", "--yes", "--chart-mirror", str(charts.folder())])
        assert "".join(err).splitlines()[-1] == (
            "eks-hybrid-gpu local: interrupted (Ctrl-C) during `pulumi up` of stack local; the engine stopped after "
            f"the steps in flight and recorded them: run `{rerun}` again to go on from there"
        )
        again = subprocess.run(
            [sys.executable, "-m", "eks_hybrid_gpu", *shlex.split(rerun)[1:]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=ROOT,
            env=env,
            text=True,
            timeout=300,
            check=False,
        )
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "every pod runs on its cohort's nodes" in again.stdout
        print(f"\nCtrl-C to exit 130: {stopped:.1f} s; interrupted run + re-run: {time.monotonic() - started:.0f} s")
    finally:
        os.close(master)
        os.close(tty)
        subprocess.run(
            [sys.executable, "-m", "eks_hybrid_gpu", "local", "down"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=ROOT,
            env=env,
            timeout=300,
            check=False,
        )
        localcluster.stop(cache / "local-cluster")


def _answered(env: dict[str, str], answer: bytes) -> tuple[int, str, str]:
    """`local up` (no --yes) on a terminal: the answer is typed once the question is asked."""
    master, tty = pty.openpty()
    try:
        argv = [sys.executable, "-m", "eks_hybrid_gpu", "local", "up", "--chart-mirror", str(charts.folder())]
        command = subprocess.Popen(
            argv,
            stdin=tty,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            text=True,
            preexec_fn=_on_a_terminal,
        )
        out: list[str] = []
        err: list[str] = []
        readers = [_collect(command.stdout, out), _collect(command.stderr, err)]
        deadline = time.monotonic() + 300
        while "[y/N]" not in "".join(err):
            assert command.poll() is None, "".join(out + err)
            assert time.monotonic() < deadline, "never asked"
            time.sleep(0.1)
        os.write(master, answer)
        code = command.wait(timeout=300)
        for reader in readers:
            reader.join(timeout=10)
        return code, "".join(out), "".join(err)
    finally:
        os.close(master)
        os.close(tty)


@pytest.mark.usefixtures("toolchain")
def test_local_up_on_a_terminal_shows_the_preview_and_changes_the_stack_only_on_yes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "toolchain").symlink_to(CACHE / "toolchain")
    env = {**os.environ, CACHE_ENV: str(cache)}
    try:
        code, out, err = _answered(env, b"n\n")
        assert code == 1, out + err
        assert "Previewing the update of stack local (the plan; nothing changes yet):" in out
        assert "to create" in out
        assert "Perform this update of stack local on the local cluster at https://127.0.0.1:" in err
        assert "local up: not updated (answered no): the stack is as it was" in err
        assert "Ownership map" not in out
        code, out, err = _answered(env, b"y\n")
        assert code == 0, out[-3000:] + err[-3000:]
        assert out.index("Previewing the update") < out.index("Ownership map")
        assert "every pod runs on its cohort's nodes" in out
    finally:
        subprocess.run(
            [sys.executable, "-m", "eks_hybrid_gpu", "local", "down"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=ROOT,
            env=env,
            timeout=300,
            check=False,
        )
        localcluster.stop(cache / "local-cluster")
