"""Preflight against a live cluster: the GPU integration guide's `kubectl get nodes | jq -e` checks, as code.

It reads the nodes each cohort selects and refuses to install when none match, when a device-plugin
node is already MPS-capable (the exclusive-GPU path must not take over MPS ownership), when a selected
node is an EKS Auto Mode node. It then refuses a cohort whose nodes something other than the cohort's owner
already publishes (see
`components.publishers`): the guide's "verify that there is no other plugin/Operator publishing the same
physical devices before enabling either path". With a GPU Operator cohort it last refuses every GPU node
outside that cohort that lacks the operand opt-out (`components.operator_boundary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components import operator_boundary
from components.cluster import ClusterTarget
from components.config import ClusterConfig, StackConfig
from components.live import LiveCluster, Source, read_live
from components.publishers import foreign, labels_of, observe
from components.refusals import Problem
from policy.gpu_allocation.vocab.labels import AUTO_MODE, COMPUTE_TYPE_LABEL, MPS_CAPABLE_LABEL

Node = Mapping[str, Any]


def _name(node: Node) -> str:
    return str(node.get("metadata", {}).get("name", "<unnamed>"))


def matches(selector: Mapping[str, str], node: Node) -> bool:
    """Whether an equality selector selects the node."""
    labels = labels_of(node)
    return all(labels.get(key) == value for key, value in selector.items())


def check_nodes(config: StackConfig, nodes: Sequence[Node]) -> list[Problem]:
    """Every reason the live nodes do not fit the declared cohorts."""
    problems: list[Problem] = []
    for i, cohort in enumerate(config.cohorts):
        path = f"cohorts[{i}].nodeSelector"
        selector = cohort.selector(config.cohort_label_key)
        selected = [n for n in nodes if matches(selector, n)]
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
            if cohort.owner == "device-plugin" and labels.get(MPS_CAPABLE_LABEL) == "true":
                problems.append(
                    Problem(
                        path,
                        f"selects node {_name(node)}, labelled {MPS_CAPABLE_LABEL}=true; "
                        "the chart's MPS daemon would start there: investigate who owns MPS on "
                        "that node instead of clearing the label blindly",
                    )
                )
    return problems


def check_publishers(config: StackConfig, live: LiveCluster) -> list[Problem]:
    """Every cohort node that an allocator other than the cohort's owner already publishes."""
    problems: list[Problem] = []
    owners = {c.name: c.owner for c in config.cohorts}
    observed = observe(live.nodes, live.slices, live.pods, live.daemonsets)
    for i, cohort in enumerate(config.cohorts):
        selector = cohort.selector(config.cohort_label_key)
        for node in observed:
            if not matches(selector, {"metadata": {"labels": dict(node.labels)}}):
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


def check(config: StackConfig, live: LiveCluster) -> list[Problem]:
    """The whole preflight: node labels, who already publishes the cohorts' GPUs, the Operator's boundary."""
    return (
        check_nodes(config, live.nodes)
        + check_publishers(config, live)
        + operator_boundary.check(config, live.nodes, live.slices)
    )


def source_of(cluster: ClusterConfig, target: ClusterTarget) -> Source:
    """How to read the target, and what to tell the person when that fails, per cluster source."""
    if cluster.source == "eks":
        return Source(
            None,
            target.kubeconfig_content,
            None,
            f"the kubeconfig generated for EKS cluster {cluster.name} ({cluster.region})",
            f"check the AWS credentials that `aws eks get-token --cluster-name {cluster.name} --region "
            f"{cluster.region}` uses, and that this IAM principal has an EKS access entry with cluster-admin "
            "(or list on nodes, pods, daemonsets and resourceslices)",
        )
    if cluster.source == "kubeconfig":
        return Source(
            target.kubeconfig_path,
            None,
            target.context,
            f"kubeconfig {target.kubeconfig_path} (eks-hybrid-gpu:cluster.kubeconfig)",
            "set eks-hybrid-gpu:cluster.kubeconfig and cluster.context to a kubeconfig that reaches the cluster "
            "as an administrator, and check that the cluster is running",
        )
    return Source(
        target.kubeconfig_path,
        None,
        None,
        f"kubeconfig {target.kubeconfig_path} (the local cluster)",
        "start the local cluster with `eks-hybrid-gpu local up` (or `simulate start`)",
    )


def read_cluster(cluster: ClusterConfig, target: ClusterTarget) -> LiveCluster:
    """Nodes, pods, DaemonSets and ResourceSlices of the target; a LiveReadError when they cannot be read."""
    return read_live(source_of(cluster, target))
