"""A `move-host --drain` under a priority level with no share and a busy neighbour (#45).

The local stack is up for the module (test_in_transit's `transit`: cohort `plugin` on sim-plugin-0/1, `dra` on
sim-dra-0/1). The command runs as a ServiceAccount of its own; a FlowSchema sends that user's requests to a
PriorityLevelConfiguration with no concurrency share and no borrowing (Reject), while the tests' admin
(system:masters, exempt) keeps working. Such a level still admits a request whenever none of its own is executing
(the queueset's rule against starving wide requests), so a lone command is never refused: twelve threads of the same
user list pods back to back to keep it busy. On this two-core machine that load mostly slows the API server (few or
no 429s come back) - which is the fault the issue saw: single requests blocked for tens of seconds and Leases left
unrenewed past their duration. The load is held 40 s, longer than a Lease's duration, while the drain waits on a pod
a PodDisruptionBudget guards. What must hold: no change (eviction, label, cordon) while the node's Lease is
unrenewed past its duration; nobody else holds it; the run either stops before its next change saying why, or goes
on once its renewal succeeded over the version it last wrote; the same command finishes the move; and while the
throttle holds the command is never silent for more than a few seconds (`cluster.client.slowness`: a request
unanswered is said within SLOW_SECONDS and again every NOTICE_SECONDS, a slow check at the same pace, a wait
with nothing in flight every PROGRESS_SECONDS).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from cluster.client import kubeclient, slowness, waits
from eks_hybrid_gpu import localcluster, movehost
from tests.integration.helpers import LeaseWatch, command_process
from tests.integration.test_in_transit import WORKLOADS, consumer, transit_stack  # noqa: F401 (the module's stack)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.charts]

NODE = "sim-plugin-0"
KEY = "workload.example.com/gpu-allocation"
NODE_LEASE = f"/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/gpu-allocation-node.{NODE}"
FLOW = "/apis/flowcontrol.apiserver.k8s.io/v1"
PDB = f"/apis/policy/v1/namespaces/{WORKLOADS}/poddisruptionbudgets"
THROTTLE_SECONDS = 40.0
"""Longer than a Lease's duration (30 s)."""
SILENCE_BOUND = waits.PROGRESS_SECONDS + slowness.SLOW_SECONDS + 1.0
"""The longest a throttled command may say nothing. A wait with no request in flight (a drain held by a budget) says
what it waits for every PROGRESS_SECONDS and re-reads then; a re-read the server leaves unanswered is said within
SLOW_SECONDS, then every NOTICE_SECONDS. So 8 s idle plus 1.5 s, plus 1 s for the reader thread, which shares this
process (and its GIL) with the twelve threads of load."""


def mover_kubeconfig(kube: kubeclient.Kube, cluster: localcluster.LocalCluster, folder: Path) -> Path:
    """A kubeconfig of ServiceAccount default/mover, bound to cluster-admin: a user the FlowSchema can single out."""
    if kube.get_or_none("/api/v1/namespaces/default/serviceaccounts/mover") is not None:
        kube.delete("/api/v1/namespaces/default/serviceaccounts/mover")  # an earlier case's, in the module's cluster
        kube.delete("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/mover-admin")
    kube.create("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "mover"}})
    kube.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": "mover-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "mover", "namespace": "default"}],
        },
    )
    token = kube.create(
        "/api/v1/namespaces/default/serviceaccounts/mover/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    document = json.loads(cluster.kubeconfig.read_text())
    document["users"] = [{"name": "admin", "user": {"token": token}}]
    path = folder / "mover.kubeconfig"
    path.write_text(json.dumps(document))
    path.chmod(0o600)
    return path


def throttle(kube: kubeclient.Kube) -> None:
    """Every request of default/mover answered 429: a priority level with no share, no borrowing, Reject."""
    kube.create(
        f"{FLOW}/prioritylevelconfigurations",
        {
            "metadata": {"name": "no-share"},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 0,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
    )
    mover_flow_schema(
        kube,
        "throttle-mover",
        level="no-share",
        precedence=50,
        rule={
            "resourceRules": [
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": True}
            ],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        },
    )


def mover_flow_schema(kube: kubeclient.Kube, name: str, *, level: str, precedence: int, rule: dict[str, Any]) -> None:
    """A FlowSchema sending default/mover's requests that `rule` matches to priority level `level`."""
    mover = {"kind": "ServiceAccount", "serviceAccount": {"name": "mover", "namespace": "default"}}
    kube.create(
        f"{FLOW}/flowschemas",
        {
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": level},
                "matchingPrecedence": precedence,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [mover], **rule}],
            },
        },
    )


