"""The steps of a move, as `move-host` and `migrate` run and print them: cordon, drain, relabel, wait, uncordon.

`move-host` (one node between cohorts) and `migrate` (a cohort between owners) are built from these steps. Each
one reads the cluster, changes at most one thing, and can be repeated: re-running after an interruption finds the
node where it was left, and each wait's refusal names the command to run again. What a node's state is comes from
`cluster.judge.node_state`; the retries and waits (watches, backoff, deadline) from `cluster.client.waits`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from cluster.client.kubeclient import DEVICE_CLASSES, Kube, KubeApiError, segment
from cluster.client.waits import RETRY_BUDGET_SECONDS, NodeChanges, retrying, wait_for
from cluster.judge.node_state import TRANSIT_ANNOTATION, NodeState, read_state

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
    kube: Kube,
    node: str,
    *,
    drain: bool,
    timeout: float,
    progress: Callable[[str], None],
    rerun: str,
    before_eviction: Callable[[], None] | None = None,
) -> None:
    """Wait until no pod holds a GPU on the node; with `drain`, evict them (PodDisruptionBudgets respected).

    `before_eviction` runs before each eviction is asked (the run's `Leases.ensure`): an eviction is a change, and a
    drain held for minutes by a budget or a throttled API server must not evict on a Lease that went unrenewed.
    """
    asked: set[str] = set()

    def check() -> tuple[bool, str]:
        held = read_state(kube, node).consumers
        if not held:
            return True, ""
        if drain:
            for consumer in held:
                if consumer.pod is None or consumer.pod in asked:
                    continue
                if before_eviction is not None:
                    before_eviction()
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


def wait_mapped(
    kube: Kube, name: str, device_class: str, timeout: float, progress: Callable[[str], None], rerun: str
) -> None:
    """Wait until DeviceClass `device_class` maps the extended resource `name` (KEP-5004), before any uncordon.

    The scheduler serves a plain `name` request through DRA only on a class that maps it; a node uncordoned before
    the class exists would turn every pod asking `name` away from it.
    """
    path = f"{DEVICE_CLASSES}/{segment(device_class)}"

    def check() -> tuple[bool, str]:
        found = kube.get_or_none(path)
        mapped = ((found or {}).get("spec") or {}).get("extendedResourceName")
        if mapped == name:
            return True, ""
        return False, f"DeviceClass {device_class} {'maps ' + str(mapped) if found else 'does not exist'}"

    wait_for(
        f"DeviceClass {device_class} maps {name}",
        check,
        timeout,
        progress,
        f"check that the install phase's `pulumi up` kept dra.extendedResourceName, then run `{rerun}` again",
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
