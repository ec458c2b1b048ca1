"""The one chart-source chain of `local up`, `review` and the tests: mirror, then ../shared/charts, then upstream.

Each pinned chart archive comes from, in order:
1. an explicit chart mirror (`--chart-mirror DIR` or `EKS_HYBRID_GPU_CHART_MIRROR`), a folder of
   `<chart>-<version>.tgz` archives — when set, it is the only source;
2. `../shared/charts` beside the checkout, when it holds the pinned version;
3. the user cache, where the pinned version is pulled once from the chart's upstream (eks_hybrid_gpu.chartfetch);
4. for a `source: local` stack only, the newest version that ../shared/charts or the cache holds, with a notice.

Every archive's sha256 is compared with the digest pinned next to its version in the owner registry
(policy/gpu_allocation/vocab/owners.py, `ChartPin.sha256` and `fallback`); one
that differs is refused naming both digests, and a version with no known digest is used with a notice that says
so. The caller writes the chosen archives as `charts.<key>` (exact version + archive) into its own work copy of
the stack file, so the program's graph still follows from its config alone. A source that lacks the pinned version
is used with another version only for a `source: local` stack, only with a printed notice naming both versions;
an EKS stack never runs another version than it pins.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.findings import show
from components.config import StackConfig
from eks_hybrid_gpu import chartfetch, projectdir
from policy.gpu_allocation.vocab import versioning
from policy.gpu_allocation.vocab.labels import Owner
from policy.gpu_allocation.vocab.owners import OWNER_KINDS, archive_digests

CHART_MIRROR_ENV = "EKS_HYBRID_GPU_CHART_MIRROR"
MIRROR_FIX = f"pass --chart-mirror DIR (or set {CHART_MIRROR_ENV}=DIR)"
DIGESTS_HOME = "policy/gpu_allocation/vocab/owners.py"
"""Where the pinned archive digests live, as refusals and notices name it."""


@dataclass(frozen=True)
class Chart:
    """One owner chart: its `charts.<key>`, name, pinned version and upstream location."""

    key: str
    owner: Owner
    name: str
    version: str
    upstream: str


CHARTS = tuple(
    Chart(kind.config_key, kind.owner, kind.chart.name, kind.chart.version, kind.chart.upstream)
    for kind in OWNER_KINDS.values()
)
"""Every registered owner's chart, in the registry's order."""
UPSTREAMS = {c.name: c.upstream for c in CHARTS}


class ChartMirrorError(Exception):
    """No usable chart source, or an archive refused; the message says which archives to put where."""


@dataclass(frozen=True)
class Wanted:
    """One archive a caller needs: a chart at its pinned version, and where upstream keeps it."""

    name: str
    version: str
    upstream: str

    @property
    def file(self) -> str:
        """`<chart>-<version>.tgz`, the archive's name in every mirror."""
        return f"{self.name}-{self.version}.tgz"


@dataclass(frozen=True)
class Found:
    """The archive chosen for a wanted chart: its version (the pinned one, or a local fallback) and path."""

    version: str
    archive: Path


@dataclass
class Sources:
    """Chart name -> the archive chosen, and the notices to print."""

    found: dict[str, Found] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


@dataclass
class MirrorChoice:
    """`charts` overrides for the work copy of the stack file, and the notices to print."""

    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def needed(config: StackConfig) -> list[Chart]:
    """The charts of the stack's owners whose source the stack file leaves to the default (upstream)."""
    owners = {c.owner for c in config.cohorts}
    return [chart for chart in CHARTS if chart.owner in owners and config.charts.of(chart.owner).source is None]


def pinned_version(config: StackConfig, chart: Chart) -> str:
    """The stack's version for the chart (its override, else the registry's pin)."""
    pin = config.charts.of(chart.owner)
    return str(pin.version) if pin.version else chart.version


