"""The chart-source chain of `local up`, `review` and the tests: explicit mirror, ../shared/charts, upstream.

Upstream is played by a Helm repository served on 127.0.0.1 (`EKS_HYBRID_GPU_CHART_UPSTREAM`); "offline" is a
loopback port nothing listens on. The archives are the real pinned ones (tests/support/charts.py), copied.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.config import StackConfig
from eks_hybrid_gpu import chartfetch, chartmirror, local, projectdir
from eks_hybrid_gpu.review.render import chart_mirror
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA
from policy.gpu_allocation.vocab.owners import archive_digests, owner_kind
from tests.policy.helm import template
from tests.support import charts
from tests.support.forward_proxy import forward_proxy

pytestmark = pytest.mark.unit

PLUGIN = "nvidia-device-plugin-0.20.0.tgz"
DRA_041 = "dra-driver-nvidia-gpu-0.4.1.tgz"
DRA_PINNED = "dra-driver-nvidia-gpu-0.5.0.tgz"
PLUGIN_SHA256 = owner_kind(DEVICE_PLUGIN).chart.sha256
DRA_OCI = owner_kind(DRA).chart.upstream
FALLBACK_NOTICE = (
    "notice: the chart mirror has no dra-driver-nvidia-gpu 0.5.0 (the pinned version); the local stack uses "
    "dra-driver-nvidia-gpu 0.4.1 instead. EKS stacks never do this."
)


@pytest.fixture
def config() -> StackConfig:
    return local.stack_config("local")


@pytest.fixture
def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def offline(dead_port: int, tmp_path: Path) -> dict[str, str]:
    """An environment whose upstream cannot be reached and whose cache is empty."""
    return {chartfetch.UPSTREAM_ENV: f"http://127.0.0.1:{dead_port}", "EKS_HYBRID_GPU_CACHE": str(tmp_path / "c")}


def _mirror(folder: Path, *names: str) -> Path:
    """A folder holding copies of the real archives named (a name with no test archive gets junk bytes)."""
    folder.mkdir(parents=True)
    archives = (charts.device_plugin(), charts.dra_driver(), charts.dra_driver_pinned(), charts.gpu_operator())
    real = {p.name: p for p in archives} if names else {}
    for name in names:
        if name in real:
            shutil.copyfile(real[name], folder / name)
        else:
            (folder / name).write_bytes(b"not the released archive")
    return folder


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The pinned archives served as a Helm repository on 127.0.0.1, standing in for every chart's upstream."""
    folder = _mirror(tmp_path / "upstream", PLUGIN, DRA_041, DRA_PINNED, "gpu-operator-v26.7.0.tgz")
    chartfetch.write_index(folder)
    with chart_mirror(folder) as (url, _index):
        yield url, folder


def test_the_local_stack_names_no_chart_source(config: StackConfig) -> None:
    assert [c.key for c in chartmirror.needed(config)] == ["devicePlugin", "draDriver"]
    assert chartmirror.pinned_version(config, chartmirror.CHARTS[1]) == "0.5.0"


def test_every_shared_archive_has_its_digest_pinned_dra_0_5_0_included() -> None:
    assert archive_digests() == {
        ("nvidia-device-plugin", "0.20.0"): "8b491b92ec7f3b7c0a806eedff27e36247b1dd986fbf91402776faa5a4d07c7e",
        ("dra-driver-nvidia-gpu", "0.5.0"): "7cd6bef64c0df8358c0bc2756c2e9fe58e563e3b11e72a6f1acfe5f375f31a34",
        ("dra-driver-nvidia-gpu", "0.4.1"): "ff2d7edadb62a84aa4da7526033b7e4d7e494965ee75f3f80a344c052c2aaa8e",
        ("gpu-operator", "v26.7.0"): "2d1fea13dae16c215a46242a830aa03a5bbfc377693c628bb0c50853375ae20c",
    }


