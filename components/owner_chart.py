"""One way to install an allocation owner's chart: resolve the source, stamp the ownership, await or not.

The device plugin, the DRA driver and the Operator's render-mode chart all go through here, so a chart source
override behaves the same for every owner and each stamped object carries the same ownership stamp (with
`<chart>@<version>`, which Chart v4 hides from policy packs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.chart_source import resolve
from components.config import ChartPin
from components.stamping import Ownership, stamp
from policy.gpu_allocation.vocab.labels import Owner
from policy.gpu_allocation.vocab.owners import owner_kind


@dataclass(frozen=True)
class Upstream:
    """Where a chart comes from when the stack config does not override its source."""

    chart: str
    repo: str | None = None
    oci: str | None = None

    @classmethod
    def of(cls, owner: Owner) -> Upstream:
        """The registry's upstream of an owner's chart: a Helm repository URL, or the chart's own `oci://` reference."""
        chart = owner_kind(owner).chart
        if chart.upstream.startswith("oci://"):
            return cls(chart.name, oci=chart.upstream)
        return cls(chart.name, repo=chart.upstream)


def owner_chart(
    name: str,
    *,
    upstream: Upstream,
    pin: ChartPin,
    project_dir: Path,
    release: str,
    namespace: pulumi.Input[str],
    values: Mapping[str, Any],
    ownership: Ownership | None,
    skip_await: bool,
    parent: pulumi.Resource,
    transforms: Sequence[pulumi.ResourceTransform] = (),
) -> k8s.helm.v4.Chart:
    """A Chart v4 of one owner, every rendered object stamped with `ownership` and the chart it came from.

    `ownership=None` renders the objects unstamped: the Operator's review render, which must show exactly what
    its Helm Release applies (a Release cannot stamp the objects it installs).
    """
    source = resolve(pin, upstream.chart, upstream.repo, upstream.oci, project_dir)
    stamped = [] if ownership is None else [stamp(replace(ownership, chart=f"{source.chart}@{source.version or ''}"))]
    return k8s.helm.v4.Chart(
        name,
        chart=source.chart,
        version=source.version,
        repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=source.repo) if source.repo else None,
        plain_http=source.plain_http or None,
        name=release,
        namespace=namespace,
        values=dict(values),
        # Where no node can run the DaemonSets (clusters without GPU nodes), nothing could ever become ready.
        skip_await=skip_await,
        opts=pulumi.ResourceOptions(
            parent=parent,
            transforms=[*stamped, *transforms],
        ),
    )
