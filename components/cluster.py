"""The stack's Kubernetes target: facts about the cluster and the provider that talks to it.

Nothing here reads the environment: render mode (`eks-hybrid-gpu review`) and the local API server's kubeconfig
are explicit arguments. The caller (`components.program.run(..., render_dir=..., local_kubeconfig=...)`) passes
the folder to `make_provider`, and `render_only` and the kubeconfig to `resolve_target`; the program's entry
points (`__main__.py`, the CLI's inline programs) read the environment and pass the values down.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from cluster.client.kubeclient import Kube
from cluster.client.kubeconfig import Source
from cluster.judge.live import LiveCluster, connect, preflight_hints, read_live
from components.config import ClusterConfig, StackConfig
from components.validation import ClusterFacts


@dataclass(frozen=True)
class ClusterTarget:
    """How to reach the cluster, for the provider and for the preflight's reads."""

    facts: ClusterFacts
    kubeconfig_path: str | None
    """A kubeconfig file (local and kubeconfig sources)."""
    kubeconfig_content: str | None
    """A generated kubeconfig with exec auth (eks source)."""
    context: str | None


def get_token_args(name: str, region: str, profile: str | None = None, role_arn: str | None = None) -> list[str]:
    """`aws eks get-token`'s arguments, with the stack's profile and role where it names them.

    `--profile` (cluster.awsProfile) is stronger than the caller's environment credentials, as AWS_PROFILE is not;
    `--role-arn` (cluster.roleArn) is assumed from those credentials.
    """
    args = ["eks", "get-token", "--cluster-name", name, "--region", region, "--output", "json"]
    if profile is not None:
        args += ["--profile", profile]
    if role_arn is not None:
        args += ["--role-arn", role_arn]
    return args


def eks_kubeconfig(
    name: str, region: str, endpoint: str, ca_data: str, profile: str | None = None, role_arn: str | None = None
) -> str:
    """A kubeconfig that authenticates through `aws eks get-token`, so no token is stored in state.

    The token is the stack's AWS identity's (`cluster.awsProfile`, `cluster.roleArn`), not whoever runs the update.
    """
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
                        "args": get_token_args(name, region, profile, role_arn),
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return json.dumps(document)


def resolve_target(
    cluster: ClusterConfig, *, render_only: bool = False, local_kubeconfig: Path | None = None
) -> ClusterTarget:
    """Read the facts the cluster source can tell (an EKS describe for source eks).

    `render_only` (the review's render mode): nothing is read from AWS, so the EKS describe is skipped.
    `local_kubeconfig`: the kubeconfig of `eks-hybrid-gpu local up`'s API server, for source local; required
    there outside render mode (a render reaches no cluster).
    """
    if cluster.source == "eks" and render_only:
        # Render mode reads nothing from AWS: validation uses the declared kubernetesVersion/autoMode.
        return ClusterTarget(ClusterFacts(), None, None, None)
    if cluster.source == "eks":
        import pulumi_aws as aws

        if cluster.name is None or cluster.region is None:
            msg = "cluster.name and cluster.region are required for source eks"
            raise ValueError(msg)
        found = aws.eks.get_cluster(name=cluster.name, region=cluster.region, opts=_aws_identity(cluster))
        auto_mode = any(bool(c.enabled) for c in found.compute_configs)
        content = eks_kubeconfig(
            found.name,
            cluster.region,
            found.endpoint,
            found.certificate_authorities[0].data,
            cluster.aws_profile,
            cluster.role_arn,
        )
        facts = ClusterFacts(kubernetes_version=found.version, auto_mode=auto_mode)
        pulumi.log.info(
            f"EKS {found.name}: Kubernetes {found.version}, Auto Mode {'on' if auto_mode else 'off'}, "
            f"{len(found.remote_network_configs)} remote network config(s)"
        )
        return ClusterTarget(facts, None, content, None)
    if cluster.source == "kubeconfig":
        return ClusterTarget(ClusterFacts(), cluster.kubeconfig, None, cluster.context)
    if local_kubeconfig is None and not render_only:
        msg = (
            "cluster.source is local, but the program was given no kubeconfig of the local API server: its entry "
            "point passes it, as __main__.py does (`components.program.run(..., local_kubeconfig=...)`)"
        )
        raise ValueError(msg)
    return ClusterTarget(ClusterFacts(), str(local_kubeconfig) if local_kubeconfig else None, None, None)


