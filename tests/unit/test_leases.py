"""The Leases that make `move-host` and `migrate` one operator at a time: take, refuse, take over, renew, release."""

from __future__ import annotations

import copy
import os
import re
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.client.kubeclient import KubeApiError
from cluster.client.names import NameRefused
from cluster.records import leases
from cluster.records.lease_records import (
    COMMAND,
    HOLDER_HOST,
    HOLDER_PID,
    LEASE_FOR,
    LEASE_OF,
    MAX_NAME,
    HeldLease,
    lease_lines,
    lease_name,
    micro_time,
    utc_now,
)
from cluster.records.leases import LeaseHeld, LeaseLost, Leases, held_leases, leases_path
from testkit.fake_kube import FakeKube

pytestmark = pytest.mark.unit

NS = "gpu-system"


def _leases(kube: FakeKube, command: str = "eks-hybrid-gpu move-host gpu-1 --to dra") -> Leases:
    return Leases(kube, NS, command, lambda line: said.append(line))  # type: ignore[arg-type]


said: list[str] = []


@pytest.fixture(autouse=True)
def _clear_said() -> None:
    said.clear()


def _lease(kube: FakeKube, name: str) -> dict[str, Any]:
    return kube.objects[leases_path(NS, name)]


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_run_takes_a_lease_per_node_and_cohort_and_deletes_them_when_it_ends() -> None:
    kube = FakeKube()
    with _leases(kube, "eks-hybrid-gpu migrate --stack s") as held:
        held.acquire("cohort", ["plugin"])
        held.acquire("node", ["gpu-1"])
        assert said == [
            "holding Leases in namespace gpu-system: gpu-allocation-cohort.plugin",
            "holding Leases in namespace gpu-system: gpu-allocation-node.gpu-1",
        ]
        node = _lease(kube, "gpu-allocation-node.gpu-1")
        cohort = _lease(kube, "gpu-allocation-cohort.plugin")
        assert node["spec"]["holderIdentity"] == cohort["spec"]["holderIdentity"] == held.identity
        assert held.identity.startswith(f"{socket.gethostname()}/{os.getpid()}/")
        assert node["metadata"]["labels"][LEASE_OF] == "node"
        assert node["metadata"]["annotations"][LEASE_FOR] == "gpu-1"
        assert node["metadata"]["annotations"][COMMAND] == "eks-hybrid-gpu migrate --stack s"
        assert node["spec"]["leaseDurationSeconds"] == 30
        assert {(lease.kind, lease.target) for lease in held_leases(kube, NS)} == {
            ("node", "gpu-1"),
            ("cohort", "plugin"),
        }
    assert not [p for p in kube.objects if "/leases/" in p]


def test_a_second_run_is_refused_naming_the_holder_and_its_command() -> None:
    kube = FakeKube()
    with _leases(kube) as first:
        first.acquire("node", ["gpu-1"])
        second = _leases(kube, "eks-hybrid-gpu migrate --stack s --cohort plugin --to dra")
        with pytest.raises(LeaseHeld) as refused:
            second.acquire("node", ["gpu-1"])
        message = str(refused.value)
        assert f"node gpu-1 is held by another run: {first.identity} running `eks-hybrid-gpu move-host gpu-1" in message
        assert "renewed 0 s ago (lease duration 30 s)" in message
        assert f"kubectl -n {NS} get lease gpu-allocation-node.gpu-1 -o yaml" in message
        assert _lease(kube, "gpu-allocation-node.gpu-1")["spec"]["holderIdentity"] == first.identity


def test_a_refused_run_gives_back_what_it_took_first() -> None:
    kube = FakeKube()
    with _leases(kube) as first:
        first.acquire("node", ["gpu-2"])
        second = _leases(kube)
        with pytest.raises(LeaseHeld):
            second.acquire("node", ["gpu-1", "gpu-2"])
        assert leases_path(NS, "gpu-allocation-node.gpu-1") not in kube.objects
        assert second.held == {}


def _expire(kube: FakeKube, name: str, seconds: int) -> None:
    lease = _lease(kube, name)
    lease["spec"]["renewTime"] = micro_time(utc_now() - timedelta(seconds=seconds))


