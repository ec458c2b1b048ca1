"""The user's own engine first: a `pulumi` on PATH (or ~/.pulumi/bin) and the pinned Kubernetes provider in the
Pulumi plugin folder are what `review`, `migrate` and `local up` run; the offline toolchain only where they are
not, and its absence is told in words a pipx user can act on (no `scripts/toolchain.sh`, no `git fetch` into
site-packages).

The CLI here is a shell script that answers `pulumi version` and logs every other call; the provider a file in a
fake plugin folder (`resource-kubernetes-v4.25.0/pulumi-resource-kubernetes`), as `pulumi plugin install` lays it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from eks_hybrid_gpu import cli, engine, engine_tools, projectdir
from eks_hybrid_gpu.engine import Toolchain, provider_version
from eks_hybrid_gpu.review import gitref

pytestmark = pytest.mark.unit

FAKE_PULUMI = """#!/bin/sh
if [ "$1" = version ]; then echo {version}; exit 0; fi
echo "$*" >> "{log}"
echo "fake pulumi: $*" >&2
exit 1
"""


def fake_pulumi(folder: Path, version: str = "v3.280.0") -> Path:
    """A `pulumi` that answers `version` and fails (logging the call) at anything else."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "pulumi"
    script.write_text(FAKE_PULUMI.format(version=version, log=folder / "calls.log"))
    script.chmod(0o755)
    return script


def fake_provider(pulumi_home: Path, version: str | None = None) -> Path:
    folder = pulumi_home / "plugins" / f"resource-kubernetes-v{version or provider_version()}"
    folder.mkdir(parents=True)
    binary = folder / "pulumi-resource-kubernetes"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    return binary


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has a fake pulumi and whose ~/.pulumi/plugins has the pinned provider."""
    fake_pulumi(tmp_path / "bin")
    fake_provider(tmp_path / "home" / ".pulumi")
    return {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}


class Builds:
    """Stands in for the toolchain build: records the steps asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def __call__(self, steps: Sequence[str]) -> Toolchain:
        self.asked.append(tuple(steps))
        return Toolchain(("/toolchain/kube/bin", "/toolchain/etcd/bin"), Path("/toolchain/provider"), "v1.37.2=/k")


def test_the_users_pulumi_and_provider_are_found(user: dict[str, str], tmp_path: Path) -> None:
    found = engine_tools.user_engine(user)
    assert found.usable, found.problem
    assert found.pulumi == tmp_path / "bin" / "pulumi"
    assert found.version == "v3.280.0"
    assert found.provider == (
        tmp_path
        / "home"
        / ".pulumi"
        / "plugins"
        / f"resource-kubernetes-v{provider_version()}"
        / "pulumi-resource-kubernetes"
    )


def test_review_and_migrate_run_them_without_building_anything(user: dict[str, str], tmp_path: Path) -> None:
    builds, said = Builds(), []
    toolchain = engine_tools.choose((), said.append, user, builds)
    assert builds.asked == []
    assert toolchain.path_entries == (str(tmp_path / "bin"),)
    assert toolchain.provider_binary.name == "pulumi-resource-kubernetes"
    assert said == [f"engine: your Pulumi v3.280.0 ({tmp_path / 'bin' / 'pulumi'}) and Kubernetes provider "
                    f"({toolchain.provider_binary.parent})"]  # fmt: skip


def test_a_private_api_server_still_comes_from_the_toolchain_behind_the_users_pulumi(
    user: dict[str, str], tmp_path: Path
) -> None:
    builds = Builds()
    toolchain = engine_tools.choose(engine_tools.API_SERVER_TOOLS, lambda _line: None, user, builds)
    assert builds.asked == [("etcd", "kube")]
    assert toolchain.path_entries == (str(tmp_path / "bin"), "/toolchain/kube/bin", "/toolchain/etcd/bin")
    assert toolchain.provider_binary.parent.name == f"resource-kubernetes-v{provider_version()}"
    assert toolchain.kube_dirs == "v1.37.2=/k"