def route_leases(kube: kubeclient.Kube) -> None:
    """The mover's Lease requests in gpu-system to the built-in `leader-election` level, ahead of the throttle (a lower
    matchingPrecedence wins): the FlowSchema docs/moving-hosts.md gives operators, as the API server's own
    `leader-election` schema keeps the control plane's Lease renewals out of other traffic."""
    leases = {
        "verbs": ["get", "create", "update", "delete"],
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "namespaces": ["gpu-system"],
    }
    mover_flow_schema(kube, "mover-leases", level="leader-election", precedence=40, rule={"resourceRules": [leases]})


def unthrottle(kube: kubeclient.Kube) -> None:
    kube.delete(f"{FLOW}/flowschemas/throttle-mover")
    kube.delete(f"{FLOW}/flowschemas/mover-leases")
    kube.delete(f"{FLOW}/prioritylevelconfigurations/no-share")


class Hammer:
    """Requests of default/mover, back to back from several threads, through the no-share level while it runs.

    A level with no seats still admits a request when none of its own is executing (the queueset's rule against
    starving wide requests), so a lone command is never throttled: these keep one executing nearly always, and the
    command's requests, its Lease renewals included, are answered 429 as a busy, noisy user's would be.
    """

    def __init__(self, kubeconfig: Path, threads: int = 12) -> None:
        self.stop = threading.Event()
        self.kubeconfig = kubeconfig
        self.answers: dict[str, int] = {}
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        from cluster.client.kubeclient import KubeAccessError, KubeApiError
        from eks_hybrid_gpu import cluster_access

        kube = cluster_access.connect(str(self.kubeconfig))
        while not self.stop.is_set():
            try:
                kube.request("GET", "/api/v1/pods")
                key = "200"
            except KubeApiError as error:
                key = str(error.status)
            except KubeAccessError:
                key = "no answer"
            self.answers[key] = self.answers.get(key, 0) + 1

    def __enter__(self) -> Hammer:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)


class Lines:
    """A process's output lines, each with the seconds since `started` at which it was read."""

    def __init__(self, process: subprocess.Popen[str], started: float) -> None:
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, args=(process, started), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen[str], started: float) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append((time.monotonic() - started, line.rstrip("\n")))

    def first(self, text: str, after: float = 0.0) -> float | None:
        return next((t for t, line in self.lines if text in line and t >= after), None)