def _aws_identity(cluster: ClusterConfig) -> pulumi.InvokeOptions | None:
    """The EKS describe as the stack's AWS identity (`cluster.awsProfile`, `cluster.roleArn`), the token's own.

    None (the default provider: the ambient credentials) when the stack names neither.
    """
    if cluster.aws_profile is None and cluster.role_arn is None:
        return None
    import pulumi_aws as aws

    roles = [aws.ProviderAssumeRoleArgs(role_arn=cluster.role_arn)] if cluster.role_arn is not None else None
    provider = aws.Provider("eks-identity", profile=cluster.aws_profile, region=cluster.region, assume_roles=roles)
    return pulumi.InvokeOptions(provider=provider)


def make_provider(target: ClusterTarget, *, secret: bool = False, render_dir: str | None = None) -> k8s.Provider:
    """The Kubernetes provider every component inherits through parentage.

    Server-side apply is the provider default; preview is a server-side dry run, so the API server's
    admission and validation (DRA CEL included) run at preview.

    `render_dir` (render mode, `eks-hybrid-gpu review` only): the provider gets `renderYamlToDirectory` and no
    kubeconfig or context (the provider refuses them together), so it writes each object into that folder
    instead of applying it; Helm's capabilities then come from the ambient KUBECONFIG, which `review` points at
    a local API server. Never set it for `pulumi up`.

    `secret` (the `cluster` config key was set as a secret) passes the kubeconfig and context as secrets, so
    they are encrypted in the state and masked in the engine's output.
    """
    if render_dir is not None:
        return k8s.Provider("cluster", render_yaml_to_directory=render_dir)
    chosen = target.kubeconfig_content if target.kubeconfig_content is not None else target.kubeconfig_path
    kubeconfig: pulumi.Input[str] | None = chosen
    context: pulumi.Input[str] | None = target.context
    if secret:
        kubeconfig = pulumi.Output.secret(chosen) if chosen is not None else None
        context = pulumi.Output.secret(target.context) if target.context is not None else None
    return k8s.Provider("cluster", kubeconfig=kubeconfig, context=context)


def source_of(cluster: ClusterConfig, target: ClusterTarget) -> Source:
    """How to read the target, and what to tell the person when that fails, per cluster source."""
    if cluster.source == "eks":
        token = " ".join(get_token_args(str(cluster.name), str(cluster.region), cluster.aws_profile, cluster.role_arn))
        return Source(
            None,
            target.kubeconfig_content,
            None,
            f"the kubeconfig generated for EKS cluster {cluster.name} ({cluster.region})",
            preflight_hints(
                f"check the AWS credentials that `aws {token}` uses (set cluster.awsProfile or cluster.roleArn to "
                "choose them), and that this IAM principal has an EKS access entry with cluster-admin "
                "(or list and get on nodes, pods, daemonsets, resourceslices and resourceclaims)"
            ),
        )
    if cluster.source == "kubeconfig":
        return Source(
            target.kubeconfig_path,
            None,
            target.context,
            f"kubeconfig {target.kubeconfig_path} (eks-hybrid-gpu:cluster.kubeconfig)",
            preflight_hints(
                "set eks-hybrid-gpu:cluster.kubeconfig and cluster.context to a kubeconfig that reaches the cluster "
                "as an administrator, and check that the cluster is running"
            ),
        )
    return Source(
        target.kubeconfig_path,
        None,
        None,
        f"kubeconfig {target.kubeconfig_path} (the local cluster)",
        preflight_hints("start the local cluster with `eks-hybrid-gpu local up` (or `simulate start`)"),
    )


def read_cluster(
    cluster: ClusterConfig,
    target: ClusterTarget,
    records_namespace: str | None = None,
    config: StackConfig | None = None,
) -> LiveCluster:
    """The cohorts' and GPU nodes, what runs on them, the ledger's records; a LiveReadError when they cannot be read.

    `config`: the stack whose cohorts' nodes are read besides every node with a GPU trace (`cluster.judge.scoped_read`).
    """
    selectors = [c.selector(config.cohort_label_key) for c in config.cohorts] if config is not None else []
    return read_live(source_of(cluster, target), records_namespace, selectors)


def lease_client(cluster: ClusterConfig, target: ClusterTarget) -> Kube:
    """The client an update takes its cohorts' Leases through (`components.update_leases`); LiveReadError when none."""
    return connect(source_of(cluster, target))
