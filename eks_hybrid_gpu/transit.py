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

from cluster.client.kubeclient import DAEMONSETS, DEVICE_CLASSES, Kube, KubeApiError, segment
from cluster.client.waits import RETRY_BUDGET_SECONDS, NodeChanges, retrying, wait_for
from cluster.judge.consumers import mechanism_of, other_mechanism
from cluster.judge.node_state import TRANSIT_ANNOTATION, NodeState, read_state
from policy.gpu_allocation.vocab.labels import COHORT_LABEL, OWNER_LABEL
from policy.gpu_allocation.vocab.owners import allocates_through_dra

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


def wait_rolled_out(
    kube: Kube, owner: str, cohort: str, timeout: float, progress: Callable[[str], None], rerun: str
) -> None:
    """Wait until every allocator DaemonSet of `owner` for `cohort` has its pods updated and available everywhere.

    A change of its selector restarts its pods one node at a time; until that has passed every node, a node the
    rollout is on does not serve, so no other node may be taken out of service meanwhile.
    """

    def check() -> tuple[bool, str]:
        found = [
            d
            for d in kube.items(DAEMONSETS)
            if (d["metadata"].get("labels") or {}).get(OWNER_LABEL) == owner
            and (d["metadata"].get("labels") or {}).get(COHORT_LABEL) == cohort
        ]
        left = []
        for daemonset in found:
            status, meta = daemonset.get("status") or {}, daemonset["metadata"]
            desired = int(status.get("desiredNumberScheduled") or 0)
            current = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
            updated, available = int(status.get("updatedNumberScheduled") or 0), int(status.get("numberAvailable") or 0)
            if not current or updated < desired or available < desired:
                left.append(
                    f"DaemonSet {meta.get('namespace')}/{meta['name']}: {updated} updated, {available} "
                    f"available of {desired}"
                )
        if not found:
            left.append(f"no {owner} DaemonSet of cohort {cohort}")
        return not left, "; ".join(left)

    wait_for(
        f"{owner}'s DaemonSet of cohort {cohort} has restarted on every node",
        check,
        timeout,
        progress,
        f"check the {owner} DaemonSet's pods (`kubectl get ds -A -l {OWNER_LABEL}={owner}`), then run `{rerun}` again",
    )


def settled(state: NodeState, owner: str) -> tuple[bool, str]:
    """Only `owner`'s allocators left on a node already labelled for it, the other mechanism's publication gone."""
    others = [p.what for p in state.allocators if p.owner != owner]
    if allocates_through_dra(owner):
        others += [f"{k}={v}" for k, v in state.resources.items()]
    else:
        others += [f"ResourceSlice {s}" for s in state.slices]
    return not others, ", ".join(others)


def unsettled(state: NodeState, owner: str) -> bool:
    """A node labelled for `owner` that still has another allocator, its publication, or a pod holding through it."""
    return bool(other_mechanism(state.consumers, mechanism_of(owner))) or not settled(state, owner)[0]


def move_node(
    kube: Kube,
    node: str,
    *,
    label: tuple[str, str],
    owner: str,
    record: Mapping[str, Any],
    drain: bool,
    timeout: float,
    progress: Callable[[str], None],
    rerun: str,
    ensure: Callable[[], None],
) -> None:
    """Move one node to the cohort label `label` (key, value) of `owner`, in the order that never has two owners.

    Cordon (the move recorded on the node: `record`), drain its GPU consumers, remove the label and wait until the
    old allocator's pod and publication are gone, set the new value and wait until `owner`'s allocator is Ready and
    publishing, then uncordon (only if `record` says this move cordoned it). Repeatable: a node already labelled
    for `owner` is only settled (its other allocator waited out) and waited for. `ensure` runs before each change
    (a Lease renewal check), each eviction of the drain and the old label's removal included. `move-host` moves one
    node so; `migrate` moves a cohort so, one node after the other.
    """
    key, value = label
    state = read_state(kube, node)
    already = state.labels.get(key) == value
    if not already or unsettled(state, owner):
        ensure()
        mark(kube, node, unschedulable=True, transit=record)
        progress(f"cordoned {node}")
        drain_consumers(
            kube, node, drain=drain, timeout=timeout, progress=progress, rerun=rerun, before_eviction=ensure
        )
    if not already:
        if key in read_state(kube, node).labels:
            ensure()  # the drain may have waited long: no relabel on a Lease that went unrenewed
            set_label(kube, node, key, None)
            progress(f"removed label {key} from {node}: no cohort selects it now")
        wait_unpublished(kube, node, timeout, progress, rerun)
        ensure()
        set_label(kube, node, key, value)
        progress(f"labelled {node} {key}={value}")
    elif unsettled(state, owner):
        with NodeChanges(kube, node) as changes:
            wait_for(
                f"only {owner}'s allocator is left on {node}",
                lambda: settled(read_state(kube, node), owner),
                timeout,
                progress,
                f"remove what else allocates there (see `eks-hybrid-gpu inspect`), then run `{rerun}` again",
                changes,
            )
    wait_published(kube, node, owner, timeout, progress, rerun)
    uncordon = bool(record.get("cordonedByUs"))
    ensure()
    mark(kube, node, unschedulable=False if uncordon else None, transit=None)
    progress(f"{'uncordoned' if uncordon else 'left cordoned (it was cordoned before the move)'} {node}")


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