def archives(mirror: Path, chart: str) -> dict[str, Path]:
    """Version -> archive of one chart in a mirror folder (`<chart>-<version>.tgz`)."""
    found = {}
    for path in sorted(mirror.glob(f"{chart}-*.tgz")):
        version = path.name.removeprefix(f"{chart}-").removesuffix(".tgz")
        if version.lstrip("v")[:1].isdigit():
            found[version] = path.resolve()
    return found


def accepted(chart: str, pinned: str, *, local: bool) -> str:
    """What a source must hold for the chart: the pinned archive, and for a local stack any version's, newest first."""
    if not local:
        return f"{chart}-{pinned}.tgz"
    return f"{chart}-{pinned}.tgz (the local stack also takes the newest {chart}-<version>.tgz, with a notice)"


def pick_version(chart: str, pinned: str, available: list[str], *, local: bool) -> tuple[str, str | None]:
    """The version to use from a mirror and the notice to print, or ChartMirrorError.

    The pinned version when the mirror has it. Otherwise, for a local stack only, the mirror's newest version,
    with a notice naming both; an EKS stack is refused.
    """
    if pinned in available:
        return pinned, None
    if not local or not available:
        have = ", ".join(available) or "no version"
        msg = (
            f"the chart mirror has no {chart} {pinned} (it has {have}); add {accepted(chart, pinned, local=local)} "
            "to the mirror"
        )
        raise ChartMirrorError(msg)
    chosen = versioning.newest(available)
    notice = (
        f"notice: the chart mirror has no {chart} {pinned} (the pinned version); the local stack uses {chart} "
        f"{chosen} instead. EKS stacks never do this."
    )
    return chosen, notice


KEEP_FIX = "delete it, or replace it with the released one"
DOWNLOAD_FIX = f"it was not kept; check the upstream repository (or {chartfetch.UPSTREAM_ENV})"


def verify(archive: Path, chart: str, version: str, where: str, fix: str = KEEP_FIX) -> str | None:
    """Refuse an archive whose sha256 differs from the pinned digest; a notice when the version has none."""
    actual = chartfetch.sha256_of(archive)
    pinned = archive_digests().get((chart, version))
    if pinned is None:
        return (
            f"notice: {chart} {version} has no known digest in {DIGESTS_HOME}; {where} has sha256 {actual} "
            "and is used unverified"
        )
    if actual != pinned:
        msg = (
            f"{where} has sha256 {actual}, but {DIGESTS_HOME} pins {chart} {version} to sha256 {pinned}: "
            f"it is not the released archive; {fix}"
        )
        raise ChartMirrorError(msg)
    return None


