"""Preflight against a live cluster: the GPU integration guide's `kubectl get nodes | jq -e` checks, as code.

It reads the nodes each cohort selects and refuses to install when none match, when a device-plugin node is already
MPS-capable (the exclusive-GPU path must not take over MPS ownership), when a selected node is an EKS Auto Mode node.
It then refuses a cohort whose nodes something other than the cohort's owner already publishes
(`cluster.judge.publishers`): the guide's "verify that there is no other plugin/Operator publishing the same
physical devices before enabling either path"; and a cohort node whose GPUs a pod still holds through another
mechanism than the owner's (`cluster.judge.consumers`): a host moved while busy. It refuses a cohort node whose own
kubelet or container runtime (`status.nodeInfo`) does not meet the owner's floor, or cannot be read
(`cluster.judge.node_facts`), and, where the DRA cohort keeps `nvidia.com/gpu` through its class (KEP-5004), a node
whose kubelet or server has `DRAExtendedResource` off (`policy.gpu_allocation.vocab.kube_releases`). It refuses a
plan that would start a cohort's allocator where another DaemonSet of it still runs (`cluster.judge.replacements`: a
namespace move, a cohort rename). With a GPU Operator cohort it also refuses every GPU node outside that cohort that
lacks the operand opt-out (`cluster.judge.operator_boundary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cluster.findings import Problem
from cluster.judge import operator_boundary
from cluster.judge.consumers import consumers_by_node, mechanism_of, other_mechanism
from cluster.judge.kept_name import minor_of, node_gates
from cluster.judge.live import LiveCluster
from cluster.judge.node_facts import check_node, node_owner
from cluster.judge.owner_change import check_ledger
from cluster.judge.publishers import foreign, labels_of, observe
from cluster.judge.replacements import check_replacements
from cluster.judge.stack_view import StackView
from cluster.records.migration import Migration, namespace_key
from policy.gpu_allocation.vocab import kube_releases
from policy.gpu_allocation.vocab.labels import AUTO_MODE, COMPUTE_TYPE_LABEL, DEVICE_PLUGIN, DRA, MPS_CAPABLE_LABEL
from policy.gpu_allocation.vocab.selectors import selects, selects_node

Node = Mapping[str, Any]


def _name(node: Node) -> str:
    return str(node.get("metadata", {}).get("name", "<unnamed>"))


def check_nodes(config: StackView, nodes: Sequence[Node]) -> list[Problem]:
    """Every reason the live nodes do not fit the declared cohorts."""
    problems: list[Problem] = []
    for i, cohort in enumerate(config.cohorts):
        path = f"cohorts[{i}].nodeSelector"
        selector = cohort.selector(config.cohort_label_key)
        selected = [n for n in nodes if selects_node(selector, n)]
        if not selected:
            problems.append(
                Problem(
                    path,
                    f"selects no node ({selector}); fix the host inventory and node labels "
                    "rather than widening the selector or removing the chart's GPU affinity",
                )
            )
        for node in selected:
            labels = labels_of(node)
            if labels.get(COMPUTE_TYPE_LABEL) == AUTO_MODE:
                problems.append(
                    Problem(
                        path,
                        f"selects node {_name(node)}, an EKS Auto Mode node; Auto Mode "
                        "manages its own GPU device plugin: relabel or exclude that node",
                    )
                )
            if cohort.owner == DEVICE_PLUGIN and labels.get(MPS_CAPABLE_LABEL) == "true":
                problems.append(
                    Problem(
                        path,
                        f"selects node {_name(node)}, labelled {MPS_CAPABLE_LABEL}=true; "
                        "the chart's MPS daemon would start there: investigate who owns MPS on "
                        "that node instead of clearing the label blindly",
                    )
                )
    return problems


def check_publishers(config: StackView, live: LiveCluster) -> list[Problem]:
    """Every cohort node that an allocator other than the cohort's owner already publishes."""
    problems: list[Problem] = []
    owners = {c.name: c.owner for c in config.cohorts}
    observed = observe(live.nodes, live.slices, live.pods, live.daemonsets)
    for i, cohort in enumerate(config.cohorts):
        selector = cohort.selector(config.cohort_label_key)
        for node in observed:
            if not selects(selector, node.labels):
                continue
            others = foreign(node, cohort.name, cohort.owner, owners)
            if not others:
                continue
            fixes = "; ".join(dict.fromkeys(p.fix() for p in others))
            problems.append(
                Problem(
                    f"cohorts[{i}].nodeSelector",
                    f"selects node {node.name}, whose GPUs are already published by "
                    + "; ".join(p.describe() for p in others)
                    + f"; this cohort's owner is {cohort.owner}, and two allocators on one GPU over-admit it: "
                    f"{fixes}; or take the node out of cohort {cohort.name} (its {config.cohort_label_key} label); "
                    "see docs/second-publishers.md",
                )
            )
    return problems


