"""`cluster`: where the stack's Kubernetes API lives and what the program knows about it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from cluster.findings import show
from components.config.strict import StrictModel
from policy.gpu_allocation.vocab import grammar, kube_releases


class ClusterConfig(StrictModel):
    """Where the stack's Kubernetes API lives and what the program knows about it."""

    source: Literal["local", "kubeconfig", "eks"] = Field(
        default="local",
        description="local: the loopback API server of `eks-hybrid-gpu local up`; kubeconfig: a file; "
        "eks: an EKS cluster read through pulumi-aws.",
    )
    name: str | None = Field(default=None, description="EKS cluster name (source eks).")
    region: str | None = Field(default=None, description="AWS region of the EKS cluster (source eks).")
    kubeconfig: str | None = Field(default=None, description="Path of the kubeconfig file (source kubeconfig).")
    context: str | None = Field(default=None, description="kubeconfig context (source kubeconfig).")
    aws_profile: str | None = Field(
        default=None,
        alias="awsProfile",
        description="AWS profile (of ~/.aws/config) the EKS describe and the kubeconfig's `aws eks get-token` use "
        "(source eks). Default: the ambient credentials (AWS_PROFILE, the instance's role).",
    )
    role_arn: str | None = Field(
        default=None,
        alias="roleArn",
        description="IAM role the EKS describe and `aws eks get-token --role-arn` assume, from the profile's "
        "credentials (source eks); the role's EKS access entry is the one the cluster judges.",
    )
    kubernetes_version: str | None = Field(
        default=None,
        alias="kubernetesVersion",
        description="Cluster version, e.g. 1.34.4. Read from EKS for source eks; declared otherwise.",
    )
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        alias="featureGates",
        description="DRA feature gates the cluster sets against its version's defaults, e.g. DRAExtendedResource: "
        "true on 1.34/1.35 (docs/versions.md). The local default starts its control plane with them; the preflight "
        "and `migrate` judge each cohort with them.",
    )
    auto_mode: bool = Field(
        default=False,
        alias="autoMode",
        description="Whether EKS Auto Mode is on. Read from EKS for source eks.",
    )
    skip_await: bool = Field(
        default=False,
        alias="skipAwait",
        description="Do not wait for chart workloads to become ready. Only for clusters without GPU "
        "nodes (the local API server), where DaemonSets have nothing to schedule.",
    )
    preflight: bool = Field(
        default=True,
        description="Read the cohorts' nodes before installing and refuse when none match, when a "
        "device-plugin node is MPS-capable, or when a selected node is an Auto Mode node.",
    )

    @field_validator("kubernetes_version")
    @classmethod
    def _version_shape(cls, value: str | None) -> str | None:
        if value is not None and not grammar.KUBERNETES_VERSION.fullmatch(value):
            msg = f"{show(value)} is not a Kubernetes version; write it as 1.34.4"
            raise ValueError(msg)
        return value

    @field_validator("feature_gates")
    @classmethod
    def _gate_names(cls, value: dict[str, bool]) -> dict[str, bool]:
        for gate in value:
            if not grammar.FEATURE_GATE.fullmatch(gate):
                msg = f"{show(gate)} is not a feature gate name; write it as --feature-gates does: DRAExtendedResource"
                raise ValueError(msg)
        return value

    @property
    def release_minor(self) -> kube_releases.Minor:
        """The declared version's (major, minor); the newest supported when none is declared (read from EKS)."""
        if self.kubernetes_version is None:
            return kube_releases.EKS_MINORS[-1]
        major, minor = self.kubernetes_version.removeprefix("v").split(".")[:2]
        return int(major), int(minor)

    @field_validator("name")
    @classmethod
    def _eks_name(cls, value: str | None) -> str | None:
        if value is not None and not grammar.EKS_CLUSTER_NAME.fullmatch(value):
            msg = (
                f"{show(value)} is not an EKS cluster name; use up to 100 letters, digits, '-' and '_', "
                "starting with a letter or digit"
            )
            raise ValueError(msg)
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not grammar.AWS_REGION.fullmatch(value):
            msg = f"{show(value)} is not an AWS region; write it like us-west-2"
            raise ValueError(msg)
        return value

    @field_validator("kubeconfig")
    @classmethod
    def _kubeconfig_path(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_path(value):
            msg = (
                "is not a usable file path (empty, a NUL or line break, or too long); "
                "set the path of the kubeconfig file, e.g. ~/.kube/config"
            )
            raise ValueError(msg)
        return value

    @field_validator("aws_profile")
    @classmethod
    def _aws_profile(cls, value: str | None) -> str | None:
        if value is not None and not grammar.AWS_PROFILE.fullmatch(value):
            msg = (
                f"{show(value)} is not an AWS profile name; use the name of a [profile NAME] section of "
                "~/.aws/config (letters, digits and _.+=,@- only)"
            )
            raise ValueError(msg)
        return value

    @field_validator("role_arn")
    @classmethod
    def _role_arn(cls, value: str | None) -> str | None:
        if value is not None and not grammar.IAM_ROLE_ARN.fullmatch(value):
            msg = f"{show(value)} is not an IAM role ARN; write it as arn:aws:iam::123456789012:role/NAME"
            raise ValueError(msg)
        return value

    @field_validator("context")
    @classmethod
    def _context(cls, value: str | None) -> str | None:
        if value is not None and not grammar.KUBE_CONTEXT.fullmatch(value):
            msg = (
                f"{show(value)} is not a kubeconfig context name; use the name `kubectl config get-contexts` "
                "lists (letters, digits and @:._/+=- only)"
            )
            raise ValueError(msg)
        return value