def _held_elsewhere(kube: FakeKube, renewed_seconds_ago: int) -> None:
    """gpu-1's Lease as a run on another machine left it, last renewed that long ago."""
    other = _leases(kube)
    other.acquire("node", ["gpu-1"])
    other._stop.set()  # it stops renewing: hung, or its machine is gone
    _expire(kube, "gpu-allocation-node.gpu-1", renewed_seconds_ago)
    _lease(kube, "gpu-allocation-node.gpu-1")["metadata"]["annotations"]["eks-hybrid-gpu.io/holder-host"] = "elsewhere"


@pytest.fixture
def _short_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "OBSERVE_SECONDS", 0.3)


@pytest.mark.usefixtures("_short_watch")
def test_a_lease_not_renewed_for_longer_than_its_duration_is_taken_over_with_a_notice() -> None:
    kube = FakeKube()
    _held_elsewhere(kube, 31)
    with _leases(kube) as fresh:
        fresh.acquire("node", ["gpu-1"])
        assert _lease(kube, "gpu-allocation-node.gpu-1")["spec"]["holderIdentity"] == fresh.identity
    assert any("looks expired by this machine's clock; watching it 0 s" in line for line in said)
    assert any(
        "took over Lease gpu-system/gpu-allocation-node.gpu-1" in line and "it has expired" in line for line in said
    )


def test_an_expired_lease_of_this_machine_is_taken_over_without_watching(monkeypatch: pytest.MonkeyPatch) -> None:
    """One clock for both: expired is a fact here, and a rerun must not wait a renewal interval per Lease."""
    monkeypatch.setattr(leases, "OBSERVE_SECONDS", 5.0)
    kube = FakeKube()
    stuck = _leases(kube)
    stuck.acquire("node", ["gpu-1"])
    stuck._stop.set()
    _expire(kube, "gpu-allocation-node.gpu-1", 31)
    started = time.monotonic()
    with _leases(kube) as fresh:
        fresh.acquire("node", ["gpu-1"])
    assert time.monotonic() - started < 2
    assert not any("watching it" in line for line in said)
    assert any("it has expired" in line for line in said)


@pytest.mark.usefixtures("_short_watch")
def test_an_expired_looking_lease_its_holder_renews_while_watched_is_not_taken_over() -> None:
    """The holder's clock is 31 s behind this one: its fresh renewals look expired here, and it is alive."""
    kube = FakeKube()
    _held_elsewhere(kube, 31)
    path = leases_path(NS, "gpu-allocation-node.gpu-1")

    def renew_behind() -> None:
        time.sleep(0.1)
        renewed = copy.deepcopy(kube.objects[path])
        renewed["spec"]["renewTime"] = micro_time(utc_now() - timedelta(seconds=31))
        kube.replace(path, renewed)

    threading.Thread(target=renew_behind, daemon=True).start()
    with pytest.raises(LeaseHeld, match=r"renewed its Lease while this run watched it \(its machine's clock"):
        _leases(kube).acquire("node", ["gpu-1"])
    assert kube.objects[path]["spec"]["holderIdentity"] != ""
    assert not any("took over" in line for line in said)


def test_a_lease_renewed_just_now_on_another_machine_is_not_taken_over() -> None:
    kube = FakeKube()
    _held_elsewhere(kube, 29)
    with pytest.raises(LeaseHeld):
        _leases(kube).acquire("node", ["gpu-1"])


def test_a_lease_whose_holder_process_here_has_exited_is_taken_over_at_once() -> None:
    kube = FakeKube()
    killed = _leases(kube)
    killed.acquire("node", ["gpu-1"])
    killed._stop.set()
    _lease(kube, "gpu-allocation-node.gpu-1")["metadata"]["annotations"][HOLDER_PID] = str(_dead_pid())
    with _leases(kube) as rerun:
        rerun.acquire("node", ["gpu-1"])
        assert _lease(kube, "gpu-allocation-node.gpu-1")["spec"]["holderIdentity"] == rerun.identity
    assert any("its holder process on this machine has exited" in line for line in said)


