"""The pinned chart archives the chart-rendering tests read, from the chain `local up` and `review` use.

`EKS_HYBRID_GPU_CHART_MIRROR`, else `../shared/charts`, else the pinned versions pulled once from upstream into
the user cache (eks_hybrid_gpu.chartmirror), each archive checked against its pinned sha256. Resolved once per
session, at collection when a collected test carries the `charts` marker. With no source, that collection prints
one line naming the archives, the variable and the folder, and every `charts` test fails with the same line —
never skipped, so a missing source cannot look like a pass — while the tests that need no chart run as usual.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from eks_hybrid_gpu import chartfetch, projectdir
from eks_hybrid_gpu.chartmirror import (
    CHART_MIRROR_ENV,
    ChartMirrorError,
    Sources,
    Wanted,
    resolve,
)
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR
from policy.gpu_allocation.vocab.owners import OWNER_KINDS, owner_kind

MARKER = "charts"


PINNED_CHARTS = tuple(Wanted(kind.chart.name, kind.chart.version, kind.chart.upstream) for kind in OWNER_KINDS.values())
"""The registry's pins: device plugin 0.20.0, DRA 0.5.0 (the seed's release) and the Operator v26.7.0."""
FALLBACK_CHARTS = tuple(
    Wanted(kind.chart.name, kind.chart.fallback[0], kind.chart.upstream)
    for kind in OWNER_KINDS.values()
    if kind.chart.fallback is not None
)
"""The registry's fallback archives (DRA 0.4.1): the policy tests' gate tables were written against its render,
and the local stack's fallback is tested with a mirror that lacks the pin."""
TEST_CHARTS = PINNED_CHARTS + FALLBACK_CHARTS
PREFIX = "the chart-rendering tests cannot run: "


@functools.cache
def _resolved() -> tuple[Sources, Sources] | str:
    """The pinned set and the fallback set, resolved apart (a Sources holds one archive per chart name)."""
    fix = f"set {CHART_MIRROR_ENV}=DIR"
    try:
        return resolve(PINNED_CHARTS, local=False, fix=fix), resolve(FALLBACK_CHARTS, local=False, fix=fix)
    except ChartMirrorError as error:
        return PREFIX + str(error)


def unavailable() -> str | None:
    """The one line that says why the chart archives cannot be had, or None when every one resolved."""
    resolved = _resolved()
    return resolved if isinstance(resolved, str) else None


def archive(chart: str, *, fallback: bool = False) -> Path:
    """The verified archive of one test chart (its pin, or its fallback); fails the calling test with the one line
    when there is none."""
    resolved = _resolved()
    if isinstance(resolved, str):
        pytest.fail(resolved, pytrace=False)
    pinned, fallbacks = resolved
    return (fallbacks if fallback else pinned).found[chart].archive


def device_plugin() -> Path:
    """nvidia-device-plugin 0.20.0."""
    return archive(owner_kind(DEVICE_PLUGIN).chart.name)


def dra_driver() -> Path:
    """dra-driver-nvidia-gpu 0.4.1, the fallback the policy tests' renders and gate tables were written against."""
    return archive(owner_kind(DRA).chart.name, fallback=True)


def dra_driver_pinned() -> Path:
    """dra-driver-nvidia-gpu 0.5.0, the registry's pin."""
    return archive(owner_kind(DRA).chart.name)


def gpu_operator() -> Path:
    """gpu-operator v26.7.0."""
    return archive(owner_kind(GPU_OPERATOR).chart.name)


@functools.cache
def repository() -> Path:
    """A Helm repository folder (index.yaml + the pinned and fallback archives), to serve on loopback."""
    paths = [archive(w.name) for w in PINNED_CHARTS] + [archive(w.name, fallback=True) for w in FALLBACK_CHARTS]
    folders = {p.parent for p in paths}
    if len(folders) == 1 and (next(iter(folders)) / "index.yaml").is_file():
        return next(iter(folders))
    folder = Path(tempfile.mkdtemp(prefix="eks-hybrid-gpu-test-charts-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for path in paths:
        (folder / path.name).symlink_to(path)
    chartfetch.write_index(folder)
    return folder


def folder() -> Path:
    """repository(), for module constants: where ../shared/charts would be when no source has the archives.

    A module that reads it carries the `charts` marker, so its tests fail with the one line before they use it.
    """
    return projectdir.shared_charts() if unavailable() is not None else repository()


@contextmanager
def helm_repository() -> Iterator[str]:
    """repository() served as a Helm repository on 127.0.0.1, the way `review` serves a chart mirror: its URL."""
    from eks_hybrid_gpu.review.render import chart_mirror  # the product's own server, imported when used

    with chart_mirror(repository()) as (url, _index):
        yield url
