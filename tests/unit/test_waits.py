"""The waits of move-host and migrate: woken by watches, riding through an API server that does not answer."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cluster.client import slowness, waits
from cluster.client.kubeclient import KubeAccessError, KubeApiError, KubeNotAnswer, KubeUnreachable
from eks_hybrid_gpu import transit
from testkit.fake_kube import FakeKube

pytestmark = pytest.mark.unit


class Flaky:
    """A check that fails `failures` times with `error`, then reports done."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> tuple[bool, str]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return True, ""


@pytest.mark.parametrize(
    "error",
    [
        KubeUnreachable("cannot reach the Kubernetes API (...): timed out; check that the cluster is running"),
        KubeApiError(429, "Too many requests"),
        KubeApiError(503, "the server is currently unable to handle the request"),
    ],
)
def test_a_wait_rides_through_an_api_server_that_does_not_answer(error: Exception) -> None:
    lines: list[str] = []
    check = Flaky(3, error)
    waits.wait_for("the thing", check, 30, lines.append, "run it again")
    assert check.calls == 4
    retries = [line for line in lines if "retrying in" in line]
    assert len(retries) == 3
    assert [line.rsplit("retrying in ", 1)[1] for line in retries] == ["0.5 s", "1.0 s", "2.0 s"]  # backoff
    assert lines[-1].startswith("  done after ")


def test_the_deadline_holds_while_the_api_server_does_not_answer() -> None:
    started = time.monotonic()
    with pytest.raises(waits.WaitTimedOut, match=r"the thing: not after 2 s; still no answer from the API server"):
        waits.wait_for("the thing", Flaky(10**6, KubeApiError(500, "etcd")), 2, lambda _: None, "run it again")
    assert time.monotonic() - started < 2 + waits.RETRY_MAX_SECONDS


@pytest.mark.parametrize(
    "error", [KubeAccessError("permission denied (...)"), KubeApiError(404, "not found"), KubeApiError(409, "x")]
)
def test_an_answer_that_waiting_cannot_change_is_not_retried(error: Exception) -> None:
    check = Flaky(1, error)
    with pytest.raises(type(error)):
        waits.wait_for("the thing", check, 30, lambda _: None, "run it again")
    assert check.calls == 1


def test_a_change_the_cluster_reports_wakes_the_wait_before_its_progress_tick() -> None:
    kube = FakeKube()
    kube.objects["/api/v1/nodes/gpu-1"] = {"metadata": {"name": "gpu-1"}}
    done = threading.Event()
    checks: list[float] = []

    def check() -> tuple[bool, str]:
        checks.append(time.monotonic())
        return done.is_set(), "not yet"

    def later() -> None:
        time.sleep(1.5)
        done.set()
        kube.merge_patch("/api/v1/nodes/gpu-1", {"metadata": {"labels": {"a": "b"}}})

    threading.Thread(target=later, daemon=True).start()
    started = time.monotonic()
    with waits.NodeChanges(kube, "gpu-1") as changes:  # type: ignore[arg-type]
        waits.wait_for("the change", check, 30, lambda _: None, "run it again", changes)
    took = time.monotonic() - started
    assert took < waits.PROGRESS_SECONDS  # woken by the watch, not by the tick
    assert len(checks) <= 4  # not two reads a second for the whole wait


class ChangesWhileTheWatchStarts(FakeKube):
    """A cluster where the change lands after the wait's first check and before its watch's start version."""

    def __init__(self, checked: threading.Event, done: threading.Event) -> None:
        super().__init__()
        self.checked, self.done = checked, done

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        if query.get("limit") == 1:  # the one-item list a watch takes its start version from
            self.checked.wait(5)
            self.done.set()
            self.merge_patch("/api/v1/nodes/gpu-1", {"metadata": {"labels": {"a": "b"}}})
            return {"metadata": {"resourceVersion": str(self.version)}, "items": []}
        return super().get(path, **query)

    def watch(self, path: str, **query: Any) -> Iterator[dict[str, Any]]:
        """Only what changes after the version asked for, as a real watch."""
        ends = time.monotonic() + self.watch_seconds
        while time.monotonic() < ends:
            time.sleep(0.02)
        yield from ()


def test_a_change_before_the_watch_starts_is_not_left_for_the_progress_tick() -> None:
    checked, done = threading.Event(), threading.Event()
    kube = ChangesWhileTheWatchStarts(checked, done)
    kube.objects["/api/v1/nodes/gpu-1"] = {"metadata": {"name": "gpu-1"}}

    def check() -> tuple[bool, str]:
        finished = done.is_set()
        checked.set()
        return finished, "not yet"

    started = time.monotonic()
    with waits.NodeChanges(kube, "gpu-1") as changes:  # type: ignore[arg-type]
        waits.wait_for("the change", check, 30, lambda _: None, "run it again", changes)
    assert time.monotonic() - started < waits.PROGRESS_SECONDS / 2


