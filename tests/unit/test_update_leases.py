"""A plain `pulumi up` holds its cohorts' Leases or refuses; `migrate`'s own is the holder; a preview only warns.

The real program under fresh mocks, with the in-memory API server (`testkit.fake_kube`) as its cluster.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pulumi
import pytest

from cluster.client.errors import KubeAccessError
from cluster.records.lease_records import (
    COMMAND,
    HOLDER_ENV,
    HOLDER_HOST,
    HOLDER_PID,
    LEASE_FOR,
    LEASE_OF,
    ancestors,
    micro_time,
    started_this_process,
    utc_now,
)
from cluster.records.leases import LeaseHeld, Leases, leases_path, new_identity
from components import update_leases
from eks_hybrid_gpu import mocks
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME
from testkit.fake_kube import FakeKube
from tests.support.configs import PLUGIN_COHORT, Recorder, _base_config, cohort

pytestmark = pytest.mark.unit

NS = "gpu-system"
PLUGIN_LEASE = leases_path(NS, "gpu-allocation-cohort.plugin")
MIGRATE = "eks-hybrid-gpu migrate --stack test --cohort plugin --to dra"


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    fake.objects[f"/api/v1/namespaces/{NS}"] = {"metadata": {"name": NS}}
    monkeypatch.setattr("components.program.lease_client", lambda *_a: fake)
    return fake


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {"info": [], "warn": []}
    monkeypatch.setattr(pulumi.log, "info", lambda message, *_a, **_k: lines["info"].append(message))
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *_a, **_k: lines["warn"].append(message))
    return lines


@pytest.fixture(autouse=True)
def released() -> Iterator[list[Leases]]:
    """Every Leases the program takes, released after the test (the mocks' event loop never closes)."""
    taken: list[Leases] = []
    original = update_leases.hold

    def hold(*args: Any, **kwargs: Any) -> Leases:
        leases = original(*args, **kwargs)
        taken.append(leases)
        return leases

    update_leases.hold = hold  # type: ignore[assignment]
    yield taken
    update_leases.hold = original  # type: ignore[assignment]
    for leases in taken:
        leases.release()


def _foreign(kube: FakeKube, target: str = "plugin", command: str = MIGRATE, age: float = 1.0) -> dict[str, Any]:
    """A live cohort Lease of a `migrate` on another machine, renewed `age` s ago."""
    renewed = utc_now() - timedelta(seconds=age)
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": f"gpu-allocation-cohort.{target}",
            "namespace": NS,
            "labels": {LEASE_OF: "cohort"},
            "annotations": {
                LEASE_FOR: target,
                COMMAND: command,
                HOLDER_HOST: "ops-laptop",
                HOLDER_PID: "4242",
            },
        },
        "spec": {
            "holderIdentity": "ops-laptop/4242/0badcafe",
            "leaseDurationSeconds": 30,
            "acquireTime": micro_time(renewed - timedelta(seconds=60)),
            "renewTime": micro_time(renewed),
        },
    }
    return kube.create(leases_path(NS), body)


def _ledger(kube: FakeKube, *cohorts: str) -> None:
    document = {
        "cohorts": {
            name: {"owner": "device-plugin", "nodeSelector": {"workload.example.com/gpu-allocation": name}}
            for name in cohorts
        }
    }
    kube.create(
        f"/api/v1/namespaces/{NS}/configmaps",
        {"metadata": {"name": LEDGER_NAME, "namespace": NS}, "data": {LEDGER_KEY: json.dumps(document)}},
    )


def _run(**kwargs: Any) -> Recorder:
    recorder = Recorder()
    mocks.run_program(_base_config(), "test", recorder, cohort_leases=True, **kwargs)
    return recorder


