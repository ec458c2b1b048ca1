"""The GPU Operator as a Helm Release, in ClusterPolicy or GPUCluster mode.

A Release, not Chart v4: the Operator's pre-delete and pre-upgrade hooks (GPUCluster cleanup, CRD
upgrade) and its finalizers must run, and Chart v4 drops hooks. No hook is ever bypassed here.

Render mode (`render_only=True`, passed down from `components.program.run(..., render_dir=...)` by
`eks-hybrid-gpu review`) is the one exception: a Release cannot render to files, so the same chart, version,
release name and values go through Chart v4, which renders the hook objects as plain manifests. Render mode
never applies anything.

Where the chart lets this program keep operands off nodes they must not reach, and where it does not:

- `daemonsets.tolerations` (ClusterPolicy and GPUCluster `spec.daemonsets.tolerations`) is the one operand
  placement key. The chart's default tolerates `nvidia.com/gpu:NoSchedule`, the taint of EKS Auto Mode GPU
  NodePools and of tainted EC2 GPU node groups, and a non-empty list replaces it in every operand DaemonSet.
  This program renders only the Operator cohort's own taint, `<cohort label key>=<value>:NoSchedule`
  (`cluster.judge.operator_boundary.cohort_tolerations`), so a node tainted `nvidia.com/gpu` repels every
  operand even when its opt-out label is missing; the preflight refuses a cohort host tainted otherwise.
- No key restricts operand placement by node: `daemonsets` has no nodeSelector or affinity, nor have the
  CRDs' `spec.daemonsets`; the DRA driver's nodeSelector is fixed (`nvidia.com/gpu.deploy.dra-driver=true`);
  `driver.nvidiaDriverCRD.nodeSelector` is not rendered. The Operator places operands by GPU discovery and
  its `nvidia.com/gpu.deploy.*` labels, so an untainted GPU node outside the cohort is kept out only by
  `nvidia.com/gpu.deploy.operands=false` (the preflight and `inspect` check it; docs/operator-boundary.md).
- `operator.nodeSelector`/`affinity` place the Operator's controller Deployment and its hook Jobs, not operands.
- `node-feature-discovery.worker.*` (with `nfdEnabled`) places NFD's worker, which only labels nodes; it stays
  cluster-wide: the standalone cohorts' GPU affinity reads its labels, and nothing here may block discovery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from cluster.judge.operator_boundary import cohort_tolerations
from components.chart_source import resolve
from components.config import ChartPin, CohortConfig, Mig, OperatorConfig
from components.owner_chart import Upstream, owner_chart
from policy.gpu_allocation.vocab.labels import DEFAULT_COHORT_LABEL_KEY, GPU_OPERATOR
from policy.gpu_allocation.vocab.owners import owner_kind

RELEASE_NAME = owner_kind(GPU_OPERATOR).chart.name
"""The Operator's Helm release carries its chart's name."""
UPSTREAM = Upstream.of(GPU_OPERATOR)


def gpu_operator_values(
    operator: OperatorConfig, cohort: CohortConfig, cohort_label_key: str = DEFAULT_COHORT_LABEL_KEY
) -> dict[str, Any]:
    """Values for the chosen mode.

    GPUCluster mode is the documented new-installation fragment. ClusterPolicy mode keeps the Operator's
    device plugin as the cohort's allocation owner and leaves driver, toolkit, NFD and MIG management to what
    the stack declares is already installed. Both add `daemonsets.tolerations` (see the module docstring).
    """
    daemonsets = {"tolerations": cohort_tolerations(cohort, cohort_label_key)}
    if operator.mode == "gpu-cluster":
        return {
            "clusterPolicy": {"deployCR": False},
            "gpuCluster": {"deployCR": True},
            "driver": {"enabled": operator.driver_enabled},
            "nfd": {"enabled": operator.nfd_enabled},
            "draDriver": {"computeDomains": {"enabled": False}},
            "daemonsets": daemonsets,
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
        "daemonsets": daemonsets,
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
        cohort_label_key: str = DEFAULT_COHORT_LABEL_KEY,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`render_only`: the review's render mode; the chart goes through Chart v4 instead of a Release.

        `cohort_label_key`: the stack's cohort label key, whose cohort value the operands tolerate as a taint.
        """
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
                values=gpu_operator_values(operator, cohort, cohort_label_key),
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
            values=gpu_operator_values(operator, cohort, cohort_label_key),
            skip_await=skip_await,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release_name = release.name.apply(lambda n: n or RELEASE_NAME)
        self.register_outputs({"release_name": self.release_name, "mode": self.mode})
