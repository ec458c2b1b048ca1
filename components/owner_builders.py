"""One builder per owner kind: how a cohort's owner becomes its component. `components.stack` dispatches here.

What an owner kind *is* (chart, pins, namespace, modes) is its registry entry in
policy/gpu_allocation/vocab/owners.py; how it is *installed* is its builder. A new owner kind is one entry there
and one builder here (docs/adding-an-owner-kind.md). An owner with no builder is refused by name: nothing is
ever built as some other kind by default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pulumi

from components.config import CohortConfig, StackConfig
from components.device_plugin import DevicePlugin
from components.dra_driver import DraDriver
from components.gpu_operator import GpuOperator
from components.stamping import Ownership
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner


@dataclass(frozen=True)
class CohortOwner:
    """What every builder gets: the stack, one cohort, its ownership stamp and namespace, and the program's mode."""

    config: StackConfig
    cohort: CohortConfig
    ownership: Ownership
    namespace: pulumi.Input[str]
    """The owner kind's namespace (`namespaces.<config key>`), as the stack's GpuNamespaces created it."""
    project_dir: Path
    render_only: bool
    """The review's render mode (`components.program.run(..., render_dir=...)`)."""


OwnerBuilder = Callable[[str, CohortOwner, pulumi.ResourceOptions], pulumi.Output[str]]
"""(child name, inputs, child options) -> the Helm release name of the cohort's owner."""


def build_device_plugin(name: str, owned: CohortOwner, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """The standalone device plugin, on the cohort's nodes only."""
    config = owned.config
    return DevicePlugin(
        name,
        cohort=owned.cohort,
        ownership=owned.ownership,
        chart=config.charts.of(DEVICE_PLUGIN),
        namespace=owned.namespace,
        runtime_class=config.runtime_class.name,
        skip_await=config.cluster.skip_await,
        project_dir=owned.project_dir,
        opts=opts,
    ).release_name


def build_dra_driver(name: str, owned: CohortOwner, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """The standalone DRA driver, its kubelet plugin on the cohort's nodes only."""
    config = owned.config
    return DraDriver(
        name,
        cohort_name=owned.cohort.name,
        ownership=owned.ownership,
        chart=config.charts.of(DRA),
        namespace=owned.namespace,
        feature_gates=config.dra.feature_gates,
        keep_extended_resource_name=config.dra.extended_resource_name is not None,
        skip_await=config.cluster.skip_await,
        project_dir=owned.project_dir,
        opts=opts,
    ).release_name


def build_gpu_operator(name: str, owned: CohortOwner, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """The GPU Operator (cluster-wide; config validation allows one Operator cohort)."""
    config = owned.config
    return GpuOperator(
        name,
        operator=config.operator,
        cohort=owned.cohort,
        chart=config.charts.of(GPU_OPERATOR),
        namespace=owned.namespace,
        skip_await=config.cluster.skip_await,
        project_dir=owned.project_dir,
        render_only=owned.render_only,
        cohort_label_key=config.cohort_label_key,
        opts=opts,
    ).release_name


OWNER_BUILDERS: Final[Mapping[Owner, OwnerBuilder]] = {
    DEVICE_PLUGIN: build_device_plugin,
    DRA: build_dra_driver,
    GPU_OPERATOR: build_gpu_operator,
}
"""Owner -> the builder of its component; every owner of the registry (vocab.owners.OWNER_KINDS) has one."""


class UnknownOwnerError(LookupError):
    """An owner with no builder: the program refuses it rather than install something else."""


def builder_of(owner: str) -> OwnerBuilder:
    """The builder of one owner's component; UnknownOwnerError naming the owner and where builders live."""
    builder = OWNER_BUILDERS.get(owner)  # type: ignore[call-overload]
    if builder is None:
        known = ", ".join(OWNER_BUILDERS)
        msg = (
            f"no component builds owner {owner!r} (builders: {known}); add its registry entry to "
            "policy/gpu_allocation/vocab/owners.py and its builder to components.owner_builders.OWNER_BUILDERS "
            "(docs/adding-an-owner-kind.md)"
        )
        raise UnknownOwnerError(msg)
    found: OwnerBuilder = builder
    return found
