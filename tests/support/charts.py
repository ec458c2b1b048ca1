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

from eks_hybrid_gpu import chartfetch
from eks_hybrid_gpu.chartmirror import (
    CHART_MIRROR_ENV,
    SHARED_MIRROR,
    ChartMirrorError,
    Sources,
    Wanted,
    resolve,
)
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner
from policy.gpu_allocation.vocab.owners import OWNER_KINDS, owner_kind

MARKER = "charts"


def _test_version(owner: Owner) -> str:
    """The registry's fallback archive where it has one (DRA: no 0.5.0 archive exists here), else its pin."""
    chart = owner_kind(owner).chart
    return chart.fallback[0] if chart.fallback is not None else chart.version


TEST_CHARTS = tuple(
    Wanted(kind.chart.name, _test_version(owner), kind.chart.upstream) for owner, kind in OWNER_KINDS.items()
)
"""What the tests render: the pinned device plugin and Operator, and DRA 0.4.1 (no 0.5.0 archive exists here)."""
PREFIX = "the chart-rendering tests cannot run: "


@functools.cache
def _resolved() -> Sources | str:
    try:
        return resolve(TEST_CHARTS, local=False, fix=f"set {CHART_MIRROR_ENV}=DIR")
    except ChartMirrorError as error:
        return PREFIX + str(error)


def unavailable() -> str | None:
    """The one line that says why the chart archives cannot be had, or None when every one resolved."""
    resolved = _resolved()
    return resolved if isinstance(resolved, str) else None


def archive(chart: str) -> Path:
    """The verified archive of one test chart; fails the calling test with the one line when there is none."""
    resolved = _resolved()
    if isinstance(resolved, str):
        pytest.fail(resolved, pytrace=False)
    return resolved.found[chart].archive


def device_plugin() -> Path:
    """nvidia-device-plugin 0.20.0."""
    return archive(owner_kind(DEVICE_PLUGIN).chart.name)


def dra_driver() -> Path:
    """dra-driver-nvidia-gpu 0.4.1."""
    return archive(owner_kind(DRA).chart.name)


def gpu_operator() -> Path:
    """gpu-operator v26.7.0."""
    return archive(owner_kind(GPU_OPERATOR).chart.name)


@functools.cache
def repository() -> Path:
    """A Helm repository folder (index.yaml + the three archives), to serve on loopback as a chart mirror."""
    paths = [archive(w.name) for w in TEST_CHARTS]
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
    return SHARED_MIRROR if unavailable() is not None else repository()


@contextmanager
def helm_repository() -> Iterator[str]:
    """repository() served as a Helm repository on 127.0.0.1, the way `review` serves a chart mirror: its URL."""
    from eks_hybrid_gpu.review.render import chart_mirror  # the product's own server, imported when used

    with chart_mirror(repository()) as (url, _index):
        yield url