def test_a_quiet_wait_still_reports_progress_at_least_every_progress_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, "PROGRESS_SECONDS", 0.6)
    kube = FakeKube()
    lines: list[str] = []
    stamps: list[float] = []

    def progress(line: str) -> None:
        lines.append(line)
        stamps.append(time.monotonic())

    with waits.NodeChanges(kube, "gpu-1") as changes, pytest.raises(waits.WaitTimedOut):  # type: ignore[arg-type]
        waits.wait_for("nothing", lambda: (False, "the same"), 3, progress, "run it again", changes)
    ticks = [t for t, line in zip(stamps, lines, strict=True) if "still the same" in line]
    assert len(ticks) >= 3
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.6 + waits.POLL_SECONDS + 0.3


def test_a_node_patch_is_retried_while_the_api_server_does_not_answer(capsys: pytest.CaptureFixture[str]) -> None:
    kube = FakeKube()
    kube.objects["/api/v1/nodes/gpu-1"] = {"metadata": {"name": "gpu-1"}, "spec": {}}
    real = kube.merge_patch
    failures = iter([KubeUnreachable("cannot reach the Kubernetes API (...): connection refused; ..."), None])

    def flaky(path: str, body: dict[str, object]) -> dict[str, object]:
        error = next(failures)
        if error is not None:
            raise error
        return real(path, body)  # type: ignore[arg-type]

    kube.merge_patch = flaky  # type: ignore[method-assign]
    transit.set_label(kube, "gpu-1", "k", "v")  # type: ignore[arg-type]
    assert kube.objects["/api/v1/nodes/gpu-1"]["metadata"]["labels"] == {"k": "v"}
    assert "labelling node gpu-1: the API server did not answer" in capsys.readouterr().out


REFUSED = "cannot reach the Kubernetes API (kubeconfig k, context c, server s): connection refused; check the cluster"


class Restarting(FakeKube):
    """A cluster whose API server goes away at `down` (every watch breaks, every request is refused) for a while."""

    def __init__(self, down: threading.Event, up: threading.Event) -> None:
        super().__init__()
        self.watch_seconds = 30.0  # a quiet cluster: the watches alone would never wake the wait
        self.down, self.up = down, up

    def _refuse(self, request: str) -> None:
        if self.down.is_set() and not self.up.is_set():
            raise KubeUnreachable(REFUSED, request)

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        self._refuse(f"GET {path}")
        if query.get("limit") == 1:
            return {"metadata": {"resourceVersion": str(self.version)}, "items": []}
        return super().get(path, **query)

    def watch(self, path: str, **query: Any) -> Iterator[dict[str, Any]]:
        self._refuse(f"WATCH {path}")
        ends = time.monotonic() + self.watch_seconds
        while time.monotonic() < ends:
            self._refuse(f"WATCH {path}")  # the server's restart breaks the open stream
            time.sleep(0.02)
        yield from ()


def test_an_api_server_restart_is_said_within_two_seconds_naming_the_request_that_failed() -> None:
    """The wait sleeps until its 8 s progress tick; the broken watches wake it, and it says why it retries."""
    down, up = threading.Event(), threading.Event()
    kube = Restarting(down, up)
    kube.objects["/api/v1/nodes/gpu-1"] = {"metadata": {"name": "gpu-1"}}
    stamps: list[tuple[float, str]] = []
    failed_at: list[float] = []

    def check() -> tuple[bool, str]:
        kube.get("/api/v1/nodes/gpu-1")
        return up.is_set(), "not yet"

    def restart() -> None:
        time.sleep(1.0)
        failed_at.append(time.monotonic())
        down.set()
        time.sleep(4.0)
        up.set()
        kube.merge_patch("/api/v1/nodes/gpu-1", {"metadata": {"labels": {"a": "b"}}})

    threading.Thread(target=restart, daemon=True).start()
    with waits.NodeChanges(kube, "gpu-1") as changes:  # type: ignore[arg-type]
        waits.wait_for(
            "the change", check, 30, lambda line: stamps.append((time.monotonic(), line)), "run it again", changes
        )
    said = [(at - failed_at[0], line) for at, line in stamps if at >= failed_at[0]]
    assert said, stamps
    first_at, first = said[0]
    print(f"\nfirst line {first_at:.2f} s after the restart: {first}")
    assert first_at <= 2.0, said
    assert "the API server broke a watch (WATCH /api" in first, first
    assert first.endswith(": connection refused); re-reading now"), first
    retries = [line for _, line in said if "retrying in" in line]
    assert retries, said
    assert (
        "no answer from the API server (GET /api/v1/nodes/gpu-1: connection refused); retrying in 0.5 s" in retries[0]
    )
    assert sum("broke a watch" in line for _, line in said) == 1, said  # one outage, told once
    assert said[-1][1].startswith("  done after ")


