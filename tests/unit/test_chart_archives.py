"""Every way a chart archive can be unusable is one refusal naming the config path and the archive: no crash."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from tests.support.configs import Recorder, RunProgram, _base_config

pytestmark = pytest.mark.unit

PATH = "eks-hybrid-gpu:charts.devicePlugin.source.archive"
HELM = "use the .tgz that `helm package` writes"
GOOD_CHART = b"apiVersion: v2\nname: nvidia-device-plugin\nversion: 0.20.0\n"


def _tgz(target: Path, members: dict[str, bytes | str]) -> Path:
    """A gzip tar with regular files (bytes) and symlinks (str: the link target)."""
    with tarfile.open(target, "w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, str):
                info.type = tarfile.SYMTYPE
                info.linkname = content
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return target


def _chart(content: bytes) -> Callable[[Path], Path]:
    return lambda folder: _tgz(folder / "chart.tgz", {"nvidia-device-plugin/Chart.yaml": content})


def _truncated(folder: Path) -> Path:
    whole = _tgz(folder / "whole.tgz", {"nvidia-device-plugin/Chart.yaml": GOOD_CHART * 400}).read_bytes()
    target = folder / "chart.tgz"
    target.write_bytes(whole[: len(whole) // 2])
    return target


def _not_gzip(folder: Path) -> Path:
    target = folder / "chart.tgz"
    target.write_text("<html>404 Not Found</html>\n")
    return target


def _folder(folder: Path) -> Path:
    target = folder / "chart.tgz"
    target.mkdir()
    return target


def _deep(folder: Path) -> Path:
    return _chart(b"[" * 5000 + b"]" * 5000)(folder)


CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("not-gzip", _not_gzip, "is not a Helm chart archive (not a readable gzip tar): " + HELM),
    ("truncated", _truncated, "is not a Helm chart archive (truncated): " + HELM),
    (
        "no-chart-yaml",
        lambda f: _tgz(f / "chart.tgz", {"nvidia-device-plugin/values.yaml": b"a: 1\n"}),
        "is not a Helm chart archive (no <chart>/Chart.yaml inside): " + HELM,
    ),
    (
        "empty-chart-yaml",
        _chart(b""),
        "is not a Helm chart archive (its Chart.yaml is empty or not a mapping): " + HELM,
    ),
    (
        "list-chart-yaml",
        _chart(b"- name\n- version\n"),
        "is not a Helm chart archive (its Chart.yaml is empty or not a mapping): " + HELM,
    ),
    (
        "scalar-chart-yaml",
        _chart(b"just text\n"),
        "is not a Helm chart archive (its Chart.yaml is empty or not a mapping): " + HELM,
    ),
    (
        "invalid-yaml",
        _chart(b"name: [unclosed\n"),
        "is not a Helm chart archive (its Chart.yaml is not valid YAML): " + HELM,
    ),
    ("deeply-nested-yaml", _deep, "is not a Helm chart archive (its Chart.yaml is not valid YAML): " + HELM),
    (
        "symlinked-chart-yaml",
        lambda f: _tgz(f / "chart.tgz", {"nvidia-device-plugin/Chart.yaml": "../../etc/passwd"}),
        "is not a Helm chart archive (nvidia-device-plugin/Chart.yaml is a link or folder, not a file): " + HELM,
    ),
    (
        "wrong-chart-name",
        _chart(b"name: gpu-operator\nversion: 0.20.0\n"),
        "holds chart 'gpu-operator', not nvidia-device-plugin: use the archive of nvidia-device-plugin",
    ),
    (
        "wrong-version",
        _chart(b"name: nvidia-device-plugin\nversion: 0.17.1\n"),
        "holds version 0.17.1, but the pinned version is 0.20.0: pin the archive's version or use the archive of "
        "the pinned version",
    ),
    ("a-folder", _folder, "is not a file: point it at the chart's .tgz"),
]


def _config(archive: str) -> dict[str, Any]:
    return _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"archive": archive}}})


@pytest.mark.parametrize(("make", "problem"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unusable_archive_is_one_refusal(tmp_path: Path, make: Callable[[Path], Path], problem: str) -> None:
    archive = make(tmp_path)

    with pytest.raises(StackConfigError) as caught:
        load_stack_config(_config(archive.name), tmp_path)

    assert [str(p) for p in caught.value.problems] == [f"{PATH}: {archive.resolve()} {problem}"]


@pytest.mark.parametrize(
    ("make", "problem"), [c[1:] for c in CASES if c[0] in {"truncated", "symlinked-chart-yaml", "list-chart-yaml"}]
)
def test_unusable_archive_registers_nothing(
    run: RunProgram, tmp_path: Path, make: Callable[[Path], Path], problem: str
) -> None:
    archive = make(tmp_path)
    recorder = Recorder()

    with pytest.raises(pulumi.RunError) as caught:
        run(_config(str(archive)), recorder=recorder)

    assert str(caught.value).splitlines()[1:] == [f"  - {PATH}: {archive.resolve()} {problem}"]
    assert recorder.registrations == []


def test_missing_archive_names_the_resolved_path(tmp_path: Path) -> None:
    with pytest.raises(StackConfigError) as caught:
        load_stack_config(_config("charts/none.tgz"), tmp_path)

    assert [str(p) for p in caught.value.problems] == [
        f"{PATH}: {tmp_path / 'charts/none.tgz'} does not exist: point it at the chart's .tgz"
    ]


def test_archive_of_the_pinned_chart_is_accepted(tmp_path: Path) -> None:
    archive = _chart(GOOD_CHART)(tmp_path)

    config = load_stack_config(_config(archive.name), tmp_path)

    assert config.charts.device_plugin.source is not None
    assert config.charts.device_plugin.source.archive == "chart.tgz"