def test_pulumi_home_and_the_installer_folder_are_looked_in(tmp_path: Path) -> None:
    installed = fake_pulumi(tmp_path / "home" / ".pulumi" / "bin")
    fake_provider(tmp_path / "ph")
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "PULUMI_HOME": str(tmp_path / "ph")}
    found = engine_tools.user_engine(environ)
    assert (found.usable, found.pulumi) == (True, installed)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("no-pulumi", "no `pulumi` on PATH or in ~/.pulumi/bin"),
        ("old-pulumi", "is Pulumi v3.100.0, older than the Pulumi SDK"),
        ("no-provider", f"the Kubernetes provider {provider_version()} is not in"),
        ("other-provider", f"the Kubernetes provider {provider_version()} is not in"),
        ("partial-provider", f"the Kubernetes provider {provider_version()} is not in"),
    ],
)
def test_without_them_the_offline_toolchain_is_built_and_the_line_says_why(
    tmp_path: Path, change: str, problem: str
) -> None:
    home = tmp_path / "home"
    if change != "no-pulumi":
        fake_pulumi(tmp_path / "bin", "v3.100.0" if change == "old-pulumi" else "v3.280.0")
    if change in ("no-pulumi", "old-pulumi", "partial-provider"):
        binary = fake_provider(home / ".pulumi")
        if change == "partial-provider":
            (binary.parent.parent / f"{binary.parent.name}.partial").write_text("")
    if change == "other-provider":
        fake_provider(home / ".pulumi", "4.18.0")
    builds, said = Builds(), []
    environ = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(home)}
    toolchain = engine_tools.choose(engine_tools.API_SERVER_TOOLS, said.append, environ, builds)
    assert builds.asked == [()]  # everything, the engine included
    assert toolchain.provider_binary == Path("/toolchain/provider")
    assert len(said) == 1
    assert said[0].startswith("engine: the offline toolchain (")
    assert problem in said[0]
    assert said[0].endswith("which needs Go 1.26 on PATH and takes about 40 minutes on 2 cores")


def test_from_an_installed_wheel_a_failed_build_names_no_script_the_user_lacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shipped = tmp_path / "site-packages" / "eks_hybrid_gpu" / "_project"
    (shipped / "scripts").mkdir(parents=True)
    versions = "scripts/toolchain-versions.env"
    (shipped / versions).write_text((projectdir.SHIPPED / versions).read_text())
    monkeypatch.setattr(projectdir, "SHIPPED", shipped)
    message = engine_tools.toolchain_failed(1)
    assert "scripts/toolchain.sh" not in message
    assert message == (
        "building the offline engine toolchain failed (exit 1; its lines above say where). Either install the Pulumi "
        f"CLI ({'.'.join(map(str, engine_tools.sdk_floor()))} or newer) and its Kubernetes provider (`pulumi plugin "
        f"install resource kubernetes {provider_version()}`), which this command then uses, or install Go 1.26 and "
        "run the command again to build the toolchain (about 40 minutes on 2 cores, once)"
    )


def test_in_a_checkout_a_failed_build_names_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*_args: object, **_kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 3, "", "")

    monkeypatch.setattr(engine.subprocess, "run", failing)
    with pytest.raises(RuntimeError) as failed:
        engine.ensure_toolchain()
    assert str(failed.value).startswith("scripts/toolchain.sh failed with exit code 3; ")
    assert "pulumi plugin install resource kubernetes" in str(failed.value)


