"""`simulate preview|up` take their charts from the one chain of `local up`: flag, variable, shared, cache."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu import chartfetch, chartmirror, engine, localcluster, projectdir
from eks_hybrid_gpu.simulate import cli as simulate
from tests.support import charts

pytestmark = pytest.mark.unit


class FakeStack:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def preview(self, **_: Any) -> None:
        self.calls.append("preview")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No mirror, no ../shared/charts, an upstream nothing listens on, an empty cache; returns the cache root."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setattr(projectdir, "shared_charts", lambda project=None: tmp_path / "absent")
    monkeypatch.delenv(chartmirror.CHART_MIRROR_ENV, raising=False)
    monkeypatch.setenv(chartfetch.UPSTREAM_ENV, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("EKS_HYBRID_GPU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def engine_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The simulated cluster attached and the engine stubbed: what `engine.stack` was given."""
    seen: dict[str, Any] = {"stack": FakeStack()}
    monkeypatch.setattr(localcluster, "attach", lambda _: type("C", (), {"kubeconfig": Path("/k")})())
    monkeypatch.setattr(engine, "prepare", lambda *_: "env")

    def stack(env: str, name: str, work_dir: Path, charts: Any = None) -> FakeStack:
        seen.update(name=name, charts=charts, work_dir=work_dir)
        return seen["stack"]  # type: ignore[no-any-return]

    monkeypatch.setattr(engine, "stack", stack)
    monkeypatch.setattr(engine, "policy_packs", list)
    return seen


def _mirror(folder: Path) -> Path:
    folder.mkdir()
    for archive in (charts.device_plugin(), charts.dra_driver_pinned()):
        shutil.copyfile(archive, folder / archive.name)
    return folder


def test_offline_without_a_chart_source_refuses_in_one_line_before_the_cluster(
    offline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(localcluster, "attach", lambda _: pytest.fail("the cluster may not be touched"))
    assert simulate.main(["preview", "--stack", "local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simulate preview: no chart source for nvidia-device-plugin-0.20.0.tgz and ")
    assert err.endswith("or in " + str(offline.parent / "absent") + "\n")
    assert err.count("\n") == 1


@pytest.mark.charts
@pytest.mark.parametrize("how", ["flag", "variable"])
def test_preview_installs_from_the_mirror_of_the_flag_or_the_variable(
    how: str,
    offline: Path,
    engine_calls: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mirror = _mirror(tmp_path / "mirror")
    argv = ["preview", "--stack", "local"]
    if how == "flag":
        argv += ["--chart-mirror", str(mirror)]
    else:
        monkeypatch.setenv(chartmirror.CHART_MIRROR_ENV, str(mirror))
    assert simulate.main(argv) == 0
    assert engine_calls["charts"] == {
        "devicePlugin": {"version": "0.20.0", "source": {"archive": str(mirror / "nvidia-device-plugin-0.20.0.tgz")}},
        "draDriver": {"version": "0.5.0", "source": {"archive": str(mirror / "dra-driver-nvidia-gpu-0.5.0.tgz")}},
    }
    assert engine_calls["stack"].calls == ["preview"]
    assert capsys.readouterr().err.startswith("notice: kept dra-driver-nvidia-gpu-0.5.0.tgz, nvidia-device-plugin")
    # The archives are now in the cache: a plain preview offline finds them there.
    monkeypatch.delenv(chartmirror.CHART_MIRROR_ENV, raising=False)
    assert simulate.main(["preview", "--stack", "local"]) == 0
    assert engine_calls["charts"]["draDriver"]["source"] == {
        "archive": str(offline / "charts" / "dra-driver-nvidia-gpu-0.5.0.tgz")
    }


def test_an_unknown_stack_is_named_with_the_stacks_there_are(offline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate.main(["preview", "--stack", "nope"]) == 2  # a usage error, as argparse exits on one
    err = capsys.readouterr().err
    assert err.startswith("simulate preview: --stack nope: ")
    assert "is not a file; name a stack of stacks/ (" in err
    assert "local" in err