def test_renewal_moves_the_renew_time_and_a_taken_over_lease_stops_the_run() -> None:
    kube = FakeKube()
    run = _leases(kube)
    run._stop.set()
    run.acquire("cohort", ["plugin"])
    name = "gpu-allocation-cohort.plugin"
    _expire(kube, name, 20)
    run._renew(name)
    assert HeldLease.of(_lease(kube, name)).age() < 5  # type: ignore[operator]
    run.ensure()
    taken = copy.deepcopy(_lease(kube, name))
    taken["spec"]["holderIdentity"] = "someone-else"
    kube.replace(leases_path(NS, name), taken)  # a takeover: a write over the version it read
    run._renew(name)
    with pytest.raises(LeaseLost, match=r"Lease gpu-system/gpu-allocation-cohort\.plugin was taken over"):
        run.ensure()


def test_lease_names_are_object_names_even_for_the_longest_node_name() -> None:
    assert lease_name("node", "gpu-1") == "gpu-allocation-node.gpu-1"
    longest = ".".join(["a" * 63] * 3) + "." + "b" * 61
    assert len(longest) == 253
    name = lease_name("node", longest)
    assert len(name) <= MAX_NAME
    assert name != lease_name("node", longest[:-1] + "c")
    with pytest.raises(NameRefused):
        leases_path(NS, "a/b")


FIELDS = ["holderIdentity", "renewTime", "acquireTime", "leaseDurationSeconds", "name", "labels", "annotations"]
SHORT = st.text(max_size=5)


@given(
    st.dictionaries(
        st.sampled_from(["metadata", "spec"]),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=5),
            st.dictionaries(
                st.sampled_from(
                    [
                        "holderIdentity",
                        "renewTime",
                        "acquireTime",
                        "leaseDurationSeconds",
                        "name",
                        "labels",
                        "annotations",
                    ]
                ),
                st.one_of(
                    st.none(),
                    st.integers(),
                    st.text(max_size=30),
                    st.dictionaries(st.text(max_size=5), st.text(max_size=5)),
                ),
            ),
        ),
    )
)
def test_any_lease_object_is_read_without_a_crash_and_an_unreadable_one_counts_as_expired(
    lease: dict[str, Any],
) -> None:
    try:
        held = HeldLease.of(lease)
    except (AttributeError, TypeError):
        pytest.fail(f"HeldLease.of crashed on {lease!r}")
    lines = lease_lines([held])
    assert len(lines) == 1
    if held.renewed is None or not held.holder:
        assert held.expired()


NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)
"""A fixed clock for the skew tests: what this machine says the time is."""


def _skewed(renewed_ahead: float, *, acquired_ahead: float | None = None) -> HeldLease:
    """A Lease of another machine whose clock runs ahead: its renewTime lies `renewed_ahead` s after NOW."""
    acquired = NOW + timedelta(seconds=renewed_ahead if acquired_ahead is None else acquired_ahead)
    return HeldLease.of(
        {
            "metadata": {
                "name": "gpu-allocation-node.gpu-1",
                "labels": {LEASE_OF: "node"},
                "annotations": {
                    LEASE_FOR: "gpu-1",
                    COMMAND: "eks-hybrid-gpu move-host gpu-1 --to dra",
                    HOLDER_HOST: "h2",
                },
            },
            "spec": {
                "holderIdentity": "h2/4242/abcd",
                "leaseDurationSeconds": 30,
                "acquireTime": micro_time(acquired),
                "renewTime": micro_time(NOW + timedelta(seconds=renewed_ahead)),
            },
        }
    )


def test_a_lease_renewed_ten_minutes_ahead_is_named_clock_skew_not_renewed_minus_598_s_ago() -> None:
    lease = _skewed(598)
    assert lease.ahead(NOW) == pytest.approx(598)
    assert not lease.expired(NOW)
    words = lease.describe(NOW)
    assert "-598" not in words
    assert words == (
        "h2/4242/abcd running `eks-hybrid-gpu move-host gpu-1 --to dra`, its renewTime lies 598 s ahead of this "
        "machine's clock (clock skew: h2's clock or this one is wrong) (lease duration 30 s)"
    )
    assert lease_lines([lease], NOW) == [
        f"node gpu-1: clock skew, taken over only if nobody renews it for one renewal interval by {words}"
    ]
    assert lease.as_json(NOW)["secondsAheadOfThisClock"] == pytest.approx(598)
    fix = lease.skew_fix("gpu-system")
    assert "fix the clock of h2" in fix
    assert "`kubectl -n gpu-system delete lease gpu-allocation-node.gpu-1`" in fix


