"""The whole GPU allocation layer of one cluster: namespaces, owners, DRA objects, ledger and smoke Jobs."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import CohortConfig, StackConfig, needs_runtime_class
from components.device_plugin import DevicePlugin
from components.dra_driver import DraDriver
from components.dra_objects import DraObjects
from components.gpu_operator import GpuOperator
from components.ledger import OwnershipLedger, ownership_map
from components.namespaces import PRIVILEGED, RESTRICTED, GpuNamespaces
from components.node_guard import CohortLabelGuard
from components.probe import probe_script_path
from components.runtime_class import NvidiaRuntimeClass
from components.smoke_jobs import PROBE_FILE, SmokeJob, smoke_request
from components.stamping import Ownership
from policy.gpu_allocation.vocab.labels import LABEL_PREFIX

PROBE_CONFIG_MAP = "hybrid-gpu-cuda-probe"


def _ownership(config: StackConfig, index: int, cohort: CohortConfig) -> Ownership:
    return Ownership(
        owner=cohort.owner,
        cohort=cohort.name,
        selector=cohort.selector(config.cohort_label_key),
        sharing=cohort.sharing_label,
        config_path=f"eks-hybrid-gpu:cohorts[{index}]",
    )


def _needs_dra_objects(config: StackConfig) -> bool:
    return bool(config.cohorts_of("dra")) or (
        bool(config.cohorts_of("gpu-operator")) and config.operator.mode == "gpu-cluster"
    )


def probe_script() -> str:
    """The bounded CUDA probe's source, shipped to the smoke Jobs in a ConfigMap."""
    text: str = probe_script_path().read_text()
    return text