def _is_folder(path: Path) -> bool:
    """An existing folder; a name the OS refuses (too long, a NUL) is no folder, not a crash."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _from_folder(folder: Path, wanted: Wanted, *, local: bool, sources: Sources) -> bool:
    """Take the wanted chart from a mirror folder (the pinned version, or a local fallback); False if absent."""
    found = archives(folder, wanted.name)
    if not found:
        return False
    if wanted.version not in found and not local:
        return False
    version, notice = pick_version(wanted.name, wanted.version, sorted(found), local=local)
    unverified = verify(found[version], wanted.name, version, str(found[version]))
    sources.found[wanted.name] = Found(version, found[version])
    sources.notices.extend(n for n in (notice, unverified) if n)
    return True


def _from_cache(cache: Path, wanted: Wanted, environ: Mapping[str, str], sources: Sources) -> str | None:
    """The pinned version from the cache, pulled from upstream first if absent; the reason when it cannot be."""
    cached = cache / wanted.file
    notices: list[str] = []

    def check(archive: Path, source: str) -> None:
        downloaded = archive != cached
        where = f"the download {source}" if downloaded else source
        notice = verify(archive, wanted.name, wanted.version, where, DOWNLOAD_FIX if downloaded else KEEP_FIX)
        notices.extend([notice] if notice else [])

    try:
        if cached.is_file():
            check(cached, str(cached))
        else:
            cached = chartfetch.fetch(wanted.name, wanted.version, wanted.upstream, cache, check, environ)
            notices.insert(0, f"notice: pulled {wanted.name} {wanted.version} into the cache {cache}")
    except chartfetch.FetchError as error:
        return str(error)
    sources.found[wanted.name] = Found(wanted.version, cached.resolve())
    sources.notices.extend(notices)
    return None


def keep_in_cache(sources: Sources, cache: Path) -> list[str]:
    """Copy the archives an explicit mirror served into the user cache, so a later run without the mirror finds them.

    Only archives whose sha256 is the digest pinned for their version are kept (`verify` checked them; one with no
    known digest stays out), each written whole or not at all; the cache's index.yaml follows. A cache that cannot
    be written is a notice, not a refusal: this run has its charts.
    """
    kept: list[str] = []
    try:
        for name, found in sorted(sources.found.items()):
            pinned = archive_digests().get((name, found.version))
            target = cache / found.archive.name
            if pinned is None or (target.is_file() and chartfetch.sha256_of(target) == pinned):
                continue
            if chartfetch.sha256_of(found.archive) != pinned:
                continue
            cache.mkdir(parents=True, exist_ok=True)
            partial = cache / f".{target.name}.partial-{os.getpid()}"
            try:
                shutil.copyfile(found.archive, partial)
                partial.replace(target)
            finally:
                partial.unlink(missing_ok=True)
            kept.append(target.name)
        if kept:
            chartfetch.write_index(cache)
    except OSError as error:
        why = error.strerror or error
        return [f"notice: the chart cache {cache} cannot be written ({why}); the mirror serves this run only"]
    return [f"notice: kept {', '.join(kept)} from the chart mirror in the cache {cache}"] if kept else []


def resolve(
    wanted: Sequence[Wanted],
    *,
    local: bool,
    explicit: Path | None = None,
    environ: Mapping[str, str] = os.environ,
    shared: Path | None = None,
    cache: Path | None = None,
    fix: str = MIRROR_FIX,
) -> Sources:
    """The archive of every wanted chart from the chain: explicit mirror, else ../shared/charts, else upstream.

    Raises ChartMirrorError in one line: an archive refused by its digest, an explicit mirror that is no folder or
    lacks an archive, or no source at all (naming the archives it accepts, the variable, `fix` and the folder).
    """
    given = explicit or (Path(environ[CHART_MIRROR_ENV]) if environ.get(CHART_MIRROR_ENV) else None)
    shared = projectdir.shared_charts() if shared is None else shared
    cache = chartfetch.cache_dir(environ) if cache is None else cache
    sources = Sources()
    if given is not None:
        if not _is_folder(given):
            msg = f"the chart mirror {show(str(given))} is not a folder; it holds <chart>-<version>.tgz archives"
            raise ChartMirrorError(msg)
        for chart in wanted:
            if not _from_folder(given, chart, local=local, sources=sources):
                pick_version(chart.name, chart.version, sorted(archives(given, chart.name)), local=local)
        sources.notices.extend(keep_in_cache(sources, cache))
        return sources
    has_shared = _is_folder(shared)
    missing: list[tuple[Wanted, str]] = []
    for chart in wanted:
        if has_shared and (shared / chart.file).is_file():
            _from_folder(shared, chart, local=False, sources=sources)
            continue
        why = _from_cache(cache, chart, environ, sources)
        if why is None:
            continue
        fallbacks = [f for f in (shared, cache) if local and _is_folder(f)]
        if not any(_from_folder(f, chart, local=True, sources=sources) for f in fallbacks):
            missing.append((chart, why))
    if has_shared and any(f.archive.parent == shared.resolve() for f in sources.found.values()):
        sources.notices.insert(0, f"notice: charts come from the mirror {shared}")
    if missing:
        raise ChartMirrorError(refusal(missing, local=local, shared=shared, has_shared=has_shared, fix=fix))
    return sources


def refusal(missing: Sequence[tuple[Wanted, str]], *, local: bool, shared: Path, has_shared: bool, fix: str) -> str:
    """The one line that says no source holds these archives: what it accepts, where each source failed, the fix."""
    names = [w.file for w, _ in missing]
    pinned_pairs = {(w.name, w.version) for w, _ in missing}
    files = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    if local:
        known = [f"{c}-{v}.tgz" for (c, v), d in archive_digests().items() if d and (c, v) not in pinned_pairs]
        known = [k for k in known if any(k.startswith(f"{w.name}-") for w, _ in missing)]
        example = f", such as {' or '.join(known)}" if known else ""
        also = f"the local stack also takes a mirror's newest <chart>-<version>.tgz of each{example}, with a notice"
        files += f" ({also})"
    where_shared = f"{shared} lacks them" if has_shared else f"{shared} does not exist"
    reasons = "; ".join(dict.fromkeys(why for _, why in missing))
    return (
        f"no chart source for {files}: {CHART_MIRROR_ENV} is not set, {where_shared}, and upstream failed "
        f"({reasons}); put them in a folder and {fix}, or in {shared}"
    )


def wanted_of_document(stack_document: Mapping[str, Any]) -> tuple[list[Wanted], bool]:
    """The owner charts a stack file leaves to the default source, at their pinned versions; and if it is local.

    Read from the parsed file without validating it, so a stack with secrets or a change under review still finds
    its charts; the program validates the config itself.
    """
    config = stack_document.get("config") or {}
    charts = config.get("eks-hybrid-gpu:charts") or {}
    owners = {c.get("owner") for c in config.get("eks-hybrid-gpu:cohorts") or [] if isinstance(c, Mapping)}
    source = (config.get("eks-hybrid-gpu:cluster") or {}).get("source", "local")
    wanted = []
    for chart in CHARTS:
        pin = charts.get(chart.key) or {}
        if chart.owner in owners and not pin.get("source"):
            wanted.append(Wanted(chart.name, str(pin.get("version") or chart.version), chart.upstream))
    return wanted, source == "local"


def choose_for_document(
    stack_document: Mapping[str, Any], explicit: Path | None = None, environ: Mapping[str, str] = os.environ
) -> MirrorChoice:
    """`choose` for a stack file read as YAML (`simulate preview|up --stack-file`): the same chain, same overrides."""
    wanted, local = wanted_of_document(stack_document)
    sources = resolve(wanted, local=local, explicit=explicit, environ=environ)
    choice = MirrorChoice(notices=sources.notices)
    keys = {c.name: c.key for c in CHARTS}
    for chart in wanted:
        found = sources.found[chart.name]
        choice.overrides[keys[chart.name]] = {"version": found.version, "source": {"archive": str(found.archive)}}
    return choice


def choose(
    config: StackConfig,
    explicit: Path | None = None,
    environ: Mapping[str, str] = os.environ,
    shared: Path | None = None,
    cache: Path | None = None,
) -> MirrorChoice:
    """The chart source of `local up` for the charts the stack leaves to the default, as `charts` overrides.

    Raises ChartMirrorError (one line: which archives to put where) when the chain cannot serve the charts.
    """
    charts = needed(config)
    wanted = [Wanted(c.name, pinned_version(config, c), c.upstream) for c in charts]
    local = config.cluster.source == "local"
    sources = resolve(wanted, local=local, explicit=explicit, environ=environ, shared=shared, cache=cache)
    choice = MirrorChoice(notices=sources.notices)
    for chart in charts:
        found = sources.found[chart.name]
        choice.overrides[chart.key] = {"version": found.version, "source": {"archive": str(found.archive)}}
    return choice


def mirror_overrides(config: StackConfig, mirror: Path, environ: Mapping[str, str] = os.environ) -> MirrorChoice:
    """`charts.<key>` = exact version + archive from one mirror folder, for every chart the stack needs."""
    return choose(config, mirror, environ={k: v for k, v in environ.items() if k != CHART_MIRROR_ENV})