def _git(repo: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    env = {**identity, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository holding a project of this program (Pulumi.yaml and the local stack), committed on main."""
    project = tmp_path / "team" / "gpu"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text((projectdir.SHIPPED / "Pulumi.yaml").read_text())
    local = projectdir.SHIPPED / "stacks" / "Pulumi.local.yaml"
    (project / "stacks" / "Pulumi.local.yaml").write_text(local.read_text())
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "first")
    return project


def test_review_renders_with_the_users_pulumi_and_provider(
    checkout: Path, user: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole command up to the render: the engine it hands the renderer is the user's, nothing is built."""
    from contextlib import nullcontext

    from eks_hybrid_gpu.review import render

    monkeypatch.delenv("PULUMI_HOME", raising=False)  # the user's shell: an earlier engine run in this process set it
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(engine, "ensure_toolchain", lambda *_a: pytest.fail("the toolchain must not be built"))
    monkeypatch.setattr(render, "chart_repository", lambda _stack, _mirror, folder: folder)
    monkeypatch.setattr(render, "chart_mirror", lambda _folder: nullcontext(("http://127.0.0.1:1", {})))
    handed: list[Toolchain] = []

    def make_env(toolchain: Toolchain, *_args: object, **_kwargs: object) -> None:
        handed.append(toolchain)
        msg = "stopped before rendering"
        raise render.RenderError(msg)

    monkeypatch.setattr("eks_hybrid_gpu.review.make_env", make_env)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    argv = ["review", "--project", str(checkout), "--kubeconfig", str(kubeconfig), "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    (toolchain,) = handed
    assert toolchain.path_entries[0] == str(tmp_path / "bin")
    assert toolchain.provider_binary.is_relative_to(tmp_path / "home" / ".pulumi" / "plugins")


def test_review_from_an_installed_wheel_outside_any_project_says_what_to_do_not_git_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = tmp_path / "site-packages" / "eks_hybrid_gpu" / "_project"
    (shipped / "stacks").mkdir(parents=True)
    (shipped / "Pulumi.yaml").write_text((projectdir.SHIPPED / "Pulumi.yaml").read_text())
    (shipped / "stacks" / "Pulumi.local.yaml").write_text("config: {}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(projectdir, "SHIPPED", shipped)
    assert cli.main(["review"]) == 2
    err = capsys.readouterr().err
    assert "git fetch" not in err
    assert err == (
        f"eks-hybrid-gpu review: no project was found from {elsewhere} upwards (a folder whose Pulumi.yaml says "
        "`name: eks-hybrid-gpu`), and the one this package ships is no git repository to compare with --base main: "
        "run review in a git checkout of your project, or pass --project DIR of one\n"
    )


def test_a_project_outside_git_is_told_so_not_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(gitref.GitRefError) as refused:
        gitref.resolve(tmp_path, "main")
    assert "git fetch" not in str(refused.value)
    assert str(refused.value) == (
        f"{tmp_path} is not in a git repository, and review compares the project with the git ref --base main: run "
        "it in a git checkout of the project, or pass --project DIR of one"
    )


def _no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No pulumi of the user's, and a toolchain build that fails at once (as without Go)."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EKS_HYBRID_GPU_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PULUMI_HOME", raising=False)

    def failing(*_args: object, **_kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 1, "", "")

    monkeypatch.setattr(engine.subprocess, "run", failing)


@pytest.mark.charts
def test_local_up_without_any_engine_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support import charts

    _no_engine(monkeypatch, tmp_path)
    assert cli.main(["local", "up", "--yes", "--chart-mirror", str(charts.repository())]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-2].startswith("engine: the offline toolchain (no `pulumi` on PATH or in ~/.pulumi/bin")
    assert err.splitlines()[-1].startswith("local up: scripts/toolchain.sh failed with exit code 1; ")


def test_simulate_start_without_go_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_engine(monkeypatch, tmp_path)
    assert cli.main(["simulate", "start"]) == 1
    assert capsys.readouterr().err == (
        "simulate start: etcd, kube (a local API server's binaries, which no Pulumi install has) come from the "
        "offline toolchain, and building them failed (exit 1; its lines above say where): install Go 1.26 and run "
        "the command again\n"
    )