def test_an_update_takes_each_cohorts_lease_and_the_ledgers_and_releases_them_when_it_ends(
    kube: FakeKube, logged: dict[str, list[str]], released: list[Leases]
) -> None:
    _ledger(kube, "plugin", "retired")

    recorder = _run()

    assert recorder.registrations  # the update went on
    (leases,) = released
    names = sorted(path.rsplit("/", 1)[1] for path in kube.objects if "/leases/" in path)
    assert names == ["gpu-allocation-cohort.plugin", "gpu-allocation-cohort.retired"]
    lease = kube.objects[PLUGIN_LEASE]
    assert lease["spec"]["holderIdentity"] == leases.identity
    assert lease["metadata"]["annotations"][COMMAND] == "pulumi up --stack test"
    assert (
        "holding Leases in namespace gpu-system: gpu-allocation-cohort.plugin, gpu-allocation-cohort.retired"
        in logged["info"]
    )
    leases.release_when(lambda: True)  # what the program's closing event loop does
    deadline = time.monotonic() + 5
    while any("/leases/" in path for path in kube.objects) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [path for path in kube.objects if "/leases/" in path]


def test_an_update_beside_a_running_migration_is_refused_naming_the_holder_since_when_and_what_to_do(
    kube: FakeKube,
) -> None:
    held = _foreign(kube)
    _ledger(kube, "plugin")

    with pytest.raises(pulumi.RunError) as caught:
        _run()

    message = str(caught.value)
    assert message.startswith("pulumi up of stack test refused, nothing was changed: cohort plugin is held by ")
    assert f"ops-laptop/4242/0badcafe running `{MIGRATE}`, renewed 1 s ago (lease duration 30 s)" in message
    assert f"it has held cohort plugin since {held['spec']['acquireTime']}" in message
    assert f"run `{MIGRATE}` again: it finishes what it started, from where it stopped" in message
    assert "`kubectl -n gpu-system delete lease gpu-allocation-cohort.plugin` clears it" in message
    assert kube.objects[PLUGIN_LEASE]["spec"]["holderIdentity"] == "ops-laptop/4242/0badcafe"  # untouched
    assert not [w for w in kube.writes if "/leases/" in w]  # refused before any takeover or delete


def test_migrates_own_update_is_the_holder_and_takes_only_the_cohorts_it_does_not_hold(
    kube: FakeKube, released: list[Leases]
) -> None:
    migration = Leases(kube, NS, MIGRATE, lambda _line: None)  # type: ignore[arg-type]
    migration.acquire("cohort", ["plugin"])
    _ledger(kube, "plugin", "retired")
    try:
        recorder = mocks.run_program(
            _base_config(), "test", Recorder(), cohort_leases=True, lease_holder=migration.identity
        )
        assert recorder.registrations
        (update,) = released
        assert set(update.held) == {"gpu-allocation-cohort.retired"}  # plugin stays the migration's
        assert kube.objects[PLUGIN_LEASE]["spec"]["holderIdentity"] == migration.identity
        update.release()
        assert kube.objects[PLUGIN_LEASE]["spec"]["holderIdentity"] == migration.identity  # not released by it
    finally:
        migration.release()


def test_a_holder_that_is_no_run_above_this_process_is_refused(kube: FakeKube) -> None:
    with pytest.raises(pulumi.RunError) as caught:
        mocks.run_program(
            _base_config(), "test", Recorder(), cohort_leases=True, lease_holder="ops-laptop/4242/0badcafe"
        )

    assert str(caught.value).startswith(
        "this update was told it runs for Lease holder 'ops-laptop/4242/0badcafe' "
        f"(`{HOLDER_ENV}`, or the program's lease_holder), which is no run of this machine that started it"
    )
    assert not [path for path in kube.objects if "/leases/" in path]


def test_leases_that_cannot_be_read_refuse_the_update(kube: FakeKube, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*_a: Any, **_k: Any) -> Any:
        msg = "cannot reach the cluster at https://127.0.0.1:6443 (connection refused)"
        raise KubeAccessError(msg)

    monkeypatch.setattr(kube, "get_or_none", unreachable)

    with pytest.raises(pulumi.RunError) as caught:
        _run()

    assert str(caught.value) == (
        "pulumi up of stack test refused, nothing was changed: the cohorts' Leases in namespace gpu-system could not "
        "be read or taken (cannot reach the cluster at https://127.0.0.1:6443 (connection refused)); an update that "
        "cannot see whether `migrate` or `move-host` is changing these GPUs does not run beside them: once the API "
        "server answers, run `pulumi up` again"
    )


