"""One operator at a time: `coordination.k8s.io/v1` Leases per node and per cohort for `move-host` and `migrate`.

Two moves of one node started together both act, and a `migrate` of a cohort interleaves with a `move-host` into
it; each then takes the other's new allocator for the old one. So before changing anything each command takes a
Lease per node and per cohort it touches, in the ledger's namespace, renews them while it runs and deletes them
when it ends. A second run refuses, naming the holder, its command and how long ago it renewed. A Lease its holder
stopped renewing for longer than its duration is taken over with a notice, and so is one whose holder process on
this machine has exited (a `kill -9` leaves its Leases behind; the same command run again must not wait for them).
Creation and takeover are optimistic writes (create fails on an existing name, an update carries the
resourceVersion it read), so of two runs racing for one Lease exactly one wins.

"Expired" compares the holder's renewTime with this machine's clock, and two machines' clocks differ. So a Lease
of another machine that looks expired is watched for one renewal interval first (`OBSERVE_SECONDS`): a holder
that renews it meanwhile is alive, whatever the clocks say, and the run refuses. Only a Lease nobody wrote in that
time is taken over, with a write over the version read before the wait. A Lease whose times lie ahead of this
machine's clock (clock skew, `HeldLease.ahead`) is neither fresh nor expired: it is watched the same way, and the
notice or refusal names the skew, its holder's machine and how to clear it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from cluster.client.kubeclient import Kube, KubeAccessError, KubeApiError, segment
from cluster.records import lease_records
from cluster.records.lease_records import (
    COMMAND,
    DURATION_SECONDS,
    HOLDER_HOST,
    HOLDER_PID,
    LEASE_FOR,
    LEASE_OF,
    RENEW_SECONDS,
    HeldLease,
    Kind,
    lease_lines,
    lease_name,
    micro_time,
    utc_now,
)

OBSERVE_SECONDS: float = RENEW_SECONDS + 2.0
"""How long an expired-looking Lease of another machine is watched for a renewal before it is taken over."""
RENEW_RETRY_SECONDS: float = 2.0
"""A renewal the API server did not answer (429, 5xx, no answer) is tried again this soon, not an interval later."""
RENEW_TIMEOUT: tuple[float, float] = (2.0, 5.0)
"""Connect and read deadline of one renewal, on its own connection: a slow request cannot hold it for 30 s."""
RENEW_WAIT_SECONDS: float = sum(RENEW_TIMEOUT) + 1.0
"""How long a renewal tick waits for its renewals: their connect and read deadlines, and a second to spare."""


class LeaseHeld(Exception):
    """Another run holds a Lease this one needs; the message names it and what to do; `lease` is it, as read."""

    def __init__(self, message: str, lease: HeldLease | None = None) -> None:
        super().__init__(message)
        self.lease = lease


class LeaseLost(Exception):
    """A Lease this run held was taken over or deleted: stop before changing anything more."""


def _why(error: Exception) -> str:
    """`the API server answered 429 to PUT .../leases/N: Too many requests`, or that it did not answer at all."""
    request = getattr(error, "request", "") or "the renewal"
    if isinstance(error, KubeApiError):
        return f"the API server answered {error.status} to {request}: {error.message[:160]}"
    reason = str(error).split("): ", 1)[-1].split("; ", 1)[0][:160]
    return f"no answer to {request}: {reason}"


def new_identity() -> str:
    """`HOST/PID/RANDOM`: the holderIdentity of one run's Leases (`lease_records.started_this_process` reads it)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def leases_path(namespace: str, name: str = "") -> str:
    """The API path of the namespace's Leases (or of one), each name checked as one path segment."""
    return lease_records.leases_path(segment(namespace), segment(name) if name else "")


def held_leases(kube: Kube, namespace: str) -> list[HeldLease]:
    """The Leases `move-host` and `migrate` hold in `namespace`, oldest renewal first."""
    found = [HeldLease.of(lease) for lease in kube.items(leases_path(namespace), labelSelector=LEASE_OF)]
    return sorted(found, key=lambda lease: (lease.renewed or datetime.min.replace(tzinfo=UTC), lease.name))


