"""Changing who allocates a node's GPUs in order: cordon, drain the GPU consumers, wait on what the cluster reports.

`move-host` (one node between cohorts) and `migrate` (a cohort between owners) are built from these steps. Each
one reads the cluster, changes at most one thing, and can be repeated: re-running after an interruption finds the
node where it was left. Waits poll what the API server reports (pods, allocatable, ResourceSlices) with progress
lines and a deadline, never a fixed sleep standing in for a condition.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from cluster.client.kube_http import WATCH_SECONDS
from cluster.client.kubeclient import (
    CLAIMS,
    NODES,
    PODS,
    SLICES,
    Kube,
    KubeAccessError,
    KubeApiError,
    KubeUnreachable,
    segment,
)
from cluster.judge.consumers import Consumer, consumers_by_node
from cluster.judge.publishers import Publisher, is_gpu_resource, pod_publisher, pod_ready, positive_count
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import LABEL_PREFIX
from policy.gpu_allocation.vocab.owners import allocates_through_dra

POLL_SECONDS = 0.5
"""The shortest pause between two checks of one wait."""
PROGRESS_SECONDS = 8.0
"""A wait prints what it still waits for at least this often, and re-reads the node at least this often."""
T = TypeVar("T")
TRANSIT_ANNOTATION = f"{LABEL_PREFIX}/in-transit"
"""On a Node being moved: JSON {"to": cohort, "key": label key, "value": label value, "cordonedByUs": bool}, so a
re-run continues the same move and uncordons only what it cordoned; `inspect` shows it."""

Obj = Mapping[str, Any]


class TransitError(Exception):
    """A step could not be done or did not finish in time; the message says what is left and what to run."""


@dataclass(frozen=True)
class NodeState:
    """One node as the cluster reports it now: its allocators, what they publish, and who holds its GPUs."""

    node: dict[str, Any]
    allocators: tuple[Publisher, ...]
    """Allocator pods bound to the node (any origin, recognised by what they run)."""
    ready_allocators: tuple[str, ...]
    """`pod NS/NAME` of those allocator pods that are Ready."""
    resources: Mapping[str, str]
    """The node's `nvidia.com/*` allocatable above 0: what a device plugin publishes now."""
    slices: tuple[str, ...]
    """`gpu.nvidia.com` ResourceSlices for the node."""
    consumers: tuple[Consumer, ...]

    @property
    def name(self) -> str:
        """The node's name."""
        return str(self.node["metadata"]["name"])

    @property
    def labels(self) -> Mapping[str, str]:
        """The node's labels."""
        return self.node["metadata"].get("labels") or {}

    @property
    def cordoned(self) -> bool:
        """spec.unschedulable."""
        return bool((self.node.get("spec") or {}).get("unschedulable"))

    @property
    def transit(self) -> dict[str, Any] | None:
        """The move recorded on the node, if one is under way."""
        text = (self.node["metadata"].get("annotations") or {}).get(TRANSIT_ANNOTATION)
        try:
            found = json.loads(text) if text else None
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    def publishing(self, owner: str) -> bool:
        """Whether an allocator of `owner`'s mechanism publishes here now (resources for a plugin, slices for DRA)."""
        return bool(self.slices) if allocates_through_dra(owner) else bool(self.resources)

    def describe(self) -> str:
        """One line: allocators, publication, consumers."""
        allocators = ", ".join(f"{p.what.removeprefix('pod ')} ({p.owner})" for p in self.allocators) or "none"
        published = [f"{k}={v}" for k, v in sorted(self.resources.items())] + list(self.slices)
        holders = "; ".join(c.describe() for c in self.consumers) or "none"
        return f"allocator pods: {allocators}; publishes: {', '.join(published) or 'nothing'}; GPUs in use: {holders}"