def test_a_preview_takes_no_lease_and_warns_of_a_running_migration(
    kube: FakeKube, logged: dict[str, list[str]]
) -> None:
    _foreign(kube)
    before = dict(kube.objects)

    recorder = _run(preview=True)

    assert recorder.registrations
    assert kube.objects == before
    assert logged["warn"] == [
        f"cohort plugin is held by ops-laptop/4242/0badcafe running `{MIGRATE}`, renewed 1 s ago (lease duration 30 s):"
        " that run is changing these GPUs now, and a `pulumi up` of this stack is refused until it finishes "
        "(`eks-hybrid-gpu inspect` shows the Leases)"
    ]


def test_the_first_update_takes_no_lease_in_the_namespace_it_creates(
    kube: FakeKube, logged: dict[str, list[str]]
) -> None:
    del kube.objects[f"/api/v1/namespaces/{NS}"]  # nobody can hold a Lease there: the update creates it

    recorder = _run()

    assert recorder.registrations
    assert not [path for path in kube.objects if "/leases/" in path]
    assert "namespace gpu-system does not exist yet: no run holds a Lease there; none taken" in logged["info"]


def test_a_cohort_of_another_stack_does_not_hold_this_update(kube: FakeKube) -> None:
    _foreign(kube, "elsewhere")
    config = _base_config(cohorts=[cohort(PLUGIN_COHORT)])

    recorder = mocks.run_program(config, "test", Recorder(), cohort_leases=True)

    assert recorder.registrations


def test_started_this_process_is_this_process_or_one_above_it_on_this_machine() -> None:
    here = socket.gethostname()
    assert started_this_process(new_identity())
    assert started_this_process(f"{here}/{os.getppid()}/abcdef12")
    assert ancestors()[:2] == [os.getpid(), os.getppid()]
    child = subprocess.run(
        [sys.executable, "-c", "from cluster.records.lease_records import started_this_process as s, HOLDER_ENV;"
         "import os; print(s(os.environ[HOLDER_ENV]))"],
        env={**os.environ, HOLDER_ENV: new_identity()},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert child.stdout.strip() == "True"  # the engine's child (the program) trusts the run that started it
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not started_this_process(f"{here}/{done.stdout.strip()}/abcdef12")  # a process beside, not above
    assert not started_this_process(f"elsewhere/{os.getpid()}/abcdef12")
    assert not started_this_process(f"{here}/{os.getpid()}")
    assert not started_this_process(f"{here}/-1/abcdef12")


def test_a_lease_of_the_run_this_one_acts_for_is_neither_taken_renewed_nor_released() -> None:
    kube = FakeKube()
    with Leases(kube, NS, MIGRATE, lambda _line: None) as parent:  # type: ignore[arg-type]
        parent.acquire("cohort", ["plugin"])
        child = Leases(kube, NS, "pulumi up --stack test", lambda _l: None, on_behalf_of=parent.identity)  # type: ignore[arg-type]
        child.acquire("cohort", ["plugin", "other"])
        assert set(child.held) == {"gpu-allocation-cohort.other"}
        child.release()
        assert kube.objects[PLUGIN_LEASE]["spec"]["holderIdentity"] == parent.identity
    stranger = Leases(kube, NS, "pulumi up --stack test", lambda _l: None, on_behalf_of="x/1/y")  # type: ignore[arg-type]
    _foreign(kube)
    with pytest.raises(LeaseHeld) as caught:
        stranger.acquire("cohort", ["plugin"])
    assert caught.value.lease is not None
    assert caught.value.lease.holder == "ops-laptop/4242/0badcafe"
