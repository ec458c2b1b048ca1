"""The stack's Kubernetes target: facts about the cluster and the provider that talks to it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.config import ClusterConfig
from components.validation import ClusterFacts

LOCAL_KUBECONFIG_ENV = "EKS_HYBRID_GPU_KUBECONFIG"
RENDER_DIR_ENV = "EKS_HYBRID_GPU_RENDER_DIR"
"""Render mode (`eks-hybrid-gpu review`): the folder the provider writes every object into as YAML."""


def render_dir() -> str | None:
    """The render folder when the program runs in render mode, else None.

    Render mode exists for `eks-hybrid-gpu review` only. Nothing reaches a cluster: the provider writes each
    object into this folder instead of applying it, the EKS describe is skipped (the declared facts stand in),
    and the GPU Operator renders through Chart v4 (a Helm Release cannot render). Never set it for `pulumi up`.
    """
    return os.environ.get(RENDER_DIR_ENV) or None


def local_state_dir() -> Path:
    """Where `eks-hybrid-gpu local up` keeps the loopback cluster (overridable for tests)."""
    root = os.environ.get("EKS_HYBRID_GPU_CACHE") or str(Path.home() / ".cache" / "eks-hybrid-gpu")
    return Path(root) / "local-cluster"


def local_kubeconfig() -> Path:
    """The kubeconfig of the local API server."""
    override = os.environ.get(LOCAL_KUBECONFIG_ENV)
    return Path(override) if override else local_state_dir() / "kubeconfig"


@dataclass(frozen=True)
class ClusterTarget:
    """How to reach the cluster, for the provider and for the preflight's reads."""

    facts: ClusterFacts
    kubeconfig_path: str | None
    """A kubeconfig file (local and kubeconfig sources)."""
    kubeconfig_content: str | None
    """A generated kubeconfig with exec auth (eks source)."""
    context: str | None


def eks_kubeconfig(name: str, region: str, endpoint: str, ca_data: str) -> str:
    """A kubeconfig that authenticates through `aws eks get-token`, so no token is stored in state."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "users": [
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": ["eks", "get-token", "--cluster-name", name, "--region", region, "--output", "json"],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return json.dumps(document)


def resolve_target(cluster: ClusterConfig) -> ClusterTarget:
    """Read the facts the cluster source can tell (an EKS describe for source eks)."""
    if cluster.source == "eks" and render_dir() is not None:
        # Render mode reads nothing from AWS: validation uses the declared kubernetesVersion/autoMode.
        return ClusterTarget(ClusterFacts(), None, None, None)
    if cluster.source == "eks":
        import pulumi_aws as aws

        if cluster.name is None or cluster.region is None:
            msg = "cluster.name and cluster.region are required for source eks"
            raise ValueError(msg)
        found = aws.eks.get_cluster(name=cluster.name, region=cluster.region)
        auto_mode = any(bool(c.enabled) for c in found.compute_configs)
        content = eks_kubeconfig(found.name, cluster.region, found.endpoint, found.certificate_authorities[0].data)
        facts = ClusterFacts(kubernetes_version=found.version, auto_mode=auto_mode)
        pulumi.log.info(
            f"EKS {found.name}: Kubernetes {found.version}, Auto Mode {'on' if auto_mode else 'off'}, "
            f"{len(found.remote_network_configs)} remote network config(s)"
        )
        return ClusterTarget(facts, None, content, None)
    if cluster.source == "kubeconfig":
        return ClusterTarget(ClusterFacts(), cluster.kubeconfig, None, cluster.context)
    return ClusterTarget(ClusterFacts(), str(local_kubeconfig()), None, None)


def make_provider(target: ClusterTarget, *, secret: bool = False) -> k8s.Provider:
    """The Kubernetes provider every component inherits through parentage.

    Server-side apply is the provider default; preview is a server-side dry run, so the API server's
    admission and validation (DRA CEL included) run at preview.

    In render mode the provider gets `renderYamlToDirectory` and no kubeconfig or context (the provider refuses
    them together); Helm's capabilities then come from the ambient KUBECONFIG, which `review` points at a local
    API server.

    `secret` (the `cluster` config key was set as a secret) passes the kubeconfig and context as secrets, so
    they are encrypted in the state and masked in the engine's output.
    """
    rendered = render_dir()
    if rendered is not None:
        return k8s.Provider("cluster", render_yaml_to_directory=rendered)
    chosen = target.kubeconfig_content if target.kubeconfig_content is not None else target.kubeconfig_path
    kubeconfig: pulumi.Input[str] | None = chosen
    context: pulumi.Input[str] | None = target.context
    if secret:
        kubeconfig = pulumi.Output.secret(chosen) if chosen is not None else None
        context = pulumi.Output.secret(target.context) if target.context is not None else None
    return k8s.Provider("cluster", kubeconfig=kubeconfig, context=context)
