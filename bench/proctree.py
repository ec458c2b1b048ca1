"""Peak memory of a process tree, sampled from /proc (no psutil).

Every `interval` seconds the sampler finds the root process and all its descendants (through the
`ppid` field of /proc/<pid>/stat) and sums their proportional set size (Pss in /proc/<pid>/smaps_rollup:
private pages plus each shared page divided by the number of processes mapping it), so pages shared
between the processes of the tree — libraries, the Python interpreter — count once, not once per process.
The figure is the highest sum seen: the tree's peak memory, to within the sampling interval. Where
smaps_rollup cannot be read, the process's RSS (/proc/<pid>/statm) stands in, which can only overstate.
The peak of each process is kept too, by role, and the CPU seconds each process had used when it was
last seen (utime + stime of /proc/<pid>/stat; a process's last interval before it exits is missed).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3, state, is element 0)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: the fields after the last ')' are fixed.
    return stat.rsplit(")", 1)[1].split()


def _ppid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds the process has used so far; None once it has gone."""
    fields = _stat_fields(pid)
    if not fields:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def descendants(root: int) -> list[int]:
    """`root` and every process below it, by a scan of /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            pid = int(entry.name)
            parent = _ppid(pid)
            if parent is not None:
                children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def memory_kib(pid: int) -> int | None:
    """Pss of one process in KiB (RSS where Pss cannot be read); None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_KIB
    except OSError:
        return None


def command(pid: int) -> str:
    """The process's executable name (comm, at most 15 characters)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


@dataclass
class TreeSampler:
    """Samples the memory of a process tree in a background thread until stopped."""

    root: int
    role_of: Callable[[int, int, str], str]
    """(pid, root pid, command) -> role name, e.g. "pulumi CLI"."""
    interval: float = 0.05
    peak_kib: int = 0
    peak_by_role: dict[str, int] = field(default_factory=dict)
    samples: int = 0
    processes: dict[int, tuple[str, float, float]] = field(default_factory=dict)
    """pid -> (role, time.monotonic() when first seen, CPU seconds when last seen)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one sample now."""
        total = 0
        by_role: dict[str, int] = {}
        for pid in descendants(self.root):
            kib = memory_kib(pid)
            if kib is None:
                continue
            total += kib
            known = self.processes.get(pid)
            # Named again each time: a child may not have exec'd its program yet when first seen.
            comm = command(pid)
            role = self.role_of(pid, self.root, comm) if comm != "?" or not known else known[0]
            first_seen = known[1] if known else time.monotonic()
            cpu = cpu_seconds(pid)
            self.processes[pid] = (role, first_seen, cpu if cpu is not None else (known[2] if known else 0.0))
            by_role[role] = by_role.get(role, 0) + kib
        self.samples += 1
        self.peak_kib = max(self.peak_kib, total)
        for role, kib in by_role.items():
            self.peak_by_role[role] = max(self.peak_by_role.get(role, 0), kib)

    def cpu_by_role(self, since: float) -> dict[str, float]:
        """CPU seconds per role of the processes first seen at or after `since` (time.monotonic())."""
        found: dict[str, float] = {}
        for pid, (role, first_seen, cpu) in self.processes.items():
            if first_seen >= since and pid != self.root:
                found[role] = found.get(role, 0.0) + cpu
        return found

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def start(self) -> TreeSampler:
        """Start sampling."""
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
