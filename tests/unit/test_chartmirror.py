"""Where `local up` takes its charts: upstream, an explicit mirror, ../shared/charts, or a one-line refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.config import StackConfig
from eks_hybrid_gpu import chartmirror, local

pytestmark = pytest.mark.unit


@pytest.fixture
def config() -> StackConfig:
    return local.stack_config("local")


def _mirror(folder: Path, *archives: str) -> Path:
    folder.mkdir()
    for name in archives:
        (folder / name).write_bytes(b"")
    return folder


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chartmirror, "reachable", lambda _url: False)


def test_the_local_stack_names_no_chart_source(config: StackConfig) -> None:
    assert [c.key for c in chartmirror.needed(config)] == ["devicePlugin", "draDriver"]
    assert chartmirror.pinned_version(config, chartmirror.CHARTS[1]) == "0.5.0"


def test_upstream_reachable_means_no_override(config: StackConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chartmirror, "reachable", lambda _url: True)
    choice = chartmirror.choose(config, environ={}, shared=Path("/nonexistent"))
    assert choice.mirror is None
    assert choice.overrides == {}


@pytest.mark.usefixtures("offline")
def test_explicit_mirror_with_the_pinned_versions(config: StackConfig, tmp_path: Path) -> None:
    mirror = _mirror(tmp_path / "m", "nvidia-device-plugin-0.20.0.tgz", "dra-driver-nvidia-gpu-0.5.0.tgz")
    choice = chartmirror.choose(config, mirror, environ={})
    assert choice.overrides == {
        "devicePlugin": {"version": "0.20.0", "source": {"archive": str(mirror / "nvidia-device-plugin-0.20.0.tgz")}},
        "draDriver": {"version": "0.5.0", "source": {"archive": str(mirror / "dra-driver-nvidia-gpu-0.5.0.tgz")}},
    }
    assert choice.notices == []


@pytest.mark.usefixtures("offline")
def test_mirror_from_the_environment_falls_back_with_a_notice_naming_both_versions(
    config: StackConfig, tmp_path: Path
) -> None:
    mirror = _mirror(tmp_path / "m", "nvidia-device-plugin-0.20.0.tgz", "dra-driver-nvidia-gpu-0.4.1.tgz")
    choice = chartmirror.choose(config, environ={chartmirror.CHART_MIRROR_ENV: str(mirror)})
    assert choice.overrides["draDriver"]["version"] == "0.4.1"
    assert choice.notices == [
        "notice: the chart mirror has no dra-driver-nvidia-gpu 0.5.0 (the pinned version); the local stack uses "
        "dra-driver-nvidia-gpu 0.4.1 instead. EKS stacks never do this."
    ]


def test_an_eks_stack_never_runs_another_version() -> None:
    with pytest.raises(chartmirror.ChartMirrorError, match=r"no dra-driver-nvidia-gpu 0\.5\.0 \(it has 0\.4\.1\)"):
        chartmirror.pick_version("dra-driver-nvidia-gpu", "0.5.0", ["0.4.1"], local=False)


@pytest.mark.usefixtures("offline")
def test_offline_without_a_mirror_uses_shared_charts(config: StackConfig, tmp_path: Path) -> None:
    shared = _mirror(tmp_path / "charts", "nvidia-device-plugin-0.20.0.tgz", "dra-driver-nvidia-gpu-0.4.1.tgz")
    choice = chartmirror.choose(config, environ={}, shared=shared)
    assert choice.mirror == shared
    assert choice.notices[0] == (
        f"notice: nvidia.github.io, registry.k8s.io cannot be reached; charts come from the mirror {shared}"
    )


@pytest.mark.usefixtures("offline")
def test_offline_without_any_mirror_is_refused_in_one_line(config: StackConfig, tmp_path: Path) -> None:
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.choose(config, environ={}, shared=tmp_path / "absent")
    message = str(refused.value)
    assert "\n" not in message
    assert "put nvidia-device-plugin-0.20.0.tgz and dra-driver-nvidia-gpu-0.5.0.tgz in a folder" in message
    assert "--chart-mirror DIR" in message
    assert chartmirror.CHART_MIRROR_ENV in message


@pytest.mark.parametrize("given", ["x" * 300, "mirror\n", "a\0b", "/etc/hostname"])
def test_a_mirror_that_is_no_folder_is_refused_in_one_line(config: StackConfig, given: str) -> None:
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.choose(config, Path(given), environ={})
    message = str(refused.value)
    assert "\n" not in message
    assert "\0" not in message
    assert message.endswith("is not a folder; it holds <chart>-<version>.tgz archives")


def test_local_up_refuses_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(chartmirror, "reachable", lambda _url: False)
    monkeypatch.setattr(chartmirror, "SHARED_MIRROR", tmp_path / "absent")
    monkeypatch.delenv(chartmirror.CHART_MIRROR_ENV, raising=False)
    monkeypatch.setattr(local.engine, "ensure_toolchain", lambda: pytest.fail("nothing may start"))
    assert local.main(["up"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("local up: no chart source: ")
    assert err.count("\n") == 1


def test_the_mirror_goes_into_the_engine_work_copy_only(tmp_path: Path) -> None:
    from eks_hybrid_gpu import engine

    env = engine.EngineEnv(tmp_path, engine.Toolchain((), tmp_path / "provider"), tmp_path / "kubeconfig")
    archive = {"version": "0.4.1", "source": {"archive": "/m/dra-driver-nvidia-gpu-0.4.1.tgz"}}
    work = engine._work_copy(env, "local", engine.ROOT, {"draDriver": archive})
    import yaml

    copied = yaml.safe_load((work / "stacks" / "Pulumi.local.yaml").read_text())
    assert copied["config"]["eks-hybrid-gpu:charts"] == {"draDriver": archive}
    repository = yaml.safe_load((engine.ROOT / "stacks" / "Pulumi.local.yaml").read_text())
    assert "eks-hybrid-gpu:charts" not in repository["config"]
