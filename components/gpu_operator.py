"""The GPU Operator as a Helm Release, in ClusterPolicy or GPUCluster mode.

A Release, not Chart v4: the Operator's pre-delete and pre-upgrade hooks (GPUCluster cleanup, CRD
upgrade) and its finalizers must run, and Chart v4 drops hooks. No hook is ever bypassed here.

Render mode (`render_only=True`, passed down from `components.program.run(..., render_dir=...)` by
`eks-hybrid-gpu review`) is the one exception: a Release cannot render to files, so the same chart, version,
release name and values go through Chart v4, which renders the hook objects as plain manifests. Render mode
never applies anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.chart_source import resolve
from components.config import ChartPin, CohortConfig, Mig, OperatorConfig
from components.owner_chart import Upstream, owner_chart

RELEASE_NAME = "gpu-operator"
UPSTREAM = Upstream(versions.GPU_OPERATOR_CHART, repo=versions.GPU_OPERATOR_REPO)


def gpu_operator_values(operator: OperatorConfig, cohort: CohortConfig) -> dict[str, Any]:
    """Values for the chosen mode.

    GPUCluster mode is exactly the documented new-installation fragment. ClusterPolicy mode keeps the
    Operator's device plugin as the cohort's allocation owner and leaves driver, toolkit, NFD and MIG
    management to what the stack declares is already installed.
    """
    if operator.mode == "gpu-cluster":
        return {
            "clusterPolicy": {"deployCR": False},
            "gpuCluster": {"deployCR": True},
            "driver": {"enabled": operator.driver_enabled},
            "nfd": {"enabled": operator.nfd_enabled},
            "draDriver": {"computeDomains": {"enabled": False}},
        }
    mig_strategy = cohort.sharing.mig_strategy if isinstance(cohort.sharing, Mig) else "none"
    return {
        "clusterPolicy": {"deployCR": True},
        "gpuCluster": {"deployCR": False},
        "driver": {"enabled": operator.driver_enabled},
        "toolkit": {"enabled": operator.toolkit_enabled},
        "nfd": {"enabled": operator.nfd_enabled},
        "devicePlugin": {"enabled": operator.device_plugin_enabled},
        "migManager": {"enabled": operator.mig_manager_enabled},
        "mig": {"strategy": mig_strategy},
    }


class GpuOperator(pulumi.ComponentResource):
    """The NVIDIA GPU Operator, cluster-wide; at most one per cluster."""

    release_name: pulumi.Output[str]
    """Helm release name."""
    mode: pulumi.Output[str]
    """cluster-policy or gpu-cluster."""

    def __init__(
        self,
        name: str,
        *,
        operator: OperatorConfig,
        cohort: CohortConfig,
        chart: ChartPin,
        namespace: pulumi.Input[str],
        skip_await: bool,
        project_dir: Path,
        render_only: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`render_only`: the review's render mode; the chart goes through Chart v4 instead of a Release."""
        super().__init__("eks-hybrid-gpu:owners:GpuOperator", name, None, opts)
        self.mode = pulumi.Output.from_input(operator.mode)
        if render_only:
            owner_chart(
                f"{name}-chart",
                upstream=UPSTREAM,
                pin=chart,
                project_dir=project_dir,
                release=RELEASE_NAME,
                namespace=namespace,
                values=gpu_operator_values(operator, cohort),
                ownership=None,
                skip_await=skip_await,
                parent=self,
            )
            self.release_name = pulumi.Output.from_input(RELEASE_NAME)
            self.register_outputs({"release_name": self.release_name, "mode": self.mode})
            return
        source = resolve(chart, UPSTREAM.chart, UPSTREAM.repo, UPSTREAM.oci, project_dir)
        release = k8s.helm.v3.Release(
            f"{name}-release",
            chart=source.chart,
            version=source.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=source.repo) if source.repo else None,
            name=RELEASE_NAME,
            namespace=namespace,
            values=gpu_operator_values(operator, cohort),
            skip_await=skip_await,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release_name = release.name.apply(lambda n: n or RELEASE_NAME)
        self.register_outputs({"release_name": self.release_name, "mode": self.mode})