@pytest.mark.charts
def test_explicit_mirror_with_the_pinned_versions_is_also_kept_in_the_cache(
    config: StackConfig, tmp_path: Path, offline: dict[str, str]
) -> None:
    mirror = _mirror(tmp_path / "m", PLUGIN, DRA_PINNED)
    cache = Path(offline["EKS_HYBRID_GPU_CACHE"]) / "charts"
    choice = chartmirror.choose(config, mirror, environ=offline)
    assert choice.overrides == {
        "devicePlugin": {"version": "0.20.0", "source": {"archive": str(mirror / PLUGIN)}},
        "draDriver": {"version": "0.5.0", "source": {"archive": str(mirror / DRA_PINNED)}},
    }
    assert choice.notices == [f"notice: kept {DRA_PINNED}, {PLUGIN} from the chart mirror in the cache {cache}"]
    assert {p.name: chartfetch.sha256_of(p) for p in cache.glob("*.tgz")} == {
        PLUGIN: PLUGIN_SHA256,
        DRA_PINNED: owner_kind(DRA).chart.sha256,
    }
    assert sorted(chartfetch.index_document(cache)["entries"]) == ["dra-driver-nvidia-gpu", "nvidia-device-plugin"]
    # The next run has no mirror and no upstream: the cache serves it, and nothing is copied twice.
    later = chartmirror.choose(config, environ=offline, shared=tmp_path / "absent")
    assert later.overrides["draDriver"] == {"version": "0.5.0", "source": {"archive": str(cache / DRA_PINNED)}}
    assert later.notices == []
    assert chartmirror.choose(config, mirror, environ=offline).notices == []


@pytest.mark.charts
def test_a_mirror_archive_without_a_pinned_digest_is_not_kept_in_the_cache(
    tmp_path: Path, offline: dict[str, str]
) -> None:
    mirror = _mirror(tmp_path / "m", PLUGIN)
    shutil.copyfile(mirror / PLUGIN, mirror / "nvidia-device-plugin-0.21.0.tgz")
    cache = Path(offline["EKS_HYBRID_GPU_CACHE"]) / "charts"
    wanted = chartmirror.Wanted("nvidia-device-plugin", "0.21.0", "https://nvidia.github.io/k8s-device-plugin")
    sources = chartmirror.resolve([wanted], local=False, explicit=mirror, environ=offline)
    assert sources.notices[0].startswith("notice: nvidia-device-plugin 0.21.0 has no known digest")
    assert len(sources.notices) == 1
    assert not cache.exists()


@pytest.mark.charts
def test_a_cache_that_cannot_be_written_is_a_notice(config: StackConfig, tmp_path: Path) -> None:
    mirror = _mirror(tmp_path / "m", PLUGIN, DRA_PINNED)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    choice = chartmirror.choose(config, mirror, environ={"EKS_HYBRID_GPU_CACHE": str(blocked)})
    assert choice.overrides["devicePlugin"]["source"] == {"archive": str(mirror / PLUGIN)}
    assert len(choice.notices) == 1
    assert choice.notices[0].startswith(f"notice: the chart cache {blocked / 'charts'} cannot be written (")
    assert choice.notices[0].endswith("); the mirror serves this run only")


@pytest.mark.charts
def test_mirror_from_the_environment_falls_back_with_a_notice_naming_both_versions(
    config: StackConfig, tmp_path: Path
) -> None:
    mirror = _mirror(tmp_path / "m", PLUGIN, DRA_041)
    cache = tmp_path / "cache"
    environ = {chartmirror.CHART_MIRROR_ENV: str(mirror), "EKS_HYBRID_GPU_CACHE": str(cache)}
    choice = chartmirror.choose(config, environ=environ)
    assert choice.overrides["draDriver"] == {"version": "0.4.1", "source": {"archive": str(mirror / DRA_041)}}
    assert choice.notices == [
        FALLBACK_NOTICE,
        f"notice: kept {DRA_041}, {PLUGIN} from the chart mirror in the cache {cache / 'charts'}",
    ]


