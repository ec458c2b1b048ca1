"""Where the local default takes its charts: upstream like the EKS stacks, or a chart mirror folder.

The local stack pins the same charts and sources as the EKS stacks (Helm repository, OCI). Without internet,
a chart mirror — a folder of `<chart>-<version>.tgz` archives, `EKS_HYBRID_GPU_CHART_MIRROR` or
`--chart-mirror` — stands in: the command writes `charts.<key>` (exact version + archive) into its own work
copy of the stack file, so the program's graph still follows from its config alone. A mirror that lacks the
pinned version is used with another version only for a `source: local` stack, and only with a printed
notice naming both versions; an EKS stack never runs another version than it pins.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from components import versions
from components.config import StackConfig, show

CHART_MIRROR_ENV = "EKS_HYBRID_GPU_CHART_MIRROR"
SHARED_MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "charts"
"""The team's mirror beside a checkout (`../shared/charts`); `local up` falls back to it when upstream is down."""
REACH_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True)
class Chart:
    """One owner chart: its `charts.<key>`, name, pinned version and upstream location."""

    key: str
    owner: str
    name: str
    version: str
    upstream: str


CHARTS = (
    Chart(
        "devicePlugin",
        "device-plugin",
        versions.DEVICE_PLUGIN_CHART,
        versions.DEVICE_PLUGIN_VERSION,
        versions.DEVICE_PLUGIN_REPO,
    ),
    Chart("draDriver", "dra", versions.DRA_DRIVER_CHART, versions.DRA_DRIVER_VERSION, versions.DRA_DRIVER_OCI),
    Chart(
        "gpuOperator",
        "gpu-operator",
        versions.GPU_OPERATOR_CHART,
        versions.GPU_OPERATOR_VERSION,
        versions.GPU_OPERATOR_REPO,
    ),
)


class ChartMirrorError(Exception):
    """No usable chart source; the message says which archives to put where."""


@dataclass
class MirrorChoice:
    """`charts` overrides for the work copy of the stack file, and the notices to print."""

    mirror: Path | None
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def needed(config: StackConfig) -> list[Chart]:
    """The charts of the stack's owners whose source the stack file leaves to the default (upstream)."""
    owners = {c.owner for c in config.cohorts}
    pins = config.charts
    chosen = []
    for chart in CHARTS:
        pin = getattr(pins, _attr(chart.key), None)
        if chart.owner in owners and (pin is None or pin.source is None):
            chosen.append(chart)
    return chosen


def _attr(key: str) -> str:
    return {"devicePlugin": "device_plugin", "draDriver": "dra_driver", "gpuOperator": "gpu_operator"}[key]


def pinned_version(config: StackConfig, chart: Chart) -> str:
    """The stack's version for the chart (its override, else the versions module's pin)."""
    pin = getattr(config.charts, _attr(chart.key), None)
    return str(pin.version) if pin is not None and pin.version else chart.version


def archives(mirror: Path, chart: str) -> dict[str, Path]:
    """Version -> archive of one chart in a mirror folder (`<chart>-<version>.tgz`)."""
    found = {}
    for path in sorted(mirror.glob(f"{chart}-*.tgz")):
        version = path.name.removeprefix(f"{chart}-").removesuffix(".tgz")
        if version.lstrip("v")[:1].isdigit():
            found[version] = path.resolve()
    return found


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.lstrip("v").replace("-", ".").split("."))


def pick_version(chart: str, pinned: str, available: list[str], *, local: bool) -> tuple[str, str | None]:
    """The version to use from a mirror and the notice to print, or ChartMirrorError.

    The pinned version when the mirror has it. Otherwise, for a local stack only, the mirror's newest version,
    with a notice naming both; an EKS stack is refused.
    """
    if pinned in available:
        return pinned, None
    if not local or not available:
        have = ", ".join(available) or "no version"
        msg = f"the chart mirror has no {chart} {pinned} (it has {have}); add {chart}-{pinned}.tgz to the mirror"
        raise ChartMirrorError(msg)
    chosen = max(available, key=_version_key)
    notice = (
        f"notice: the chart mirror has no {chart} {pinned} (the pinned version); the local stack uses {chart} "
        f"{chosen} instead. EKS stacks never do this."
    )
    return chosen, notice


def mirror_overrides(config: StackConfig, mirror: Path) -> MirrorChoice:
    """`charts.<key>` = exact version + archive from the mirror, for every chart the stack needs."""
    choice = MirrorChoice(mirror)
    local = config.cluster.source == "local"
    for chart in needed(config):
        found = archives(mirror, chart.name)
        version, notice = pick_version(chart.name, pinned_version(config, chart), sorted(found), local=local)
        choice.overrides[chart.key] = {"version": version, "source": {"archive": str(found[version])}}
        if notice:
            choice.notices.append(notice)
    return choice


def reachable(url: str, timeout: float = REACH_TIMEOUT_SECONDS) -> bool:
    """Whether a TCP connection to the URL's host on 443 opens (the same test for Helm repos and OCI)."""
    host = urlparse(url).hostname
    if not host:
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _is_folder(path: Path) -> bool:
    """An existing folder; a name the OS refuses (too long, a NUL) is no folder, not a crash."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def choose(
    config: StackConfig,
    explicit: Path | None = None,
    environ: Mapping[str, str] = os.environ,
    shared: Path | None = None,
) -> MirrorChoice:
    """The chart source of `local up`: an explicit mirror, else upstream when reachable, else ../shared/charts.

    Raises ChartMirrorError (one line: which archives to put where) when none of them can serve the charts.
    """
    given = explicit or (Path(environ[CHART_MIRROR_ENV]) if environ.get(CHART_MIRROR_ENV) else None)
    shared = SHARED_MIRROR if shared is None else shared
    charts = needed(config)
    if given is not None:
        if not _is_folder(given):
            msg = f"the chart mirror {show(str(given))} is not a folder; it holds <chart>-<version>.tgz archives"
            raise ChartMirrorError(msg)
        return mirror_overrides(config, given)
    unreachable = [c for c in charts if not reachable(c.upstream)]
    if not unreachable:
        return MirrorChoice(None)
    if shared.is_dir():
        choice = mirror_overrides(config, shared)
        hosts = ", ".join(sorted({str(urlparse(c.upstream).hostname) for c in unreachable}))
        choice.notices.insert(0, f"notice: {hosts} cannot be reached; charts come from the mirror {shared}")
        return choice
    wanted = " and ".join(f"{c.name}-{pinned_version(config, c)}.tgz" for c in charts)
    msg = (
        f"no chart source: {', '.join(c.upstream for c in unreachable)} cannot be reached and no chart mirror is set; "
        f"put {wanted} in a folder and pass --chart-mirror DIR (or set {CHART_MIRROR_ENV}=DIR)"
    )
    raise ChartMirrorError(msg)
