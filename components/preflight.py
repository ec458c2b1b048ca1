"""Preflight against a live cluster: the GPU integration guide's `kubectl get nodes | jq -e` checks, as code.

It reads the nodes each cohort selects and refuses to install when none match, when a device-plugin
node is already MPS-capable (the exclusive-GPU path must not take over MPS ownership), when a selected
node is an EKS Auto Mode node, or when a standalone cohort's node would also receive Operator operands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.config import StackConfig
from components.validation import Problem
from policy.gpu_allocation.vocab.labels import AUTO_MODE, COMPUTE_TYPE_LABEL, MPS_CAPABLE_LABEL, OPERANDS_OPT_OUT_LABEL

Node = Mapping[str, Any]


def _labels(node: Node) -> Mapping[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def _name(node: Node) -> str:
    return str(node.get("metadata", {}).get("name", "<unnamed>"))


def matches(selector: Mapping[str, str], node: Node) -> bool:
    """Whether an equality selector selects the node."""
    labels = _labels(node)
    return all(labels.get(key) == value for key, value in selector.items())


def check_nodes(config: StackConfig, nodes: Sequence[Node]) -> list[Problem]:
    """Every reason the live nodes do not fit the declared cohorts."""
    problems: list[Problem] = []
    has_operator = bool(config.cohorts_of("gpu-operator"))
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
            labels = _labels(node)
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
            if has_operator and cohort.owner != "gpu-operator" and labels.get(OPERANDS_OPT_OUT_LABEL) != "false":
                problems.append(
                    Problem(
                        path,
                        f"selects node {_name(node)}, which lacks "
                        f"{OPERANDS_OPT_OUT_LABEL}=false; the GPU Operator would deploy its "
                        "operands there too: label the node to opt it out",
                    )
                )
    return problems


def read_nodes(kubeconfig_path: str | None, kubeconfig_content: str | None, context: str | None) -> list[Node]:
    """List the cluster's nodes as plain dicts (the preflight needs labels only)."""
    import json
    import tempfile

    from kubernetes import client, config

    if kubeconfig_content is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            handle.write(kubeconfig_content)
            kubeconfig_path = handle.name
    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig_path, context=context))  # type: ignore[no-untyped-call]
    response: Any = api.list_node(_preload_content=False)
    items: list[Node] = json.loads(response.data)["items"]
    return items