def held_on(kube: Kube, namespace: str, nodes: Sequence[str], cohorts: Sequence[str | None]) -> list[str]:
    """Lease lines of these nodes and cohorts: what a `--dry-run` shows a run now would be refused by."""
    wanted = {lease_name("node", n) for n in nodes} | {lease_name("cohort", c) for c in cohorts if c}
    return lease_lines([lease for lease in held_leases(kube, namespace) if lease.name in wanted])


def show_held(lines: Sequence[str], say: Callable[[str], None]) -> None:
    """Print held Lease lines under one heading (nothing when none is held)."""
    if lines:
        say("Leases held now (a run would be refused until they are released or expire):")
        say("\n".join(f"  {line}" for line in lines))


@dataclass
class Leases:
    """The Leases one run holds, renewed in the background until released; a context manager releases them."""

    kube: Kube
    namespace: str
    command: str
    say: Callable[[str], None]
    identity: str = field(default_factory=new_identity)
    on_behalf_of: str | None = None
    """The identity of the run that started this one (`migrate`'s own `pulumi up`, its program holding the rest of
    the stack's cohorts): a Lease held by it counts as this run's, and is neither renewed nor released here."""
    held: dict[str, dict[str, Any]] = field(default_factory=dict)
    lost: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    renewed_at: dict[str, float] = field(default_factory=dict)
    """Per held Lease: when (monotonic) it was last written by this run, as taken or renewed."""
    renew_error: str | None = None
    """Why the last renewal failed, for the refusal `ensure` raises when the Lease has gone unrenewed too long."""
    _renewal: Any = None
    _renewing: dict[str, threading.Thread] = field(default_factory=dict)
    """Per held Lease: the thread of its last renewal, which may still wait on the server."""

    def acquire(self, kind: Kind, targets: Sequence[str]) -> None:
        """Take the Lease of each target, or release what this call took and raise LeaseHeld."""
        taken: list[str] = []
        try:
            for target in targets:
                name = lease_name(kind, target)
                if name not in self.held:
                    self._take(kind, target, name)
                    if name in self.held:  # not one the run that started this one holds
                        self.renewed_at[name] = time.monotonic()
                        taken.append(name)
        except BaseException:
            for name in taken:
                self._release(name)
            raise
        if taken:
            self.say(f"holding Leases in namespace {self.namespace}: {', '.join(taken)}")
        self._start_renewing()

    def _body(self, kind: Kind, target: str, name: str, now: datetime) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {LEASE_OF: kind, "app.kubernetes.io/managed-by": "eks-hybrid-gpu"},
                "annotations": {
                    LEASE_FOR: target,
                    COMMAND: self.command,
                    HOLDER_HOST: socket.gethostname(),
                    HOLDER_PID: str(os.getpid()),
                },
            },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": DURATION_SECONDS,
                "acquireTime": micro_time(now),
                "renewTime": micro_time(now),
            },
        }

    def _take(self, kind: Kind, target: str, name: str) -> None:
        now = utc_now()
        body = self._body(kind, target, name, now)
        try:
            self.held[name] = self.kube.create(leases_path(self.namespace), body)
            return
        except KubeApiError as error:
            if error.status != 409:
                raise
        existing = self.kube.get_or_none(leases_path(self.namespace, name))
        if existing is None:  # deleted between our create and read: try once more
            self.held[name] = self.kube.create(leases_path(self.namespace), body)
            return
        current = HeldLease.of(existing)
        if current.holder == self.identity:
            self.held[name] = existing
            return
        if self.on_behalf_of is not None and current.holder == self.on_behalf_of and not current.expired(now):
            return  # held by the run that started this one: its Lease, renewed and released by it
        ahead = current.ahead(now)
        if current.holder_exited():
            why = "its holder process on this machine has exited"
        elif ahead is not None:  # dated ahead of this clock: its age says nothing; only a watch can tell
            why = (
                f"nobody renewed it in {OBSERVE_SECONDS:.0f} s of watching; fix the clock of "
                f"{current.host or 'its holder machine'} before it runs these commands again"
            )
            self._not_renewed_while_watched(kind, target, name, existing, current, ahead)
        elif not current.expired(now):
            msg = (
                f"{kind} {target} is held by another run: {current.describe(now)}; wait for it to finish (or stop it), "
                f"then run this command again. A Lease not renewed for {current.duration} s is taken over; "
                f"`kubectl -n {self.namespace} get lease {name} -o yaml` shows it"
            )
            raise LeaseHeld(msg, current)
        else:
            why = "it has expired"
            if not current.on_this_machine():  # another clock: expired is a guess until a renewal interval passes
                self._not_renewed_while_watched(kind, target, name, existing, current, None)
        body["metadata"]["resourceVersion"] = (existing.get("metadata") or {}).get("resourceVersion")
        try:
            self.held[name] = self.kube.replace(leases_path(self.namespace, name), body)
        except KubeApiError as error:
            if error.status == 409:
                msg = f"{kind} {target}: another run took over Lease {name} at the same moment; run this command again"
                raise LeaseHeld(msg) from None
            raise
        self.say(f"took over Lease {self.namespace}/{name} of {current.describe(now)}: {why}")

    def _not_renewed_while_watched(
        self,
        kind: Kind,
        target: str,
        name: str,
        existing: Mapping[str, Any],
        current: HeldLease,
        ahead: float | None,
    ) -> None:
        """LeaseHeld when its holder writes the Lease within one renewal interval: alive, though the clocks differ.

        `ahead`: the seconds its times lie ahead of this clock (clock skew), which the notice and refusal then name.
        """
        looks = (
            f"{current.skew_words(ahead)}, so its age says nothing"
            if ahead is not None
            else "looks expired by this machine's clock"
        )
        self.say(
            f"Lease {self.namespace}/{name} of {current.holder or 'no holder'}: {looks}; watching it "
            f"{OBSERVE_SECONDS:.0f} s (one renewal interval) for a renewal before taking it over"
        )
        time.sleep(OBSERVE_SECONDS)
        again = self.kube.get_or_none(leases_path(self.namespace, name))
        version = (existing.get("metadata") or {}).get("resourceVersion")
        if again is not None and (again.get("metadata") or {}).get("resourceVersion") != version:
            renewed = HeldLease.of(again)
            if ahead is not None:
                msg = (
                    f"{kind} {target} is held by another run: {renewed.describe(utc_now())}; it renewed its Lease "
                    "while this run watched it, so it is alive: wait for it to finish (or stop it), then run this "
                    f"command again; to clear the skew, {renewed.skew_fix(self.namespace)}"
                )
                raise LeaseHeld(msg, renewed)
            msg = (
                f"{kind} {target} is held by another run: {renewed.describe(utc_now())}, which renewed its Lease "
                "while this run watched it (its machine's clock and this one's differ); wait for it to finish (or "
                f"stop it), then run this command again. `kubectl -n {self.namespace} get lease {name} -o yaml` "
                "shows it"
            )
            raise LeaseHeld(msg, renewed)

    def _start_renewing(self) -> None:
        if self._thread is None and self.held:
            own = getattr(self.kube, "own_connection", None)  # a real client; the unit tests' fakes have none
            self._renewal = own(RENEW_TIMEOUT, resend=False) if own is not None else self.kube
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
            self._thread.start()

    def _renew_loop(self) -> None:
        """Renew every RENEW_SECONDS; after a renewal the API server did not answer, again in RENEW_RETRY_SECONDS."""
        pause = RENEW_SECONDS
        while not self._stop.wait(pause):
            with self._lock:
                answered = self._renew_each(list(self.held))
            pause = RENEW_SECONDS if all(answered) else RENEW_RETRY_SECONDS

    def _renew_each(self, names: list[str]) -> list[bool]:
        """Renew the Leases side by side, one thread each: one the server holds delays no other, nor the next tick.

        One after the other, a run holding three Leases (its node and two cohorts) on a throttled server waited up to
        three renewal deadlines for the last, which then went unrenewed that much longer. A tick waits at most
        RENEW_WAIT_SECONDS for its renewals; one still unanswered then (a server that trickles its headers outlives
        every read timeout) counts as unanswered, keeps its thread, and is not sent again until that thread ends:
        its Lease ages, and `ensure` stops the run before its next change once the age passes the duration.
        """
        answered: dict[str, bool] = {}

        def renew(name: str) -> None:
            answered[name] = self._renew(name)

        started: list[threading.Thread] = []
        for name in names:
            if (running := self._renewing.get(name)) is not None and running.is_alive():
                continue  # its last renewal is still unanswered
            thread = threading.Thread(target=renew, args=(name,), name=f"renew {name}", daemon=True)
            self._renewing[name] = thread
            thread.start()
            started.append(thread)
        deadline = time.monotonic() + RENEW_WAIT_SECONDS
        for thread in started:
            thread.join(max(deadline - time.monotonic(), 0.0))
        return [answered.get(name, False) for name in names]

    def _renew(self, name: str) -> bool:
        """Renew one Lease over the version this run last wrote; a failed request is retried at the next tick.

        The write carries that resourceVersion, so it succeeds only if nobody wrote the Lease since: one request per
        renewal. A conflict (or 404) means someone else did; then one read says whether it was taken over.
        """
        path = leases_path(self.namespace, name)
        held = self.held.get(name)
        if held is None:
            return True
        kube = self._renewal or self.kube
        try:
            sent = time.monotonic()  # the renewTime written: what every other run judges the Lease's age by
            spec = {**(held.get("spec") or {}), "renewTime": micro_time(utc_now())}
            renewed = kube.replace(path, {**held, "spec": spec})
            if name in self.held:  # a late answer after the run released the Lease adds nothing back
                self.held[name] = renewed
                self.renewed_at[name] = sent  # not when a slow answer came: the Lease was that much older by then
            return True
        except KubeApiError as error:
            if error.status not in (404, 409):
                self.renew_error = _why(error)
                return False
        except KubeAccessError as error:
            self.renew_error = _why(error)
            return False
        try:
            current = kube.get_or_none(path)
        except (KubeAccessError, KubeApiError) as error:
            self.renew_error = _why(error)
            return False
        if current is None or HeldLease.of(current).holder != self.identity:
            self.lost = f"Lease {self.namespace}/{name} was {'deleted' if current is None else 'taken over'}"
            self.held.pop(name, None)
            return True
        self.held[name] = current  # still ours: renewed over this version at once
        return False

    def ensure(self) -> None:
        """LeaseLost when a Lease of this run was taken over, or went unrenewed for its duration: change no more.

        A Lease not renewed for its duration looks expired to every other run, which may take the node over; so a
        run whose renewals the API server did not answer (throttled, slow, gone) stops before its next change.
        """
        if self.lost is not None:
            msg = f"{self.lost} while this run held it; another run may be acting: check `eks-hybrid-gpu inspect`"
            raise LeaseLost(msg)
        now = time.monotonic()
        for name in list(self.held):
            unrenewed = now - self.renewed_at.get(name, now)
            if unrenewed > DURATION_SECONDS:
                msg = (
                    f"Lease {self.namespace}/{name} went unrenewed for {unrenewed:.0f} s, longer than its duration "
                    f"({DURATION_SECONDS} s): {self.renew_error or 'no renewal was answered'}; another run may now "
                    "judge it expired and take over, so this run stops before its next change; once the API server "
                    f"answers again, run `{self.command}` again: it continues from where it stopped"
                )
                raise LeaseLost(msg)

    def _release(self, name: str) -> None:
        lease = self.held.pop(name, None)
        if lease is None:
            return
        version = (lease.get("metadata") or {}).get("resourceVersion")
        with contextlib.suppress(KubeAccessError, KubeApiError):
            current = self.kube.get_or_none(leases_path(self.namespace, name))
            if current is not None and HeldLease.of(current).holder == self.identity:
                version = (current.get("metadata") or {}).get("resourceVersion", version)
                self.kube.delete(leases_path(self.namespace, name), resource_version=version)

    def release(self) -> None:
        """Stop renewing and delete every Lease this run still holds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=RENEW_SECONDS + 5)
        with self._lock:
            for name in list(self.held):
                self._release(name)

    def release_when(self, done: Callable[[], bool], poll: float = 0.1) -> None:
        """Release every Lease once `done()` says the run is over (checked every `poll` s), or when this process exits.

        For a run that cannot wrap its work in `with` (the Pulumi program: the engine applies what it registered
        after the program's function has returned, and the program's event loop closes when the update ends).
        """

        def watch() -> None:
            while not self._stop.wait(poll) and not done():
                pass
            self.release()
            atexit.unregister(self.release)

        atexit.register(self.release)
        threading.Thread(target=watch, name="lease-release", daemon=True).start()

    def __enter__(self) -> Leases:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()