@pytest.mark.charts
def test_a_tampered_mirror_archive_is_refused_naming_both_digests(config: StackConfig, tmp_path: Path) -> None:
    mirror = _mirror(tmp_path / "m", PLUGIN, DRA_041)
    (mirror / PLUGIN).write_bytes((mirror / PLUGIN).read_bytes() + b"\0")
    tampered = chartfetch.sha256_of(mirror / PLUGIN)
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.choose(config, mirror, environ={"EKS_HYBRID_GPU_CACHE": str(tmp_path / "cache")})
    assert not (tmp_path / "cache").exists()
    assert str(refused.value) == (
        f"{mirror / PLUGIN} has sha256 {tampered}, but policy/gpu_allocation/vocab/owners.py pins "
        f"nvidia-device-plugin 0.20.0 to sha256 {PLUGIN_SHA256}: it is not the released archive; delete it, or "
        "replace it with the released one"
    )


def test_an_eks_stack_never_runs_another_version() -> None:
    with pytest.raises(chartmirror.ChartMirrorError, match=r"no dra-driver-nvidia-gpu 0\.5\.0 \(it has 0\.4\.1\)"):
        chartmirror.pick_version("dra-driver-nvidia-gpu", "0.5.0", ["0.4.1"], local=False)


@pytest.mark.charts
def test_without_a_mirror_shared_charts_come_first(
    config: StackConfig, tmp_path: Path, offline: dict[str, str]
) -> None:
    shared = _mirror(tmp_path / "charts", PLUGIN, DRA_041)
    choice = chartmirror.choose(config, environ=offline, shared=shared)
    assert choice.overrides["devicePlugin"]["source"] == {"archive": str(shared / PLUGIN)}
    assert choice.overrides["draDriver"]["version"] == "0.4.1"
    assert choice.notices == [f"notice: charts come from the mirror {shared}", FALLBACK_NOTICE]


@pytest.mark.charts
def test_upstream_pulls_the_pinned_archives_once_into_the_cache_and_they_render(
    upstream: tuple[str, Path], tmp_path: Path
) -> None:
    url, _folder = upstream
    cache = tmp_path / "cache"
    environ = {chartfetch.UPSTREAM_ENV: url}
    sources = chartmirror.resolve(
        charts.PINNED_CHARTS, local=False, environ=environ, shared=tmp_path / "no-shared", cache=cache
    )
    assert {name: found.archive for name, found in sources.found.items()} == {
        w.name: (cache / w.file).resolve() for w in charts.PINNED_CHARTS
    }
    assert sources.notices == [
        f"notice: pulled {w.name} {w.version} into the cache {cache}" for w in charts.PINNED_CHARTS
    ]
    rendered = template("hybrid-gpu-plugin", sources.found["nvidia-device-plugin"].archive, "gpu-system", {})
    assert ("DaemonSet", "hybrid-gpu-plugin-nvidia-device-plugin") in {
        (d["kind"], d["metadata"]["name"]) for d in rendered
    }
    index = chartfetch.index_document(cache)
    assert sorted(index["entries"]) == ["dra-driver-nvidia-gpu", "gpu-operator", "nvidia-device-plugin"]
    again = chartmirror.resolve(
        charts.PINNED_CHARTS,
        local=False,
        environ={chartfetch.UPSTREAM_ENV: "http://127.0.0.1:1"},
        shared=tmp_path / "no-shared",
        cache=cache,
    )
    assert again.notices == []
    assert again.found == sources.found


