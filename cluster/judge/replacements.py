"""Allocators a plan would start beside another allocator of the same kind: the replacements Pulumi gets wrong.

A change of `namespaces.draDriver` or `namespaces.devicePlugin`, a cohort rename (its release is named after it)
or anything else that gives a cohort's allocator another DaemonSet is, to Pulumi, a create and a delete, and it
creates first. For the length of that update every node of the cohort runs two allocators of one kind. This
check reads what runs: on each node a cohort selects, an allocator pod this program stamped for the same owner
kind but running in another namespace or for another cohort name is the DaemonSet the plan would replace.
Pure functions over the live lists; the preflight does the reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.findings import Problem
from cluster.judge.live import LiveCluster
from cluster.judge.publishers import NodePublishers, Publisher, observe
from cluster.judge.stack_view import StackView
from policy.gpu_allocation.vocab.selectors import selects

DOC = "docs/migrating-owners.md"


def _namespace_of(publisher: Publisher) -> str:
    """The namespace of `pod NAMESPACE/NAME`."""
    return publisher.what.removeprefix("pod ").split("/", 1)[0]


def _replaced(node: NodePublishers, owner: str, cohort: str, namespace: str) -> list[Publisher]:
    """Allocator pods of this owner kind, stamped by this program, that are not the DaemonSet the plan runs."""
    return [
        p
        for p in node.publishers
        if p.via == "pod"
        and p.owner == owner
        and p.stamp is not None
        and p.stamp[0] == owner
        and (p.stamp[1] != cohort or _namespace_of(p) != namespace)
    ]


def check_replacements(config: StackView, live: LiveCluster, stack: str, skip: Sequence[str] = ()) -> list[Problem]:
    """Every cohort whose plan starts its allocator on nodes where this program's other DaemonSet of it still runs.

    `skip`: cohorts already refused for the same change (a namespace move the ledger shows), so one edit gets one
    message. Another cohort's pod of another owner kind is the publishers check's business.
    """
    problems: list[Problem] = []
    cohorts = {c.name: c.owner for c in config.cohorts}
    observed = observe(live.nodes, live.slices, live.pods, live.daemonsets)
    for i, cohort in enumerate(config.cohorts):
        if cohort.name in skip:
            continue
        selector = cohort.selector(config.cohort_label_key)
        namespace = config.namespaces.of(cohort.owner)
        hits: dict[str, list[Publisher]] = {}
        for node in observed:
            if selects(selector, node.labels):
                found = _replaced(node, cohort.owner, cohort.name, namespace)
                if found:
                    hits[node.name] = found
        if not hits:
            continue
        olds = sorted({p.stamp[1] for ps in hits.values() for p in ps if p.stamp is not None})
        running = "; ".join(f"{n}: " + ", ".join(p.describe() for p in ps) for n, ps in sorted(hits.items()))
        declared_elsewhere = [c for c in olds if c != cohort.name and cohorts.get(c) == cohort.owner]
        if declared_elsewhere:
            fix = (
                f"those hosts are moving from cohort {', '.join(declared_elsewhere)}: move each in order with "
                f"`eks-hybrid-gpu move-host NODE --to {cohort.name} --drain` (docs/moving-hosts.md)"
            )
        else:
            fix = (
                f"change it in order with `eks-hybrid-gpu migrate --stack {stack} --cohort {cohort.name} --to "
                f"{cohort.owner}`, which removes the old DaemonSet, waits until its publication has ended, then "
                f"installs this one; see {DOC}"
            )
        problems.append(
            Problem(
                f"cohorts[{i}]",
                f"would start {cohort.owner}'s allocator for cohort {cohort.name} in namespace {namespace} on nodes "
                f"{', '.join(sorted(hits))}, where another DaemonSet of it runs ({running}); Pulumi creates the new "
                f"DaemonSet before it deletes the old one, so both would run on those GPUs: {fix}",
            )
        )
    return problems