def check_consumers(config: StackView, live: LiveCluster) -> list[Problem]:
    """Every cohort node whose GPUs a pod holds through another mechanism than the cohort's owner uses.

    Such a pod kept the GPU its old allocator gave it (the kubelet does not evict it), while this cohort's owner
    publishes the same GPU as free: the double booking of a host moved between cohorts while busy. Whoever
    installed either allocator, and whether or not the old one is still there, the pod is what counts.
    """
    problems: list[Problem] = []
    consumers = consumers_by_node(live.pods, live.claims)
    operator_mode = config.operator_mode
    for i, cohort in enumerate(config.cohorts):
        selector = cohort.selector(config.cohort_label_key)
        mechanism = mechanism_of(cohort.owner, operator_mode)
        for node in live.nodes:
            if not selects_node(selector, node):
                continue
            others = other_mechanism(consumers.get(_name(node), []), mechanism)
            if not others:
                continue
            problems.append(
                Problem(
                    f"cohorts[{i}].nodeSelector",
                    f"selects node {_name(node)}, whose GPUs are in use through another mechanism than this "
                    f"cohort's owner {cohort.owner} ({mechanism}): "
                    + "; ".join(c.describe() for c in others)
                    + f"; {cohort.owner} would publish those GPUs as free and book them twice: let those pods finish "
                    "or evict them, then move the host in order with "
                    f"`eks-hybrid-gpu move-host {_name(node)} --to {cohort.name} --drain` "
                    "(cordon, drain, relabel, wait for the old allocator to leave, then the new one); "
                    "see docs/moving-hosts.md",
                )
            )
    return problems


def check_node_facts(config: StackView, nodes: Sequence[Node]) -> list[Problem]:
    """Every cohort node whose kubelet or container runtime falls short of its owner's floor, or cannot be read."""
    problems: list[Problem] = []
    for i, cohort in enumerate(config.cohorts):
        owner = node_owner(cohort.owner, config.operator.mode)
        selector = cohort.selector(config.cohort_label_key)
        for node in (n for n in nodes if selects_node(selector, n)):
            problems += [
                Problem(
                    f"cohorts[{i}].nodeSelector",
                    f"selects node {_name(node)}, whose {issue.describe()}; or take the node out of cohort "
                    f"{cohort.name} (its {config.cohort_label_key} label)",
                )
                for issue in check_node(node, owner)
                if issue.refused
            ]
    return problems


def check_kept_name(config: StackView, live: LiveCluster) -> list[Problem]:
    """Where the DRA cohort keeps `nvidia.com/gpu` (KEP-5004), the server and every cohort kubelet have the gate.

    The gate must be on in the control plane and in the kubelet that prepares the claim, so each node is judged by
    the older of the server (`/version`, else the declared version) and its own kubelet (`cluster.judge.kept_name`).
    """
    name = config.dra.extended_resource_name
    if name is None:
        return []
    control = minor_of(live.server_version) or minor_of(config.cluster.kubernetes_version)
    problems: list[Problem] = []
    for i, cohort in enumerate(config.cohorts):
        if cohort.owner != DRA:
            continue
        selector = cohort.selector(config.cohort_label_key)
        selected = [n for n in live.nodes if selects_node(selector, n)]
        for gate in node_gates(control, selected, config.cluster.feature_gates):
            if gate.release is None:
                problems.append(
                    Problem(
                        "dra.extendedResourceName",
                        f"keeps {name} through DRA on cohort {cohort.name}, but the preflight cannot tell whether "
                        f"{kube_releases.DRA_EXTENDED_RESOURCE} is on at node {gate.node} (server "
                        f"{live.server_version or 'version unknown'}, kubelet {gate.kubelet or 'unknown'}), and "
                        "it does not pass what it cannot read: check the node's kubelet (`kubelet --version`)",
                    )
                )
            elif not gate.keeps:
                problems.append(
                    Problem(
                        f"cohorts[{i}].nodeSelector",
                        f"selects node {gate.node}, whose kubelet {gate.kubelet} (server "
                        f"{live.server_version or config.cluster.kubernetes_version}) has "
                        f"{kube_releases.DRA_EXTENDED_RESOURCE} off (Kubernetes {gate.release.name}): pods asking "
                        f"{name} would stay Pending there. Upgrade the node's kubelet to 1.36+ (nodeadm upgrade), or "
                        f"take the node out of cohort {cohort.name}, or remove dra.extendedResourceName",
                    )
                )
    return problems