def test_an_acquire_time_ahead_is_skew_too_and_a_few_seconds_ahead_is_just_now() -> None:
    assert _skewed(-5, acquired_ahead=120).ahead(NOW) == pytest.approx(120)
    assert "its acquireTime lies 120 s ahead" in _skewed(-5, acquired_ahead=120).describe(NOW)
    slightly = _skewed(3)  # within SKEW_TOLERANCE_SECONDS: two clocks a little apart, renewed just now
    assert slightly.ahead(NOW) is None
    assert "renewed 0 s ago (lease duration 30 s)" in slightly.describe(NOW)
    assert lease_lines([slightly], NOW)[0].startswith("node gpu-1: held by ")
    assert _skewed(3).as_json(NOW)["secondsAheadOfThisClock"] is None


def _skewed_elsewhere(kube: FakeKube, monkeypatch: pytest.MonkeyPatch, ahead: int) -> str:
    """gpu-1's Lease as a run on another machine wrote it, its clock `ahead` s ahead of this one's (fixed at NOW)."""
    monkeypatch.setattr(leases, "utc_now", lambda: NOW)
    other = _leases(kube)
    other.acquire("node", ["gpu-1"])
    other._stop.set()
    name = "gpu-allocation-node.gpu-1"
    _lease(kube, name)["spec"]["renewTime"] = micro_time(NOW + timedelta(seconds=ahead))
    _lease(kube, name)["spec"]["acquireTime"] = micro_time(NOW + timedelta(seconds=ahead))
    _lease(kube, name)["metadata"]["annotations"][HOLDER_HOST] = "elsewhere"
    said.clear()
    return name


@pytest.mark.usefixtures("_short_watch")
def test_a_skewed_lease_nobody_renews_while_watched_is_taken_over_naming_the_skew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not ten minutes of "held": one renewal interval's watch, then a takeover that says why."""
    kube = FakeKube()
    name = _skewed_elsewhere(kube, monkeypatch, 598)
    with _leases(kube) as fresh:
        fresh.acquire("node", ["gpu-1"])
        assert _lease(kube, name)["spec"]["holderIdentity"] == fresh.identity
    assert said[0].startswith(f"Lease gpu-system/{name} of {socket.gethostname()}/")
    assert said[0].endswith(
        ": its renewTime lies 598 s ahead of this machine's clock (clock skew: elsewhere's clock or this one is "
        "wrong), so its age says nothing; watching it 0 s (one renewal interval) for a renewal before taking it over"
    )
    took = [line for line in said if line.startswith("took over")]
    assert len(took) == 1
    assert "its renewTime lies 598 s ahead of this machine's clock (clock skew: elsewhere's clock" in took[0]
    assert took[0].endswith(
        "(lease duration 30 s): nobody renewed it in 0 s of watching; fix the clock of elsewhere before it runs "
        "these commands again"
    )
    assert not any("-598" in line for line in said)


@pytest.mark.usefixtures("_short_watch")
def test_a_skewed_lease_its_holder_renews_while_watched_is_refused_naming_holder_skew_and_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = FakeKube()
    name = _skewed_elsewhere(kube, monkeypatch, 598)
    path = leases_path(NS, name)

    def renew_ahead() -> None:
        time.sleep(0.1)
        renewed = copy.deepcopy(kube.objects[path])
        renewed["spec"]["renewTime"] = micro_time(NOW + timedelta(seconds=600))
        kube.replace(path, renewed)

    threading.Thread(target=renew_ahead, daemon=True).start()
    with pytest.raises(LeaseHeld) as refused:
        _leases(kube).acquire("node", ["gpu-1"])
    message = str(refused.value)
    assert message.startswith(f"node gpu-1 is held by another run: {socket.gethostname()}/")
    assert "its renewTime lies 600 s ahead of this machine's clock (clock skew: elsewhere's clock" in message
    assert "it renewed its Lease while this run watched it, so it is alive" in message
    assert "fix the clock of elsewhere (or of this machine) with NTP" in message
    assert f"once its holder is known gone, `kubectl -n {NS} delete lease {name}` clears it" in message
    assert "-59" not in message
    assert not any("took over" in line for line in said)


