"""The whole GPU allocation layer of one cluster: namespaces, owners, DRA objects, ledger and smoke Jobs."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from cluster.records.ledger import LEDGER_HOME
from components.config import CohortConfig, StackConfig
from components.dra_objects import DraObjects
from components.namespaces import PRIVILEGED, RESTRICTED, GpuNamespaces
from components.node_guard import CohortLabelGuard
from components.owner_builders import CohortOwner, builder_of
from components.ownership_ledger import OwnershipLedger, ownership_map
from components.runtime_class import NvidiaRuntimeClass
from components.smoke_jobs import PROBE_FILE, SmokeJob, smoke_request
from components.stamping import Ownership
from payloads import probe_script_path
from policy.gpu_allocation.vocab.labels import LABEL_PREFIX
from policy.gpu_allocation.vocab.owners import OWNER_KINDS, allocates_through_dra

PROBE_CONFIG_MAP = "hybrid-gpu-cuda-probe"
WORKLOADS_ROLE = "workloads"
"""The role of the restricted namespace that holds the smoke Jobs and the DRA claim templates."""


def _ownership(config: StackConfig, index: int, cohort: CohortConfig) -> Ownership:
    return Ownership(
        owner=cohort.owner,
        cohort=cohort.name,
        selector=cohort.selector(config.cohort_label_key),
        sharing=cohort.sharing_label,
        config_path=f"eks-hybrid-gpu:cohorts[{index}]",
    )


def _needs_dra_objects(config: StackConfig) -> bool:
    return any(allocates_through_dra(cohort.owner, config.operator.mode) for cohort in config.cohorts)


def namespace_roles(config: StackConfig, beside: Collection[StackConfig] = ()) -> dict[str, tuple[str, str]]:
    """Role -> (namespace, Pod Security level): the ledger's home, the workloads, then each owner kind in use.

    An owner kind's role is its owner key; its namespace is privileged (the allocators mount host paths). The
    configs `beside` (an owner installed beside a cohort's own, `migrate` one node at a time) add their kinds.
    """
    namespaces = config.namespaces
    wanted: dict[str, tuple[str, str]] = {
        LEDGER_HOME: (namespaces.of(LEDGER_HOME), PRIVILEGED),
        WORKLOADS_ROLE: (namespaces.workloads, RESTRICTED),
    }
    for owner in OWNER_KINDS:
        for each in (config, *beside):
            if owner not in wanted and each.cohorts_of(owner):
                wanted[owner] = (each.namespaces.of(owner), PRIVILEGED)
    return wanted


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
        beside: Mapping[str, StackConfig] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`secret_inputs`: some stack config was set as a secret, so the ownership map and ledger are secret.

        `beside`: cohort -> the config whose entry of that cohort is installed too, beside the cohort's own owner
        (`migrate` one node at a time: the new owner on the hosts' new selector, which no node has before it is
        moved). It is built under the cohort's own child name, so the last phase, with only the new owner, keeps it.

        `render_only`: the review's render mode (`components.program.run(..., render_dir=...)`); the GPU
        Operator then renders through Chart v4, since a Helm Release cannot render to files.
        """
        super().__init__("eks-hybrid-gpu:index:HybridGpuCluster", name, None, opts)
        beside = dict(beside or {})
        namespaces = GpuNamespaces(
            f"{name}-namespaces",
            namespaces=namespace_roles(config, beside.values()),
            opts=pulumi.ResourceOptions(parent=self),
        )

        def ns(role: str) -> pulumi.Output[str]:
            return namespaces.names.apply(lambda names: names[role])

        runtime_class = config.runtime_class
        if config.needs_runtime_class:
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
        mapping = ownership_map(config, beside)
        if (paused or beside) and migration is not None:
            mapping["migration"] = dict(migration)
            for cohort_name in paused:
                mapping["cohorts"][cohort_name]["installed"] = False
        OwnershipLedger(
            f"{name}-ledger",
            ownership=mapping,
            namespace=ns(LEDGER_HOME),
            secret=secret_inputs,
            opts=pulumi.ResourceOptions(parent=self),
        )
        if any(_needs_dra_objects(each) for each in (config, *beside.values())):
            DraObjects(
                f"{name}-dra-objects",
                workloads_namespace=ns(WORKLOADS_ROLE),
                large_gpu_memory=config.dra.large_gpu_memory,
                extra_selector=config.dra.extra_selector,
                opts=pulumi.ResourceOptions(parent=self),
            )

        releases: dict[str, pulumi.Output[str]] = {}
        owners = [_ownership(config, index, cohort) for index, cohort in enumerate(config.cohorts)]
        for cohort, owned in zip(config.cohorts, owners, strict=True):
            if cohort.name in paused:
                continue
            build = builder_of(cohort.owner)
            inputs = CohortOwner(config, cohort, owned, ns(cohort.owner), project_dir, render_only)
            releases[cohort.name] = build(f"{name}-{cohort.name}", inputs, pulumi.ResourceOptions(parent=self))
        for cohort_name, other in beside.items():
            index, cohort = next((i, c) for i, c in enumerate(other.cohorts) if c.name == cohort_name)
            inputs = CohortOwner(
                other, cohort, _ownership(other, index, cohort), ns(cohort.owner), project_dir, render_only
            )
            builder_of(cohort.owner)(f"{name}-{cohort.name}", inputs, pulumi.ResourceOptions(parent=self))

        probe_map: str | None = None
        if config.smoke_jobs.probe:
            probe_map = PROBE_CONFIG_MAP
            k8s.core.v1.ConfigMap(
                f"{name}-cuda-probe",
                metadata={
                    "name": PROBE_CONFIG_MAP,
                    "namespace": ns(WORKLOADS_ROLE),
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
                namespace=ns(WORKLOADS_ROLE),
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