class Garbling(FakeKube):
    """Behind a proxy that answers every watch with a page: the watches break one after another, not at once."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = threading.Lock()
        self.server = "https://10.0.0.1:6443"

    def watch(self, path: str, **query: Any) -> Iterator[dict[str, Any]]:
        with self.turn:  # one watch breaks at a time, each after the wait has read the last one's failure
            time.sleep(0.3)
            msg = f"not an API server answer to WATCH {path}"
            raise KubeNotAnswer(msg, 200, f"WATCH {path}")
        yield from ()


def test_watches_garbled_one_after_another_are_told_once_then_the_second_garble_stops_the_wait() -> None:
    kube = Garbling()
    said: list[str] = []
    with waits.NodeChanges(kube, "gpu-1") as changes, pytest.raises(KubeNotAnswer):  # type: ignore[arg-type]
        waits.wait_for("the thing", lambda: (False, "not yet"), 30, said.append, "run it again", changes)
    restarted = [line for line in said if "restarting that watch once" in line]
    assert len(restarted) == 1, said  # four watches broke, each after an answered check: one line


def test_a_retried_patch_names_the_request_that_got_no_answer(capsys: pytest.CaptureFixture[str]) -> None:
    calls = iter([KubeUnreachable(REFUSED, "PATCH /api/v1/nodes/gpu-1")])

    def call() -> str:
        error = next(calls, None)
        if error is not None:
            raise error
        return "ok"

    assert waits.retrying(call, "labelling node gpu-1", print, 10) == "ok"
    assert (
        "labelling node gpu-1: the API server did not answer (PATCH /api/v1/nodes/gpu-1: connection refused); "
        "retrying in 0.5 s" in capsys.readouterr().out
    )


class Throttled(FakeKube):
    """A cluster whose client's notices saw a 429 (a throttled API server) just before the wait began."""

    def __init__(self) -> None:
        super().__init__()
        self.notices = slowness.SlowNotices(lambda _line: None, "https://api:6443")
        self.notices.refused("GET /api/v1/pods", 429, "Too Many Requests", "1")


def test_a_wait_on_a_server_that_throttled_recently_says_so_at_the_notices_pace() -> None:
    kube = Throttled()
    stamps: list[tuple[float, str]] = []
    started = time.monotonic()
    with waits.NodeChanges(kube, "gpu-1") as changes, pytest.raises(waits.WaitTimedOut):  # type: ignore[arg-type]
        waits.wait_for(
            "nothing",
            lambda: (False, "the same"),
            9,
            lambda line: stamps.append((time.monotonic(), line)),
            "x",
            changes,
        )
    ticks = [t - started for t, line in stamps if "still the same" in line]
    assert len(ticks) >= 2, stamps  # not one line per PROGRESS_SECONDS (8 s)
    assert ticks[0] < slowness.NOTICE_SECONDS + waits.POLL_SECONDS + 0.5, ticks
    assert max(b - a for a, b in itertools.pairwise(ticks)) < slowness.NOTICE_SECONDS + waits.POLL_SECONDS + 0.5
    line = next(line for _, line in stamps if "still the same" in line)
    assert line.endswith(
        "still the same (slow API server: it answered 429 Too Many Requests to GET /api/v1/pods 4 s ago "
        "(Retry-After 1 s): it is throttling this client; still trying)"
    ), line


def test_a_quiet_server_keeps_the_progress_pace() -> None:
    stamps: list[float] = []
    with waits.NodeChanges(FakeKube(), "gpu-1") as changes, pytest.raises(waits.WaitTimedOut):  # type: ignore[arg-type]
        waits.wait_for(
            "nothing", lambda: (False, "the same"), 5, lambda _: stamps.append(time.monotonic()), "x", changes
        )
    assert len(stamps) == 1  # the opening line only: nothing slow, no line before PROGRESS_SECONDS


def test_a_retry_waits_at_least_what_retry_after_asks() -> None:
    error = KubeApiError(429, "Too many requests")
    error.retry_after = 2.0
    lines: list[str] = []
    check = Flaky(1, error)
    started = time.monotonic()
    waits.wait_for("the thing", check, 30, lines.append, "run it again")
    assert time.monotonic() - started >= 2.0
    assert any(line.endswith("retrying in 2.0 s") for line in lines), lines