@pytest.mark.parametrize("leases_routed", [False, True], ids=["throttled", "leases-routed"])
def test_a_drain_under_load_past_the_lease_duration_never_acts_on_an_unrenewed_lease(
    leases_routed: bool,
    transit_stack: auto.Stack,  # noqa: F811
    kube: kubeclient.Kube,
    cluster: localcluster.LocalCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mover = mover_kubeconfig(kube, cluster, tmp_path)
    consumer(kube, "throttled", NODE)
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "throttled", "namespace": WORKLOADS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "throttled"}}},
    }
    kube.create(PDB, pdb)
    argv = [NODE, "--to", "dra", "--drain", "--timeout", "180", "--kubeconfig", str(mover)]
    started = time.monotonic()
    process = command_process("move-host", *argv)
    lines = Lines(process, started)
    on = off = 0.0
    try:
        with LeaseWatch(kube, NODE_LEASE) as watch:
            wait_for(lambda: lines.first(f"cordoned {NODE}") is not None or None, "cordoned", timeout=120)
            time.sleep(2)  # the drain is waiting on the guarded pod
            if leases_routed:
                route_leases(kube)
            throttle(kube)
            on = time.monotonic() - started
            with Hammer(mover) as hammer:
                time.sleep(THROTTLE_SECONDS)
                kube.delete(f"{PDB}/throttled")
                unthrottle(kube)
                off = time.monotonic() - started
            process.wait(timeout=240)
            lines.thread.join(timeout=5)
    finally:
        process.kill()
        kube.delete(f"{PDB}/throttled")
        unthrottle(kube)
    text = "\n".join(f"{t:6.1f} s  {line}" for t, line in lines.lines)
    first_429 = next((t for t, line in lines.lines if "429" in line and t >= on), None)
    said = [(t, line) for t, line in lines.lines if "Warning" not in line and "warnings.warn" not in line]  # urllib3's
    # Until its first request meets the throttle the command cannot know of it (a wait re-reads at its own pace):
    # the silence counted is between its lines from the first one after the throttle began.
    after_on = [x for x in said if x[0] >= on]
    first_line = after_on[0][0] - on if after_on else float("inf")
    gaps = [(a, b - a) for (a, _), (b, _) in itertools.pairwise(after_on)]
    silent = max((gap for a, gap in gaps if a < off), default=0.0)  # while the throttle held
    silent_after = max((gap for a, gap in gaps if a >= off), default=0.0)  # the waits' own pace once it ended
    stopped = lines.first("went unrenewed for")
    labelled = lines.first(f"labelled {NODE} {KEY}=dra")
    changes = [
        (t, line)
        for t, line in lines.lines
        if line.strip().startswith(("cordoned", "removed label", "labelled", "uncordoned", "evicting pod"))
    ]
    ages = [(round(t, 1), None if (age := watch.age_at(started + t)) is None else round(age, 1)) for t, _ in changes]
    longest = max(watch.longest.values(), default=0.0)
    routed = "leases routed to leader-election; " if leases_routed else ""
    figures = (
        f"{routed}throttle on at {on:.1f} s, off at {off:.1f} s; move-host exited {process.returncode}; hammer "
        f"answers: {hammer.answers}; first 429 line "
        f"{'none' if first_429 is None else format(first_429 - on, '.1f') + ' s'} after the throttle began; first line "
        f"{first_line:.1f} s after it; longest "
        f"silence {silent:.1f} s while throttled, {silent_after:.1f} s after; the Lease went unrenewed "
        f"{longest:.1f} s at most (duration 30 s); its age at each "
        f"change (s into the run, s unrenewed): {ages}; " + (f"stopped at {stopped:.1f} s" if stopped else "went on")
    )
    for t, age in ages:
        assert age is None or age < 30, (t, age, figures, text)  # no change on a Lease unrenewed past its duration
    assert len(watch.holders) == 1, watch.holders  # nobody else held the node's Lease meanwhile
    if leases_routed:  # renewals kept out of the throttled level: no Lease of the run ages past its duration
        assert process.returncode == 0, (figures, text)
        assert longest < 30, figures
    if process.returncode == 0:
        assert labelled is not None, text
        assert labelled > off, text  # its next change came only after the throttle
    else:
        assert stopped is not None, text  # it stopped before its next change, saying why
        assert "another run may now judge it expired and take over, so this run stops before its next change" in text
    # The same command, unthrottled, finishes the move (or finds it done); then the node goes back.
    capsys.readouterr()
    assert movehost.main([*argv[:-1], str(cluster.kubeconfig)]) == 0
    assert kube.get(f"/api/v1/nodes/{NODE}")["metadata"]["labels"][KEY] == "dra"
    assert movehost.main([NODE, "--to", "plugin", "--kubeconfig", str(cluster.kubeconfig)]) == 0
    wait_for(lambda: kube.get_or_none(f"/api/v1/namespaces/{WORKLOADS}/pods/throttled") is None or None, "evicted")
    with capsys.disabled():
        print(f"\n{figures}\n{text}")
    # Said within seconds while throttled, and at the waits' own pace once it ended.
    assert first_line <= waits.PROGRESS_SECONDS + SILENCE_BOUND, f"first line {first_line:.1f} s ({figures})\n{text}"
    assert silent <= SILENCE_BOUND, f"silent {silent:.1f} s while throttled ({figures})\n{text}"
    assert silent_after <= SILENCE_BOUND, f"silent {silent_after:.1f} s ({figures})\n{text}"