def _allocator_daemonsets(kube: Kube, pods: Sequence[Obj]) -> dict[str, dict[str, Any]]:
    """The DaemonSets (by uid) that control the allocator pods among `pods`, one GET each.

    `pod_publisher` reads a pod's DaemonSet only to name its controller and tell an Operator operand, and only for a
    pod it already recognised as an allocator, so these few stand in for a list of every DaemonSet in the cluster.
    """
    found: dict[str, dict[str, Any]] = {}
    for pod in pods:
        if pod_publisher(pod, {}) is None:
            continue
        meta = pod.get("metadata") or {}
        ref = next(
            (
                r
                for r in meta.get("ownerReferences") or []
                if isinstance(r, Mapping) and r.get("kind") == "DaemonSet" and r.get("controller")
            ),
            None,
        )
        if ref is None or not ref.get("name"):
            continue
        namespace, name = segment(str(meta.get("namespace"))), segment(str(ref["name"]))
        daemonset = kube.get_or_none(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
        if daemonset is not None and str((daemonset.get("metadata") or {}).get("uid")) == str(ref.get("uid")):
            found[str(ref.get("uid"))] = daemonset
    return found


def read_state(kube: Kube, node_name: str) -> NodeState:
    """Everything about one node that a move waits on, each read narrowed to the node where the API allows it.

    Pods and ResourceSlices are listed by field selector `spec.nodeName`, DaemonSets fetched for the node's allocator
    pods only. ResourceClaims are listed cluster-wide: a claim can hold a node's devices after its pods are gone, and
    the API selects claims by name and namespace only.
    """
    node = kube.get(f"/api/v1/nodes/{segment(node_name)}")
    on_node = f"spec.nodeName={node_name}"
    pods = kube.items(PODS, fieldSelector=on_node)
    daemonsets = _allocator_daemonsets(kube, pods)
    allocators, ready = [], []
    for pod in pods:
        publisher = pod_publisher(pod, daemonsets)
        if publisher is not None:
            allocators.append(publisher)
            if pod_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                ready.append(publisher.what)
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    resources = {k: str(v) for k, v in allocatable.items() if is_gpu_resource(k) and positive_count(v)}
    slices = tuple(
        sorted(
            s["metadata"]["name"]
            for s in kube.items(SLICES, fieldSelector=on_node)
            if (s.get("spec") or {}).get("nodeName") == node_name and s["spec"].get("driver") == DRIVER_DOMAIN
        )
    )
    claims = kube.items(CLAIMS)
    held = consumers_by_node(pods, claims).get(node_name, [])
    return NodeState(node, tuple(allocators), tuple(ready), resources, slices, tuple(held))


DEFAULT_TIMEOUT_SECONDS: Final = 600.0
"""How long `move-host` and `migrate` wait for each thing the cluster must report, unless --timeout says."""


def rerun_command(command: str, *positional: str, options: Sequence[tuple[str, object]] = ()) -> str:
    """`eks-hybrid-gpu COMMAND ...` again, to continue after an interruption: each step finds where it was left.

    `options` are (flag, value) in order: True gives the bare flag, another set value the flag and the value;
    False, None and empty values are left out.
    """
    parts = [f"eks-hybrid-gpu {command}", *positional]
    for flag, value in options:
        if value is True:
            parts.append(flag)
        elif value:
            parts += [flag, str(value)]
    return " ".join(parts)


TRANSIENT_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
RETRY_FIRST_SECONDS: Final = 0.5
RETRY_MAX_SECONDS: Final = 8.0
RETRY_BUDGET_SECONDS: Final = 120.0
"""How long one change (a patch of the node) keeps retrying an API server that does not answer."""


def transient(error: Exception) -> bool:
    """An answer that waiting may change: no answer at all, 429 (throttled) or a 5xx."""
    return isinstance(error, KubeUnreachable) or (
        isinstance(error, KubeApiError) and error.status in TRANSIENT_STATUSES
    )


def retrying(call: Callable[[], T], what: str, progress: Callable[[str], None], budget: float) -> T:
    """`call`, retried with backoff while the API server's answer is transient, for at most `budget` seconds."""
    started = time.monotonic()
    delay = RETRY_FIRST_SECONDS
    while True:
        try:
            return call()
        except (KubeAccessError, KubeApiError) as error:
            left = budget - (time.monotonic() - started)
            if not transient(error) or left <= 0:
                raise
            progress(f"  {what}: the API server did not answer ({_short(error)}); retrying in {delay:.1f} s")
            time.sleep(min(delay, left))
            delay = min(delay * 2, RETRY_MAX_SECONDS)


def _short(error: Exception) -> str:
    text = str(error)
    return text.split("): ", 1)[-1].split("; ", 1)[0][:160]


class NodeChanges:
    """Wakes a wait when the node, its pods, its ResourceSlices or any ResourceClaim change.

    One watch per kind (the node and its pods and slices by field selector; claims cluster-wide, as `read_state`
    reads them), each in a daemon thread that reconnects with backoff from the last resourceVersion it saw. A wait
    then re-reads the node when the API server reports a change, and at its progress tick, instead of listing
    twice a second.
    """

    def __init__(self, kube: Kube, node: str) -> None:
        """Start watching; `stop` (or leaving the `with` block) ends it."""
        self.kube = kube
        self.changed = threading.Event()
        self.stopped = threading.Event()
        on_node = f"spec.nodeName={node}"
        watches: tuple[tuple[str, dict[str, str]], ...] = (
            (NODES, {"fieldSelector": f"metadata.name={node}"}),
            (PODS, {"fieldSelector": on_node}),
            (SLICES, {"fieldSelector": on_node}),
            (CLAIMS, {}),
        )
        for path, query in watches:
            threading.Thread(target=self._watch, args=(path, query), name=f"watch {path}", daemon=True).start()

    def _now_version(self, path: str, query: Mapping[str, str]) -> str | None:
        """The collection's resourceVersion now, from a one-item list: a watch from it sends only what changes.

        A watch without one starts with an ADDED event for every object it selects, which for the cluster-wide
        claims is the whole collection again at every wait.
        """
        try:
            found = (self.kube.get(path, limit=1, **query).get("metadata") or {}).get("resourceVersion")
        except (KubeAccessError, KubeApiError):
            return None
        return str(found) if found else None

    def _watch(self, path: str, query: Mapping[str, str]) -> None:
        version: str | None = None
        delay = RETRY_FIRST_SECONDS
        while not self.stopped.is_set():
            if not version:
                version = self._now_version(path, query)
                if version:
                    # What changed before this version streams no event: one re-read of the node covers it (at
                    # the start, the time since the wait's first check; after a 410, what the server forgot).
                    self.changed.set()
            params: dict[str, str | int | bool] = {
                **query,
                "timeoutSeconds": WATCH_SECONDS,
                "allowWatchBookmarks": True,
            }
            if version:
                params["resourceVersion"] = version
            opened = time.monotonic()
            try:
                for event in self.kube.watch(path, **params):
                    if self.stopped.is_set():
                        return
                    if event.get("type") == "ERROR":  # 410 Gone (too old a version) or a refusal: start afresh
                        version = None
                        raise KubeApiError(int(event.get("status") or 500), str(event.get("message")))
                    found = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion")
                    version = str(found) if found else version
                    delay = RETRY_FIRST_SECONDS
                    if event.get("type") != "BOOKMARK":
                        self.changed.set()
            except (KubeAccessError, KubeApiError):
                self.stopped.wait(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)
                continue
            if time.monotonic() - opened < 1.0:  # ended at once (a proxy that does not stream): do not spin
                self.stopped.wait(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)

    def wait(self, seconds: float) -> None:
        """Until something changed or `seconds` passed."""
        self.changed.wait(max(seconds, 0.0))
        self.changed.clear()

    def stop(self) -> None:
        """End the watches (each thread leaves at its next event or when the server ends the watch)."""
        self.stopped.set()

    def __enter__(self) -> NodeChanges:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def wait_for(
    what: str,
    check: Callable[[], tuple[bool, str]],
    timeout: float,
    progress: Callable[[str], None],
    on_timeout: str,
    changes: NodeChanges | None = None,
) -> None:
    """Check (done, what is left) until done; TransitError at the deadline, whatever the API server does.

    With `changes`, a check runs when the cluster reports a change and at each progress tick; without, every
    POLL_SECONDS. A check the API server cannot answer (no answer, 429, 5xx) is retried with backoff and says so;
    the deadline still holds. A progress line comes at least every PROGRESS_SECONDS.
    """
    started = time.monotonic()
    last = started
    delay = RETRY_FIRST_SECONDS
    progress(f"waiting until {what} (timeout {timeout:.0f} s)")
    while True:
        retry_in = None  # seconds until the next try, when the API server did not answer this one
        try:
            done, left = check()
            delay = RETRY_FIRST_SECONDS
        except (KubeAccessError, KubeApiError) as error:
            if not transient(error):
                raise
            done, left = False, f"no answer from the API server ({_short(error)})"
            progress(f"  {time.monotonic() - started:.0f} s: {left}; retrying in {delay:.1f} s")
            last = time.monotonic()
            retry_in, delay = delay, min(delay * 2, RETRY_MAX_SECONDS)
        now = time.monotonic()
        if done:
            progress(f"  done after {now - started:.1f} s: {what}")
            return
        if now - started > timeout:
            msg = f"{what}: not after {timeout:.0f} s; still {left}; {on_timeout}"
            raise TransitError(msg)
        if now - last >= PROGRESS_SECONDS:
            progress(f"  {now - started:.0f} s: still {left}")
            last = now
        remaining = timeout - (now - started)
        if retry_in is not None:
            time.sleep(max(min(retry_in, remaining), 0.0))
        elif changes is not None:
            time.sleep(POLL_SECONDS)  # at most two reads a second, however busy the cluster is
            changes.wait(min(PROGRESS_SECONDS - (time.monotonic() - last), remaining))
        else:
            time.sleep(max(min(POLL_SECONDS, remaining), 0.0))


def mark(kube: Kube, node: str, *, unschedulable: bool | None, transit: Mapping[str, Any] | None) -> None:
    """Cordon/uncordon and record/clear the move on the node, in one patch (None leaves that part alone)."""
    body: dict[str, Any] = {
        "metadata": {
            "annotations": {TRANSIT_ANNOTATION: json.dumps(dict(transit), sort_keys=True) if transit else None}
        }
    }
    if unschedulable is not None:
        body["spec"] = {"unschedulable": True if unschedulable else None}
    path = f"/api/v1/nodes/{segment(node)}"
    retrying(lambda: kube.merge_patch(path, body), f"patching node {node}", _say, RETRY_BUDGET_SECONDS)


def set_label(kube: Kube, node: str, key: str, value: str | None) -> None:
    """Set (or with None remove) one label of the node (a merge patch: repeating it is harmless)."""
    path, body = f"/api/v1/nodes/{segment(node)}", {"metadata": {"labels": {key: value}}}
    retrying(lambda: kube.merge_patch(path, body), f"labelling node {node}", _say, RETRY_BUDGET_SECONDS)


def _say(line: str) -> None:
    print(line, flush=True)


def evict(kube: Kube, pod: str) -> tuple[bool, str]:
    """Ask the Eviction API to evict `NS/NAME`; (False, why) when a PodDisruptionBudget does not allow it yet."""
    namespace, name = pod.split("/", 1)
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    try:
        kube.create(f"/api/v1/namespaces/{segment(namespace)}/pods/{segment(name)}/eviction", body)
    except KubeApiError as error:
        if error.status == 404:
            return True, "already gone"
        if error.status == 429:
            return False, error.message
        raise
    return True, "eviction accepted"


def drain_consumers(
    kube: Kube, node: str, *, drain: bool, timeout: float, progress: Callable[[str], None], rerun: str
) -> None:
    """Wait until no pod holds a GPU on the node; with `drain`, evict them (PodDisruptionBudgets respected)."""
    asked: set[str] = set()

    def check() -> tuple[bool, str]:
        held = read_state(kube, node).consumers
        if not held:
            return True, ""
        if drain:
            for consumer in held:
                if consumer.pod is None or consumer.pod in asked:
                    continue
                accepted, why = evict(kube, consumer.pod)
                if accepted:
                    asked.add(consumer.pod)
                    progress(f"  evicting pod {consumer.pod} ({consumer.holds})")
                else:
                    progress(f"  pod {consumer.pod} not evicted yet: {why}")
        return False, "; ".join(c.describe() for c in held)

    hint = "or evict them with --drain" if not drain else "check their PodDisruptionBudgets"
    with NodeChanges(kube, node) as changes:
        wait_for(
            f"no pod holds a GPU on {node}",
            check,
            timeout,
            progress,
            f"let those pods finish ({hint}), then run `{rerun}` again",
            changes,
        )


def wait_unpublished(kube: Kube, node: str, timeout: float, progress: Callable[[str], None], rerun: str) -> None:
    """Wait until no allocator pod is on the node and nothing publishes its GPUs (allocatable 0 or absent, no slice)."""

    def check() -> tuple[bool, str]:
        state = read_state(kube, node)
        left = [p.what for p in state.allocators] + [f"{k}={v}" for k, v in state.resources.items()]
        left += [f"ResourceSlice {s}" for s in state.slices]
        return not left, ", ".join(left)

    with NodeChanges(kube, node) as changes:
        wait_for(
            f"the old allocator has left {node} and its publication ended",
            check,
            timeout,
            progress,
            f"check that no other cohort or installation still selects the node, then run `{rerun}` again",
            changes,
        )


def wait_published(
    kube: Kube, node: str, owner: str, timeout: float, progress: Callable[[str], None], rerun: str
) -> None:
    """Wait until an allocator pod of `owner` is Ready on the node and publishes its GPUs."""

    def check() -> tuple[bool, str]:
        state = read_state(kube, node)
        ours = [p for p in state.allocators if p.owner == owner and p.what in state.ready_allocators]
        if ours and state.publishing(owner):
            return True, ""
        return False, f"{owner} allocator ready: {'yes' if ours else 'no'}; {state.describe()}"

    with NodeChanges(kube, node) as changes:
        wait_for(
            f"{owner}'s allocator is Ready on {node} and publishes its GPUs",
            check,
            timeout,
            progress,
            f"check the {owner} DaemonSet's pods on {node} (`kubectl get pods -A -o wide --field-selector "
            f"spec.nodeName={node}`), then run `{rerun}` again",
            changes,
        )


def state_rows(states: Sequence[NodeState], key: str) -> list[tuple[str, ...]]:
    """Table rows for before/after: node, cohort label, cordoned, allocators, publication, GPUs in use."""
    rows: list[tuple[str, ...]] = [("node", key, "cordoned", "allocator pods", "publishes", "GPUs in use")]
    for s in states:
        published = [f"{k}={v}" for k, v in sorted(s.resources.items())] + [f"slice {x}" for x in s.slices]
        rows.append(
            (
                s.name,
                s.labels.get(key, "-"),
                "yes" if s.cordoned else "no",
                ", ".join(f"{p.what.removeprefix('pod ')} ({p.owner})" for p in s.allocators) or "none",
                ", ".join(published) or "nothing",
                str(len(s.consumers)) if s.consumers else "none",
            )
        )
    return rows