def check_runtime_class(config: StackView, live: LiveCluster) -> list[Problem]:
    """Where the program reuses an existing RuntimeClass (hostsHaveNvidiaHandler false), it exists in the cluster.

    Otherwise the update fails only when the provider reads the class, after other objects were created.
    """
    runtime = config.runtime_class
    if runtime.hosts_have_nvidia_handler or not config.needs_runtime_class:
        return []
    if live.runtime_classes_error is not None:
        return [
            Problem(
                "runtimeClass.name",
                f"RuntimeClass {runtime.name} is to be reused (runtimeClass.hostsHaveNvidiaHandler is false) but "
                f"the preflight cannot list RuntimeClasses: {live.runtime_classes_error}; grant list on "
                "runtimeclasses (node.k8s.io), or set runtimeClass.hostsHaveNvidiaHandler to true once "
                "`eks-hybrid-gpu hostcheck` shows every GPU host has the nvidia handler",
            )
        ]
    if live.runtime_classes is None:
        return []
    found = next((r for r in live.runtime_classes if r.get("metadata", {}).get("name") == runtime.name), None)
    if found is not None:
        return []
    handlers = ", ".join(
        sorted(f"{r.get('metadata', {}).get('name')} (handler {r.get('handler')})" for r in live.runtime_classes)
    )
    return [
        Problem(
            "runtimeClass.name",
            f"RuntimeClass {runtime.name} does not exist in the cluster (it has: {handlers or 'none'}), and "
            "runtimeClass.hostsHaveNvidiaHandler is false, which means: reuse an existing RuntimeClass of that "
            "name rather than create one. Create it with the handler the hosts' containerd has (handler nvidia, "
            "which `eks-hybrid-gpu hostcheck` verifies), or set runtimeClass.hostsHaveNvidiaHandler to true once "
            "hostcheck shows every GPU host has the nvidia handler, so the program creates it",
        )
    ]


def check_owner_changes(
    config: StackView, live: LiveCluster, stack: str = "STACK", migration: Migration | None = None
) -> list[Problem]:
    """Every cohort whose owner the stack changes in one step from the cluster's ledger.

    The record of a migration under way is `cluster.records.migration`'s.
    """
    if live.records is None:
        return []
    consumers = consumers_by_node(live.pods, live.claims)
    records = live.records
    return check_ledger(config, records.ledger, migration, live.nodes, consumers, stack, records.ledger_ref)


def check(
    config: StackView, live: LiveCluster, stack: str = "STACK", migration: Migration | None = None
) -> list[Problem]:
    """The whole preflight, every check in turn; each returns the problems it found (docstrings say which)."""
    changes = check_owner_changes(config, live, stack, migration)
    moved = [c.name for c in config.cohorts if any(p.path == f"namespaces.{namespace_key(c.owner)}" for p in changes)]
    return (
        check_nodes(config, live.nodes)
        + check_publishers(config, live)
        + check_consumers(config, live)
        + changes
        + check_replacements(config, live, stack, skip=moved)
        + check_node_facts(config, live.nodes)
        + check_kept_name(config, live)
        + check_runtime_class(config, live)
        + operator_boundary.check(config, live.nodes, live.slices)
    )
