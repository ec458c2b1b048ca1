"""After a kill: the engine's stale lock is cleared and what the killed run left is stopped, nothing else."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.records.lease_records import pid_alive
from eks_hybrid_gpu import engine_lock
from eks_hybrid_gpu.engine_lock import EngineLocked

pytestmark = pytest.mark.unit

PROJECT = "eks-hybrid-gpu"
STACK = "local"


def _binary(tmp: Path, name: str) -> Path:
    """A `sleep` under another name: /proc shows the name a real plugin binary would have."""
    path = tmp / name
    shutil.copy(shutil.which("sleep") or "/bin/sleep", path)
    return path


def _orphan(binary: Path, home: Path) -> int:
    """Start `binary` from a parent that exits at once, so init adopts it (what `kill -9` of a run leaves)."""
    code = (
        "import subprocess, sys; "
        f"p = subprocess.Popen([{str(binary)!r}, '60'], env={{'PULUMI_HOME': {str(home)!r}}}, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    pid = int(out.stdout)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (engine_lock.process(pid) or engine_lock.Process(0, 0, "", "")).ppid != 1:
        time.sleep(0.05)
    return pid


@pytest.fixture
def area(tmp_path: Path) -> Iterator[tuple[Path, Path, list[int]]]:
    home, backend = tmp_path / "pulumi-home", tmp_path / "backend"
    home.mkdir()
    started: list[int] = []
    yield home, backend, started
    for pid in started:
        if pid_alive(pid):
            subprocess.run(["kill", "-9", str(pid)], check=False)


def _lock(backend: Path, content: object) -> Path:
    folder = backend / ".pulumi" / "locks" / "organization" / PROJECT / STACK
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "0a1b2c.json"
    path.write_text(json.dumps(content))
    return path


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_lock_of_an_exited_process_is_cleared_and_left_engine_processes_are_stopped(
    tmp_path: Path, area: tuple[Path, Path, list[int]]
) -> None:
    home, backend, started = area
    provider = _orphan(_binary(tmp_path, "pulumi-resource-kubernetes"), home)
    cluster = _orphan(_binary(tmp_path, "kwok"), home)  # the local cluster carries the same environment
    started += [provider, cluster]
    lock = _lock(backend, {"pid": _dead_pid(), "hostname": socket.gethostname(), "username": "me", "timestamp": "t"})
    said: list[str] = []
    engine_lock.clear_stale(home, backend, tmp_path, PROJECT, STACK, said.append)
    assert not lock.exists()
    assert not pid_alive(provider)
    assert pid_alive(cluster)  # not an engine process: never stopped
    assert any("stopping pid" in line and "pulumi-resource-kubernetes" in line for line in said)
    assert any("clearing the stale lock of stack local by me@" in line for line in said)


def test_a_lock_held_by_a_left_behind_cli_is_cleared_after_stopping_it(
    tmp_path: Path, area: tuple[Path, Path, list[int]]
) -> None:
    home, backend, started = area
    cli = _orphan(_binary(tmp_path, "pulumi"), home)
    started.append(cli)
    lock = _lock(backend, {"pid": cli, "hostname": socket.gethostname(), "username": "me", "timestamp": "t"})
    engine_lock.clear_stale(home, backend, tmp_path, PROJECT, STACK, lambda _: None)
    assert not pid_alive(cli)
    assert not lock.exists()


def test_a_lock_of_a_live_run_is_refused_and_its_processes_are_left_alone(
    tmp_path: Path, area: tuple[Path, Path, list[int]]
) -> None:
    home, backend, started = area
    live = subprocess.Popen([_binary(tmp_path, "pulumi"), "60"], env={"PULUMI_HOME": str(home)})
    started.append(live.pid)
    lock = _lock(backend, {"pid": live.pid, "hostname": socket.gethostname(), "username": "me", "timestamp": "t"})
    with pytest.raises(EngineLocked, match=f"is being updated by a live run: pid {live.pid}"):
        engine_lock.clear_stale(home, backend, tmp_path, PROJECT, STACK, lambda _: None)
    assert lock.exists()
    assert pid_alive(live.pid)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (
            {"pid": 4242, "hostname": "ci-runner-7", "username": "ci", "timestamp": "t"},
            "was written on another machine",
        ),
        ("not a lock", "was written on another machine"),
        ({"pid": "1; rm -rf /", "hostname": socket.gethostname()}, "names no process"),
    ],
)
def test_a_lock_this_command_cannot_judge_is_refused_with_the_engines_own_cancel_command(
    tmp_path: Path, area: tuple[Path, Path, list[int]], content: object, why: str
) -> None:
    home, backend, _ = area
    lock = _lock(backend, content)
    with pytest.raises(EngineLocked) as refused:
        engine_lock.clear_stale(home, backend, tmp_path, PROJECT, STACK, lambda _: None)
    message = str(refused.value)
    assert why in message
    assert (
        f"PULUMI_HOME={home} PULUMI_BACKEND_URL=file://{backend} pulumi cancel --cwd {tmp_path} --stack local --yes"
        in (message)
    )
    assert lock.exists()


def test_no_lock_and_nothing_left_changes_nothing(tmp_path: Path, area: tuple[Path, Path, list[int]]) -> None:
    home, backend, _ = area
    said: list[str] = []
    engine_lock.clear_stale(home, backend, tmp_path, PROJECT, STACK, said.append)
    assert said == []