class Throttled(FakeKube):
    """An API server that answers 429 to every Lease write once `throttled` is set (a priority level with no share)."""

    def __init__(self) -> None:
        super().__init__()
        self.throttled = threading.Event()
        self.renewals: list[float] = []

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if "/leases/" in path:
            self.renewals.append(time.monotonic())
            if self.throttled.is_set():
                raise KubeApiError(429, "Too many requests, please try again later.", request=f"PUT {path}")
        return super().replace(path, body)


def test_a_throttled_renewal_is_retried_soon_and_a_lease_unrenewed_for_its_duration_stops_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(leases, "RENEW_SECONDS", 0.2)
    monkeypatch.setattr(leases, "RENEW_RETRY_SECONDS", 0.05)
    monkeypatch.setattr(leases, "DURATION_SECONDS", 2)
    kube = Throttled()
    with _leases(kube) as run:
        run.acquire("node", ["gpu-1"])
        time.sleep(0.5)
        run.ensure()  # renewed: nothing stops the run
        assert len(kube.renewals) >= 2
        kube.throttled.set()
        throttled_at = time.monotonic()
        time.sleep(0.5)
        run.ensure()  # unrenewed for less than its duration: the run goes on
        tries = [t for t in kube.renewals if t > throttled_at]
        assert len(tries) >= 4  # retried every RENEW_RETRY_SECONDS, not once an interval
        time.sleep(1.8)
        with pytest.raises(LeaseLost) as stopped:
            run.ensure()
    message = str(stopped.value)
    assert re.match(
        r"Lease gpu-system/gpu-allocation-node\.gpu-1 went unrenewed for \d+ s, longer than its duration", message
    )
    assert (
        "(2 s): the API server answered 429 to PUT /apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/"
        "gpu-allocation-node.gpu-1: Too many requests, please try again later.; another run may now judge it expired "
        "and take over, so this run stops before its next change; once the API server answers again, run "
        "`eks-hybrid-gpu move-host gpu-1 --to dra` again: it continues from where it stopped"
    ) in message


class OneSlowLease(FakeKube):
    """An API server that holds every write of one Lease for `hold` seconds (its answer comes at the deadline)."""

    def __init__(self, slow: str, hold: float) -> None:
        super().__init__()
        self.slow, self.hold = slow, hold
        self.renewals: dict[str, list[float]] = {}

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        name = path.rsplit("/", 1)[-1]
        self.renewals.setdefault(name, []).append(time.monotonic())
        if name == self.slow:
            time.sleep(self.hold)
        return super().replace(path, body)


def test_a_renewal_the_server_holds_delays_no_other_lease_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "RENEW_SECONDS", 0.1)
    kube = OneSlowLease(slow=lease_name("node", "gpu-1"), hold=2.0)
    with _leases(kube) as run:
        run.acquire("node", ["gpu-1"])  # the slow one is renewed first
        run.acquire("cohort", ["dra", "plugin"])
        time.sleep(4.5)
        fast = {name: times for name, times in kube.renewals.items() if name != kube.slow}
    assert sorted(fast) == [lease_name("cohort", "dra"), lease_name("cohort", "plugin")]
    for times in fast.values():
        assert len(times) >= 2, times
        # A tick waits for its slowest renewal, but the others are written at its start, not `hold` after the slow
        # one; half the hold leaves room for a thread started late on a loaded machine.
        assert all(t - s < 1.0 for t, s in zip(times, kube.renewals[kube.slow], strict=False)), (times, kube.renewals)