class HybridGpuCluster(pulumi.ComponentResource):
    """One allocation owner per cohort, and everything that proves and records who owns what."""

    ownership: pulumi.Output[dict[str, Any]]
    """Cohort -> owner map (also the ledger ConfigMap's content)."""
    namespaces: pulumi.Output[dict[str, str]]
    """Role -> namespace."""
    smoke_jobs: pulumi.Output[dict[str, str]]
    """Cohort -> smoke Job name."""
    releases: pulumi.Output[dict[str, str]]
    """Cohort -> Helm release name of its owner."""

    def __init__(
        self,
        name: str,
        *,
        config: StackConfig,
        project_dir: Path,
        secret_inputs: bool = False,
        render_only: bool = False,
        paused: Collection[str] = (),
        migration: Mapping[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`secret_inputs`: some stack config was set as a secret, so the ownership map and ledger are secret.

        `render_only`: the review's render mode (`components.program.run(..., render_dir=...)`); the GPU
        Operator then renders through Chart v4, since a Helm Release cannot render to files.
        """
        super().__init__("eks-hybrid-gpu:index:HybridGpuCluster", name, None, opts)
        ns_cfg = config.namespaces
        wanted: dict[str, tuple[str, str]] = {
            "device-plugin": (ns_cfg.device_plugin, PRIVILEGED),  # also home of the ledger
            "workloads": (ns_cfg.workloads, RESTRICTED),
        }
        if config.cohorts_of("dra"):
            wanted["dra"] = (ns_cfg.dra_driver, PRIVILEGED)
        if config.cohorts_of("gpu-operator"):
            wanted["gpu-operator"] = (ns_cfg.gpu_operator, PRIVILEGED)
        namespaces = GpuNamespaces(f"{name}-namespaces", namespaces=wanted, opts=pulumi.ResourceOptions(parent=self))

        def ns(role: str) -> pulumi.Output[str]:
            return namespaces.names.apply(lambda names: names[role])

        runtime_class = config.runtime_class
        if needs_runtime_class(config):
            NvidiaRuntimeClass(
                f"{name}-runtime-class",
                class_name=runtime_class.name,
                hosts_have_handler=runtime_class.hosts_have_nvidia_handler,
                opts=pulumi.ResourceOptions(parent=self),
            )
        if config.cohort_label_guard:
            CohortLabelGuard(
                f"{name}-cohort-label-guard",
                cohort_label_key=config.cohort_label_key,
                opts=pulumi.ResourceOptions(parent=self),
            )
        mapping = ownership_map(config)
        if paused and migration is not None:
            mapping["migration"] = dict(migration)
            for cohort_name in paused:
                mapping["cohorts"][cohort_name]["installed"] = False
        OwnershipLedger(
            f"{name}-ledger",
            ownership=mapping,
            namespace=ns("device-plugin"),
            secret=secret_inputs,
            opts=pulumi.ResourceOptions(parent=self),
        )
        if _needs_dra_objects(config):
            DraObjects(
                f"{name}-dra-objects",
                workloads_namespace=ns("workloads"),
                large_gpu_memory=config.dra.large_gpu_memory,
                extra_selector=config.dra.extra_selector,
                opts=pulumi.ResourceOptions(parent=self),
            )

        releases: dict[str, pulumi.Output[str]] = {}
        skip_await = config.cluster.skip_await
        owners = [_ownership(config, index, cohort) for index, cohort in enumerate(config.cohorts)]
        for cohort, owned in zip(config.cohorts, owners, strict=True):
            child = f"{name}-{cohort.name}"
            if cohort.name in paused:
                continue
            if cohort.owner == "device-plugin":
                releases[cohort.name] = DevicePlugin(
                    child,
                    cohort=cohort,
                    ownership=owned,
                    chart=config.charts.device_plugin,
                    namespace=ns("device-plugin"),
                    runtime_class=runtime_class.name,
                    skip_await=skip_await,
                    project_dir=project_dir,
                    opts=pulumi.ResourceOptions(parent=self),
                ).release_name
            elif cohort.owner == "dra":
                releases[cohort.name] = DraDriver(
                    child,
                    cohort_name=cohort.name,
                    ownership=owned,
                    chart=config.charts.dra_driver,
                    namespace=ns("dra"),
                    feature_gates=config.dra.feature_gates,
                    skip_await=skip_await,
                    project_dir=project_dir,
                    opts=pulumi.ResourceOptions(parent=self),
                ).release_name
            else:
                releases[cohort.name] = GpuOperator(
                    child,
                    operator=config.operator,
                    cohort=cohort,
                    chart=config.charts.gpu_operator,
                    namespace=ns("gpu-operator"),
                    skip_await=skip_await,
                    project_dir=project_dir,
                    render_only=render_only,
                    cohort_label_key=config.cohort_label_key,
                    opts=pulumi.ResourceOptions(parent=self),
                ).release_name

        probe_map: str | None = None
        if config.smoke_jobs.probe:
            probe_map = PROBE_CONFIG_MAP
            k8s.core.v1.ConfigMap(
                f"{name}-cuda-probe",
                metadata={
                    "name": PROBE_CONFIG_MAP,
                    "namespace": ns("workloads"),
                    "labels": {f"{LABEL_PREFIX}/component": "cuda-probe"},
                },
                data={PROBE_FILE: probe_script()},
                opts=pulumi.ResourceOptions(parent=self),
            )
        jobs: dict[str, pulumi.Output[str]] = {}
        for cohort, owned in zip(config.cohorts, owners, strict=True):
            if cohort.name in paused:
                continue
            jobs[cohort.name] = SmokeJob(
                f"{name}-{cohort.name}-smoke",
                cohort=cohort,
                ownership=owned,
                request=smoke_request(cohort, config.operator, runtime_class.name),
                smoke=config.smoke_jobs,
                namespace=ns("workloads"),
                probe_config_map=probe_map,
                opts=pulumi.ResourceOptions(parent=self),
            ).job_name

        self.ownership = pulumi.Output.secret(mapping) if secret_inputs else pulumi.Output.from_input(mapping)
        self.namespaces = namespaces.names
        # Both maps are keyed by cohort name: as secret as the ownership map when any config was a secret.
        smoke_jobs = pulumi.Output.all(**jobs).apply(lambda d: dict(d))  # type: ignore[arg-type]
        releases_by_cohort = pulumi.Output.all(**releases).apply(lambda d: dict(d))  # type: ignore[arg-type]
        self.smoke_jobs = pulumi.Output.secret(smoke_jobs) if secret_inputs else smoke_jobs
        self.releases = pulumi.Output.secret(releases_by_cohort) if secret_inputs else releases_by_cohort
        self.register_outputs(
            {
                "ownership": self.ownership,
                "namespaces": self.namespaces,
                "smoke_jobs": self.smoke_jobs,
                "releases": self.releases,
            }
        )