@pytest.mark.charts
def test_behind_a_proxy_the_pinned_archives_are_pulled_through_it(upstream: tuple[str, Path], tmp_path: Path) -> None:
    """The upstream is a name only the proxy resolves: the proxy must see every request of the chain's download."""
    url, _folder = upstream
    port = int(url.rsplit(":", 1)[1])
    behind = f"http://charts.corp.test:{port}"
    with forward_proxy({"charts.corp.test": port}) as (proxy, seen):
        sources = chartmirror.resolve(
            charts.PINNED_CHARTS,
            local=False,
            environ={chartfetch.UPSTREAM_ENV: behind, "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy},
            shared=tmp_path / "no-shared",
            cache=tmp_path / "cache",
        )
    assert sorted(sources.found) == sorted(w.name for w in charts.PINNED_CHARTS)
    assert seen.requests == [
        line for w in charts.PINNED_CHARTS for line in (f"GET {behind}/index.yaml", f"GET {behind}/{w.file}")
    ]


@pytest.mark.charts
def test_a_tampered_upstream_archive_is_refused_naming_both_digests_and_not_cached(
    upstream: tuple[str, Path], tmp_path: Path
) -> None:
    url, folder = upstream
    (folder / PLUGIN).write_bytes((folder / PLUGIN).read_bytes() + b"tampered")
    tampered = chartfetch.sha256_of(folder / PLUGIN)
    cache = tmp_path / "cache"
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.resolve(
            charts.PINNED_CHARTS[:1],
            local=False,
            environ={chartfetch.UPSTREAM_ENV: url},
            shared=tmp_path / "no-shared",
            cache=cache,
        )
    assert str(refused.value) == (
        f"the download {url}/{PLUGIN} has sha256 {tampered}, but policy/gpu_allocation/vocab/owners.py pins "
        f"nvidia-device-plugin 0.20.0 to sha256 {PLUGIN_SHA256}: it is not the released archive; it was not kept; "
        "check the upstream repository (or EKS_HYBRID_GPU_CHART_UPSTREAM)"
    )
    assert list(cache.glob("*.tgz")) == []


@pytest.mark.charts
def test_an_upstream_that_lacks_the_version_says_so(upstream: tuple[str, Path], tmp_path: Path) -> None:
    url, folder = upstream
    (folder / DRA_PINNED).unlink()
    chartfetch.write_index(folder)
    wanted = chartmirror.Wanted("dra-driver-nvidia-gpu", "0.5.0", DRA_OCI)
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.resolve(
            [wanted],
            local=False,
            environ={chartfetch.UPSTREAM_ENV: url},
            shared=tmp_path / "no-shared",
            cache=tmp_path / "cache",
        )
    assert f"upstream failed ({url}/index.yaml lists no dra-driver-nvidia-gpu 0.5.0)" in str(refused.value)


def test_offline_without_any_mirror_is_refused_in_one_line_naming_what_it_accepts(
    config: StackConfig, tmp_path: Path, offline: dict[str, str]
) -> None:
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.choose(config, environ=offline, shared=tmp_path / "absent")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(
        "no chart source for nvidia-device-plugin-0.20.0.tgz and dra-driver-nvidia-gpu-0.5.0.tgz (the local stack "
        "also takes a mirror's newest <chart>-<version>.tgz of each, such as dra-driver-nvidia-gpu-0.4.1.tgz, with a "
        "notice): EKS_HYBRID_GPU_CHART_MIRROR is "
        f"not set, {tmp_path / 'absent'} does not exist, and upstream failed ("
    )
    assert message.endswith(
        f"put them in a folder and pass --chart-mirror DIR (or set EKS_HYBRID_GPU_CHART_MIRROR=DIR), or in "
        f"{tmp_path / 'absent'}"
    )


def test_an_eks_stack_is_refused_naming_the_pinned_archive_only(tmp_path: Path, offline: dict[str, str]) -> None:
    wanted = chartmirror.Wanted("dra-driver-nvidia-gpu", "0.5.0", DRA_OCI)
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.resolve([wanted], local=False, environ=offline, shared=tmp_path / "absent")
    assert str(refused.value).startswith("no chart source for dra-driver-nvidia-gpu-0.5.0.tgz: ")


@pytest.mark.parametrize("given", ["x" * 300, "mirror\n", "a\0b", "/etc/hostname"])
def test_a_mirror_that_is_no_folder_is_refused_in_one_line(config: StackConfig, given: str) -> None:
    with pytest.raises(chartmirror.ChartMirrorError) as refused:
        chartmirror.choose(config, Path(given), environ={})
    message = str(refused.value)
    assert "\n" not in message
    assert "\0" not in message
    assert message.endswith("is not a folder; it holds <chart>-<version>.tgz archives")


def test_local_up_refuses_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, offline: dict[str, str]
) -> None:
    monkeypatch.setattr(projectdir, "shared_charts", lambda project=None: tmp_path / "absent")
    monkeypatch.delenv(chartmirror.CHART_MIRROR_ENV, raising=False)
    for key, value in offline.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(local.engine, "ensure_toolchain", lambda: pytest.fail("nothing may start"))
    assert local.main(["up", "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("local up: no chart source for nvidia-device-plugin-0.20.0.tgz and ")
    assert err.count("\n") == 1


def test_the_mirror_goes_into_the_engine_work_copy_only(tmp_path: Path) -> None:
    from eks_hybrid_gpu import engine

    env = engine.EngineEnv(tmp_path, engine.Toolchain((), tmp_path / "provider"), tmp_path / "kubeconfig")
    archive = {"version": "0.4.1", "source": {"archive": "/m/dra-driver-nvidia-gpu-0.4.1.tgz"}}
    work = engine._work_copy(env, "local", projectdir.SHIPPED, {"draDriver": archive})
    import yaml

    copied = yaml.safe_load((work / "stacks" / "Pulumi.local.yaml").read_text())
    assert copied["config"]["eks-hybrid-gpu:charts"] == {"draDriver": archive}
    repository = yaml.safe_load((projectdir.SHIPPED / "stacks" / "Pulumi.local.yaml").read_text())
    assert "eks-hybrid-gpu:charts" not in repository["config"]


@pytest.mark.charts
def test_the_review_serves_shared_charts_and_the_cache_as_one_repository(
    tmp_path: Path, offline: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from eks_hybrid_gpu.review.render import chart_repository

    shared = _mirror(tmp_path / "shared", PLUGIN, DRA_041)
    cache = _mirror(Path(offline["EKS_HYBRID_GPU_CACHE"]) / "charts", "gpu-operator-v26.7.0.tgz")
    folder = chart_repository(
        projectdir.SHIPPED / "stacks" / "Pulumi.local.yaml", None, tmp_path / "r", offline, shared
    )
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([PLUGIN, DRA_041, "gpu-operator-v26.7.0.tgz", "index.yaml"])
    entries = chartfetch.index_document(folder)["entries"]
    assert {name: [e["version"] for e in found] for name, found in entries.items()} == {
        "nvidia-device-plugin": ["0.20.0"],
        "dra-driver-nvidia-gpu": ["0.4.1"],
        "gpu-operator": ["v26.7.0"],
    }
    assert entries["nvidia-device-plugin"][0]["digest"] == PLUGIN_SHA256
    assert capsys.readouterr().err.splitlines() == [f"notice: charts come from the mirror {shared}", FALLBACK_NOTICE]
    assert (cache / "gpu-operator-v26.7.0.tgz").is_file()


def test_the_review_refuses_an_eks_stack_that_no_source_can_serve(tmp_path: Path, offline: dict[str, str]) -> None:
    from eks_hybrid_gpu.review.render import RenderError, chart_repository

    shared = _mirror(tmp_path / "shared")
    with pytest.raises(RenderError, match=r"^no chart source for dra-driver-nvidia-gpu-0\.5\.0\.tgz: "):
        chart_repository(projectdir.SHIPPED / "stacks" / "Pulumi.dra.yaml", None, tmp_path / "r", offline, shared)


@pytest.mark.charts
def test_the_review_serves_a_mirror_without_an_index_through_its_own(tmp_path: Path) -> None:
    from eks_hybrid_gpu.review.render import chart_repository

    mirror = _mirror(tmp_path / "m", PLUGIN)
    stack = projectdir.SHIPPED / "stacks" / "Pulumi.device-plugin.yaml"
    environ = {"EKS_HYBRID_GPU_CACHE": str(tmp_path / "cache")}
    folder = chart_repository(stack, mirror, tmp_path / "r", environ, tmp_path / "no-shared")
    assert folder == tmp_path / "r"
    assert chartfetch.index_document(folder)["entries"]["nvidia-device-plugin"][0]["urls"] == [PLUGIN]
    chartfetch.write_index(mirror)
    assert chart_repository(stack, mirror, tmp_path / "r2", environ, tmp_path / "no-shared") == mirror
    assert [p.name for p in (tmp_path / "cache" / "charts").glob("*.tgz")] == [PLUGIN]