def test_a_renewal_that_outlives_the_tick_holds_no_other_and_is_not_sent_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that trickles its headers outlives every read timeout: the tick goes on without that renewal."""
    monkeypatch.setattr(leases, "RENEW_SECONDS", 0.1)
    monkeypatch.setattr(leases, "RENEW_WAIT_SECONDS", 0.3)
    monkeypatch.setattr(leases, "RENEW_RETRY_SECONDS", 0.1)
    monkeypatch.setattr(leases, "DURATION_SECONDS", 1)
    kube = OneSlowLease(slow=lease_name("node", "gpu-1"), hold=2.5)
    with _leases(kube) as run:
        run.acquire("node", ["gpu-1"])
        run.acquire("cohort", ["dra"])
        time.sleep(1.6)
        with pytest.raises(LeaseLost, match=r"gpu-allocation-node\.gpu-1 went unrenewed for \d+ s"):
            run.ensure()  # the held renewal left its Lease unrenewed past its duration: the run stops
        slow, fast = kube.renewals[kube.slow], kube.renewals[lease_name("cohort", "dra")]
        assert len(slow) == 1, slow  # not sent again while its first write waits on the server
        assert len(fast) >= 3, fast  # the other Lease renewed tick after tick meanwhile
        assert run.renewed_at[lease_name("cohort", "dra")] > time.monotonic() - 0.6


def test_renewal_goes_through_a_connection_of_its_own_with_its_own_deadline() -> None:
    from cluster.client.kubeclient import Kube

    shared = Kube(api=__import__("kubernetes").client.ApiClient(), kubeconfig="k", context="c", server="s")
    own = shared.own_connection(leases.RENEW_TIMEOUT)
    assert own.api is not shared.api
    assert own.api.rest_client.pool_manager is not shared.api.rest_client.pool_manager
    assert own.timeout == leases.RENEW_TIMEOUT
    assert own.timeout[1] < leases.DURATION_SECONDS / 3
    assert shared.timeout == (5.0, 30.0)


def test_a_renewal_the_server_drops_unanswered_is_sent_once_and_left_to_the_next_try() -> None:
    """urllib3 sends a PUT the server dropped up to three times more, each with the whole deadline; not a renewal."""
    import kubernetes

    from cluster.client import kube_http
    from cluster.client.kubeclient import Kube, KubeUnreachable

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[float] = []

    def drop_each() -> None:  # reads the request, then closes the connection without an answer
        while True:
            connection, _ = server.accept()
            accepted.append(time.monotonic())
            connection.recv(65536)
            connection.close()

    threading.Thread(target=drop_each, daemon=True).start()
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.getsockname()[1]}"
    api = kube_http.transport(kubernetes.client.ApiClient(configuration=configuration))
    shared = Kube(api=api, kubeconfig="k", context="c", server=configuration.host)
    path = leases_path(NS, "gpu-allocation-node.gpu-1")
    with pytest.raises(KubeUnreachable, match="Remote end closed connection without response"):
        shared.own_connection(leases.RENEW_TIMEOUT, resend=False).replace(path, {"spec": {}})
    assert len(accepted) == 1  # one connection: the renewal loop tries again soon, with a fresh renewTime
    with pytest.raises(KubeUnreachable):
        shared.replace(path, {"spec": {}})
    assert len(accepted) == 1 + 4  # the run's other requests keep urllib3's resends of a dropped request
    assert shared.api.configuration.retries.total == 3  # the shared client's setting is its own
    server.close()


def test_a_drain_asks_no_eviction_once_the_runs_lease_went_unrenewed(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from eks_hybrid_gpu import transit

    held = SimpleNamespace(pod="ai-workloads/trainer", holds="nvidia.com/gpu: 1", describe=lambda: "trainer holds 1")
    monkeypatch.setattr(transit, "read_state", lambda _kube, _node: SimpleNamespace(consumers=[held]))
    evicted: list[str] = []
    monkeypatch.setattr(transit, "evict", lambda _kube, pod: (evicted.append(pod), (True, ""))[1])

    def lost() -> None:
        msg = "Lease gpu-system/gpu-allocation-node.gpu-1 went unrenewed for 31 s, longer than its duration (30 s)"
        raise LeaseLost(msg)

    with pytest.raises(LeaseLost):
        transit.drain_consumers(
            FakeKube(),  # type: ignore[arg-type]
            "gpu-1",
            drain=True,
            timeout=5,
            progress=said.append,
            rerun="eks-hybrid-gpu move-host gpu-1 --to dra --drain",
            before_eviction=lost,
        )
    assert evicted == []
