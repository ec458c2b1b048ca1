"""What a `move-host` or `migrate` Lease says: the guarded node or cohort, its holder, and whether it still holds.

`cluster.records.leases` takes, renews and releases these Leases; the preflight (`cluster.judge.live`) and `inspect`
read them with `HeldLease.of`, so a preview, `inspect` and a refused run describe a held Lease in the same words.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from policy.gpu_allocation.vocab.labels import LABEL_PREFIX

DURATION_SECONDS: Final = 30
"""How long a Lease holds without renewal; the holder renews it every third of that."""
RENEW_SECONDS: Final = DURATION_SECONDS / 3
LEASE_OF: Final = f"{LABEL_PREFIX}/lease-of"
"""Label: `node` or `cohort`; what `inspect` and the preview list Leases by."""
LEASE_FOR: Final = f"{LABEL_PREFIX}/lease-for"
"""Annotation: the node's or cohort's name (the Lease's own name may be shortened)."""
COMMAND: Final = f"{LABEL_PREFIX}/command"
"""Annotation: the command that holds the Lease, as it can be run again."""
HOLDER_HOST: Final = f"{LABEL_PREFIX}/holder-host"
HOLDER_PID: Final = f"{LABEL_PREFIX}/holder-pid"
"""Annotations: where the holder runs, so a run on the same machine can tell that the holder has exited."""
NAME_PREFIX: Final = "gpu-allocation"
MAX_NAME: Final = 253

Kind = Literal["node", "cohort"]


def leases_path(namespace: str, name: str = "") -> str:
    """The API path of a namespace's Leases (or of one); both names are checked by the caller's grammar first."""
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


def lease_name(kind: Kind, target: str) -> str:
    """`gpu-allocation-node.NAME` or `gpu-allocation-cohort.NAME`; a hash stands in where that is too long."""
    name = f"{NAME_PREFIX}-{kind}.{target}"
    if len(name) <= MAX_NAME:
        return name
    return f"{NAME_PREFIX}-{kind}.{hashlib.sha256(target.encode()).hexdigest()[:40]}"


def micro_time(moment: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> datetime | None:
    """A MicroTime (or RFC 3339 time) as an aware datetime; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def utc_now() -> datetime:
    """The time now, in UTC, as Lease times are written."""
    return datetime.now(UTC)


SKEW_TOLERANCE_SECONDS: Final = 5.0
"""How far a Lease's times may lie ahead of this machine's clock before they are named clock skew, not "just now"."""
MAX_DURATION: Final = 3600
"""A Lease written with a longer duration (or none) is read with ours: no record may hold a node for days."""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class HeldLease:
    """One Lease as read: what it guards, who holds it, since when, and when it was last renewed."""

    name: str
    kind: str
    target: str
    holder: str
    command: str
    acquired: datetime | None
    renewed: datetime | None
    duration: int
    host: str
    pid: int | None
    body: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> HeldLease:
        """Read a Lease object; any field may be missing or of the wrong type (another tool may write Leases)."""
        meta, spec = _mapping(lease.get("metadata")), _mapping(lease.get("spec"))
        labels, annotations = _mapping(meta.get("labels")), _mapping(meta.get("annotations"))
        duration = spec.get("leaseDurationSeconds")
        pid = str(annotations.get(HOLDER_PID, ""))
        return cls(
            name=str(meta.get("name", "")),
            kind=str(labels.get(LEASE_OF, "")),
            target=str(annotations.get(LEASE_FOR, "")),
            holder=str(spec.get("holderIdentity") or ""),  # a holder of another type still holds: it refuses
            command=str(annotations.get(COMMAND, "")),
            acquired=parse_time(spec.get("acquireTime")),
            renewed=parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime")),
            duration=duration if type(duration) is int and 0 < duration <= MAX_DURATION else DURATION_SECONDS,
            host=str(annotations.get(HOLDER_HOST, "")),
            pid=int(pid) if pid.isascii() and pid.isdigit() and len(pid) <= 10 else None,
            body=lease,
        )

    def age(self, now: datetime | None = None) -> float | None:
        """Seconds since the last renewal; None when the Lease has no time at all."""
        if self.renewed is None:
            return None
        return ((now or utc_now()) - self.renewed).total_seconds()

    def ahead(self, now: datetime | None = None) -> float | None:
        """Seconds its renewTime or acquireTime lies ahead of `now`, beyond SKEW_TOLERANCE_SECONDS; None otherwise.

        Nobody can renew a Lease in the future: such a time was written by a clock ahead of this machine's (or
        this one was set back). Its age is then no measure of anything, so it is neither fresh nor expired.
        """
        moment = now or utc_now()
        found = [(t - moment).total_seconds() for t in (self.renewed, self.acquired) if t is not None]
        worst = max(found, default=0.0)
        return worst if worst > SKEW_TOLERANCE_SECONDS else None

    def expired(self, now: datetime | None = None) -> bool:
        """Not renewed for longer than its duration (or never): its holder is gone or stuck.

        A Lease dated ahead of this clock (`ahead`) is not expired: whether its holder lives is for a watch to say.
        """
        age = self.age(now)
        return age is None or age > self.duration or not self.holder

    def held_by_this_process(self) -> bool:
        """Taken by the process asking: `migrate`'s own `pulumi up` runs the program inside that process."""
        return self.host == socket.gethostname() and self.pid == os.getpid()

    def on_this_machine(self) -> bool:
        """The holder ran on this machine: its renewals and this machine's "now" come from the same clock."""
        return self.host == socket.gethostname()

    def holder_exited(self) -> bool:
        """The holder ran on this machine and its process is gone: it cannot renew any more."""
        return self.on_this_machine() and self.pid is not None and not pid_alive(self.pid)

    def as_json(self, now: datetime | None = None) -> dict[str, Any]:
        """What `inspect -o json` prints of the Lease."""
        age = self.age(now)
        return {
            "name": self.name,
            "kind": self.kind,
            "target": self.target,
            "holder": self.holder,
            "command": self.command,
            "renewTime": micro_time(self.renewed) if self.renewed else None,
            "secondsSinceRenewal": round(age, 1) if age is not None else None,
            "durationSeconds": self.duration,
            "expired": self.expired(now),
            "secondsAheadOfThisClock": round(ahead, 1) if (ahead := self.ahead(now)) is not None else None,
        }

    def describe(self, now: datetime | None = None) -> str:
        """`HOLDER (`COMMAND`), renewed N s ago`: who to ask, or what to wait for."""
        age, ahead = self.age(now), self.ahead(now)
        if ahead is not None:
            renewed = self.skew_words(ahead)
        elif age is not None:
            renewed = f"renewed {max(age, 0.0):.0f} s ago"
        else:
            renewed = "never renewed"
        command = f" running `{self.command}`" if self.command else ""
        return f"{self.holder or 'no holder'}{command}, {renewed} (lease duration {self.duration} s)"

    def skew_words(self, ahead: float) -> str:
        """`its renewTime lies N s ahead of this machine's clock (clock skew: HOST's clock or this one's is wrong)`."""
        later = self.acquired is not None and self.renewed is not None and self.acquired > self.renewed
        host = f"{self.host}'s" if self.host else "its holder's"
        return (
            f"its {'acquireTime' if later else 'renewTime'} lies {ahead:.0f} s ahead of this machine's clock "
            f"(clock skew: {host} clock or this one is wrong)"
        )

    def skew_fix(self, namespace: str) -> str:
        """How to clear a skewed Lease: fix the clock, or delete the Lease once its holder is known gone."""
        host = self.host or "the holder's machine"
        return (
            f"fix the clock of {host} (or of this machine) with NTP, e.g. `chronyc makestep`; once its holder is known "
            f"gone, `kubectl -n {namespace} delete lease {self.name}` clears it"
        )


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists here (a zombie counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


HOLDER_ENV: Final = "EKS_HYBRID_GPU_LEASE_HOLDER"
"""The holderIdentity of the `migrate` run whose own `pulumi up` this is: set for the engine's children, read by the
program's entry point (`__main__.py`), checked with `started_this_process` before the program trusts it."""


def _parent_of(pid: int) -> int | None:
    """The parent process id of `pid` (Linux `/proc`); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return int(stat.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def ancestors(pid: int | None = None) -> list[int]:
    """The ids of this process (or `pid`) and of every process above it, nearest first (no `/proc`: and its parent)."""
    found = [pid if pid is not None else os.getpid()]
    while len(found) < 64:
        parent = _parent_of(found[-1])
        if parent is None or parent <= 0 or parent in found:
            break
        found.append(parent)
    if len(found) == 1 and pid is None:
        found.append(os.getppid())
    return found


def started_this_process(identity: str) -> bool:
    """`identity` (`HOST/PID/RANDOM`) is a run on this machine whose process is this one or one above it.

    `migrate` runs its phases' `pulumi up` inline (the same process) or through the engine (its child, grandchild):
    either way its process is an ancestor. A holder copied from `kubectl get lease` in another shell is not.
    """
    parts = identity.split("/")
    if len(parts) != 3 or parts[0] != socket.gethostname() or not (parts[1].isascii() and parts[1].isdigit()):
        return False
    return len(parts[1]) <= 10 and int(parts[1]) in ancestors()


def lease_lines(leases: Sequence[HeldLease], now: datetime | None = None) -> list[str]:
    """One line per Lease for `inspect` and plans: what it guards, who holds it, and whether it has expired."""
    lines = []
    for lease in leases:
        state = "expired, will be taken over" if lease.expired(now) else "held"
        if lease.ahead(now) is not None:
            state = "clock skew, taken over only if nobody renews it for one renewal interval"
        lines.append(f"{lease.kind or 'lease'} {lease.target or lease.name}: {state} by {lease.describe(now)}")
    return lines
