"""After a kill: the engine's stale stack lock and the processes the killed run left behind.

A `kill -9` of `migrate` inside its `pulumi up` leaves the file backend's lock
(`.pulumi/locks/organization/PROJECT/STACK/ID.json`, holding the CLI's pid and host) and, often, that run's
Kubernetes provider and policy analyzer, re-parented to init. The next run then stops on "the stack is currently
locked", and a bare `pulumi cancel` fails: the local default's engine has its own Pulumi home and backend. So
before each `pulumi up` of a local stack this module looks at the stack's locks and decides:

- a lock of a process on this machine that has exited, or of a `pulumi` left behind by a killed run (its parent
  gone): stop what that run left (every process of this engine's Pulumi home whose parent is init), then delete
  the lock — what `pulumi cancel` does on a file backend;
- a lock of a live run, or of another machine: refuse, naming it and the exact command that clears it, with the
  engine's own `PULUMI_HOME` and backend, to run once that update is known to be dead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.records.lease_records import pid_alive

INIT_NAMES = frozenset({"init", "systemd", "tini", "dumb-init", "docker-init", "catatonit"})
"""What an orphan is re-parented to: pid 1 of the machine or container, or a subreaper of these names."""
STOP_GRACE_SECONDS = 5.0


class EngineLocked(Exception):
    """The stack is locked by a run this command cannot prove dead; the message names it and the exact fix."""


@dataclass(frozen=True)
class StackLock:
    """One lock file of the stack: who wrote it, from where."""

    path: Path
    pid: int | None
    hostname: str
    username: str
    timestamp: str

    def describe(self) -> str:
        """`USER@HOST (pid N) at TIME`, as Pulumi's own message says it."""
        return f"{self.username or '?'}@{self.hostname or '?'} (pid {self.pid}) at {self.timestamp or '?'}"


@dataclass(frozen=True)
class Process:
    """A process of this machine, as /proc shows it."""

    pid: int
    ppid: int
    name: str
    command: str


def stack_locks(backend: Path, project: str, stack: str) -> list[StackLock]:
    """The lock files of `stack` in a file backend (none when the folder does not exist)."""
    folder = backend / ".pulumi" / "locks" / "organization" / project / stack
    locks = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            content = json.loads(path.read_text())
        except (OSError, ValueError):
            content = {}
        content = content if isinstance(content, dict) else {}
        pid = content.get("pid")
        locks.append(
            StackLock(
                path,
                pid if type(pid) is int and pid > 0 else None,
                str(content.get("hostname") or ""),
                str(content.get("username") or ""),
                str(content.get("timestamp") or ""),
            )
        )
    return locks


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def process(pid: int) -> Process | None:
    """The process `pid`, or None when it has exited (or is a zombie)."""
    stat = _read(Path(f"/proc/{pid}/stat")).decode(errors="replace")
    if not stat or ")" not in stat:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat.rsplit(")", 1)[1].split()
    if not fields or fields[0] == "Z":
        return None
    command = _read(Path(f"/proc/{pid}/cmdline")).replace(b"\0", b" ").decode(errors="replace").strip()
    return Process(pid, int(fields[1]), name, command)


def is_engine(proc: Process) -> bool:
    """The Pulumi CLI, a plugin it started (`pulumi-resource-kubernetes`, ...) or the pack's analyzer.

    Only these: the local default's cluster processes may carry the same environment and must never be stopped.
    """
    return proc.name.startswith("pulumi") or " -m pulumi.policy " in f" {proc.command} "


def engine_processes(pulumi_home: Path) -> list[Process]:
    """Every live engine process started with this engine's PULUMI_HOME: the CLI, its plugins, the analyzer."""
    marker = f"PULUMI_HOME={pulumi_home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if marker not in _read(entry / "environ").split(b"\0"):
            continue
        proc = process(int(entry.name))
        if proc is not None and is_engine(proc):
            found.append(proc)
    return found


def _is_init(pid: int) -> bool:
    if pid <= 1:
        return True
    parent = process(pid)
    return parent is None or parent.name in INIT_NAMES


def left_behind(processes: Sequence[Process]) -> list[Process]:
    """The processes a killed run left: those whose parent is init, and everything under them."""
    by_parent: dict[int, list[Process]] = {}
    for proc in processes:
        by_parent.setdefault(proc.ppid, []).append(proc)
    roots = [p for p in processes if _is_init(p.ppid)]
    found: list[Process] = []
    stack = list(roots)
    while stack:
        proc = stack.pop()
        found.append(proc)
        stack += by_parent.get(proc.pid, [])
    return found


def stop(processes: Sequence[Process], say: Callable[[str], None]) -> None:
    """SIGTERM, then SIGKILL after a grace period; each named, so the output says what was stopped."""
    for proc in processes:
        say(f"  stopping pid {proc.pid} ({proc.command[:120] or proc.name}), left by a killed run")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline and any(pid_alive(p.pid) for p in processes):
        time.sleep(0.1)
    for proc in processes:
        if pid_alive(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)


def cancel_command(pulumi_home: Path, backend: Path, work_dir: Path, stack: str) -> str:
    """The exact `pulumi cancel` for this engine: its own Pulumi home and backend, not the user's."""
    return (
        f"PULUMI_HOME={pulumi_home} PULUMI_BACKEND_URL=file://{backend} pulumi cancel --cwd {work_dir} "
        f"--stack {stack} --yes"
    )


def clear_stale(
    pulumi_home: Path, backend: Path, work_dir: Path, project: str, stack: str, say: Callable[[str], None]
) -> None:
    """Clear what a killed run of this engine left on `stack`, or EngineLocked when a lock may still be live."""
    orphans = left_behind(engine_processes(pulumi_home))
    orphan_pids = {p.pid for p in orphans}
    locks = stack_locks(backend, project, stack)
    here = socket.gethostname()
    for lock in locks:
        if lock.hostname != here or lock.pid is None:
            why = "was written on another machine" if lock.hostname != here else "names no process"
            msg = (
                f"stack {stack} is locked by {lock.describe()}, which {why}, so this command cannot tell whether "
                f"that update still runs; once it is known to have ended, clear the lock with "
                f"`{cancel_command(pulumi_home, backend, work_dir, stack)}` and run this command again"
            )
            raise EngineLocked(msg)
        if pid_alive(lock.pid) and lock.pid not in orphan_pids:
            live = process(lock.pid)
            msg = (
                f"stack {stack} is being updated by a live run: pid {lock.pid} ({live.command[:120] if live else '?'});"
                f" wait for it to end (or stop it), then run this command again; if it hangs, stop it and run "
                f"`{cancel_command(pulumi_home, backend, work_dir, stack)}`"
            )
            raise EngineLocked(msg)
    if orphans:
        say(f"a killed run left {len(orphans)} engine process(es) running; stopping them")
        stop(orphans, say)
    for lock in locks:
        say(f"clearing the stale lock of stack {stack} by {lock.describe()}: that process has exited")
        lock.path.unlink(missing_ok=True)
