"""Reading a chart archive named in the stack config: every way it can be unusable is one refusal with its path."""

from __future__ import annotations

import tarfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from cluster.findings import Problem, show
from policy.gpu_allocation.vocab.grammar import is_exact_version

CHART_YAML_MAX: Final = 1 << 20
"""A Chart.yaml larger than this is not read (a chart's own is a few KiB)."""


class _Unreadable(Exception):
    """Why an archive cannot be used as the chart, in the words of the refusal."""


def _chart_yaml(archive: Path) -> Mapping[str, Any]:
    """The archive's top-level Chart.yaml as a mapping, or _Unreadable saying what is wrong."""
    not_helm = "is not a Helm chart archive ({why}): use the .tgz that `helm package` writes"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")]
            if not members:
                raise _Unreadable(not_helm.format(why="no <chart>/Chart.yaml inside"))
            member = members[0]
            if not member.isfile():
                raise _Unreadable(not_helm.format(why=f"{member.name} is a link or folder, not a file"))
            if member.size > CHART_YAML_MAX:
                raise _Unreadable(not_helm.format(why=f"{member.name} is larger than 1 MiB"))
            handle = tar.extractfile(member)
            text = handle.read() if handle is not None else b""
    except (tarfile.TarError, EOFError, OSError, zlib.error, KeyError) as error:
        why = "truncated" if isinstance(error, EOFError) else "not a readable gzip tar"
        raise _Unreadable(not_helm.format(why=why)) from None
    try:
        chart = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError, ValueError):
        raise _Unreadable(not_helm.format(why="its Chart.yaml is not valid YAML")) from None
    if not isinstance(chart, Mapping) or not chart:
        raise _Unreadable(not_helm.format(why="its Chart.yaml is empty or not a mapping"))
    return chart


def chart_metadata(archive: Path) -> Mapping[str, Any]:
    """The archive's top-level Chart.yaml (for a mirror's index.yaml); ValueError saying why it is no chart."""
    try:
        return _chart_yaml(archive)
    except _Unreadable as error:
        msg = f"{archive} {error}"
        raise ValueError(msg) from None


def archive_problems(path: str, project_dir: Path, relative: str, version: str, chart_name: str) -> Iterable[Problem]:
    """The problems of the archive at `relative` (config path `path`): unreadable, or not `chart_name` at `version`."""
    try:
        archive = (project_dir / relative).resolve()
        usable = archive.is_file()
    except (OSError, ValueError, RuntimeError):
        yield Problem(path, "cannot be opened (the path is too long or malformed): point it at the chart's .tgz")
        return
    if not usable:
        what = "is not a file" if archive.exists() else "does not exist"
        yield Problem(path, f"{archive} {what}: point it at the chart's .tgz")
        return
    try:
        chart = _chart_yaml(archive)
    except _Unreadable as error:
        yield Problem(path, f"{archive} {error}")
        return
    found_name, found_version = chart.get("name"), chart.get("version")
    if found_name != chart_name:
        yield Problem(
            path,
            f"{archive} holds chart {show(found_name)}, not {chart_name}: use the archive of {chart_name}",
        )
    if str(found_version) != version:
        yield Problem(
            path,
            f"{archive} holds version {found_version if is_exact_version(found_version) else show(found_version)}"
            f", but the pinned version is {version}: pin the archive's version or use the archive of the pinned "
            "version",
        )
