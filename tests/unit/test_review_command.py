"""The review command's plumbing: usage errors, the git base export, chart mirror pins, policy levels, the worker's
stack-file overrides and how it tells each program generation to render."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from eks_hybrid_gpu import cli
from eks_hybrid_gpu.review import gitref, main, worker
from eks_hybrid_gpu.review.render import RenderEnv, RenderError, chart_overrides, path_replacements, policy_setup

pytestmark = pytest.mark.unit

INDEX = {
    "entries": {
        "nvidia-device-plugin": [{"version": "0.20.0"}],
        "dra-driver-nvidia-gpu": [{"version": "0.4.1"}],
        "gpu-operator": [{"version": "v26.7.0"}],
    }
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin",
        },
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository `work/main` with two commits on main, and a sibling `work/shared/charts`."""
    root = tmp_path / "work" / "main"
    (root / "stacks").mkdir(parents=True)
    (tmp_path / "work" / "shared" / "charts").mkdir(parents=True)
    (tmp_path / "work" / "shared" / "charts" / "c-1.0.0.tgz").write_text("chart")
    _git(root, "init", "-q", "-b", "main")
    (root / "stacks" / "Pulumi.local.yaml").write_text("config:\n  eks-hybrid-gpu:cohorts: [{replicas: 4}]\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    (root / "stacks" / "Pulumi.local.yaml").write_text("config:\n  eks-hybrid-gpu:cohorts: [{replicas: 2}]\n")
    (root / "stacks" / "Pulumi.new.yaml").write_text("config: {}\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "second")
    (root / "stacks" / "Pulumi.local.yaml").write_text("uncommitted\n")
    return root


def test_export_of_a_ref_with_siblings_linked(repo: Path, tmp_path: Path) -> None:
    base = gitref.export(repo, "main~1", tmp_path / "export")

    assert base.project_dir == tmp_path / "export" / "main"
    assert base.commit == _git(repo, "rev-parse", "main~1")
    assert base.label == f"`main~1` ({base.commit[:12]})"
    assert "replicas: 4" in (base.project_dir / "stacks" / "Pulumi.local.yaml").read_text()
    assert not (base.project_dir / "stacks" / "Pulumi.new.yaml").exists()  # the base lacks the stack
    assert (base.project_dir / ".." / "shared" / "charts" / "c-1.0.0.tgz").read_text() == "chart"
    # The export never touches the repository: no worktree, no change in the working tree.
    assert _git(repo, "worktree", "list").count("\n") == 0
    assert (repo / "stacks" / "Pulumi.local.yaml").read_text() == "uncommitted\n"


def test_relative_chart_paths_of_both_checkouts_are_spelled_alike(repo: Path, tmp_path: Path) -> None:
    base = gitref.export(repo, "main", tmp_path / "export")
    archive = "charts/c-1.0.0.tgz"

    head_pairs = dict(path_replacements(repo))
    base_pairs = dict(path_replacements(base.project_dir))
    head_path = str((repo / ".." / "shared" / archive).resolve())
    base_path = str((base.project_dir / ".." / "shared" / archive).resolve())

    assert head_path == base_path
    shared = str((repo / ".." / "shared").resolve())
    assert head_pairs[shared] == base_pairs[shared] == "$PROJECT/../shared"
    assert head_pairs[str(repo.resolve())] == base_pairs[str(base.project_dir.resolve())] == "$PROJECT"


def test_a_missing_ref_says_how_to_get_it(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(gitref.GitRefError, match=r"'origin/nope' is not a commit .*git fetch origin origin/nope"):
        gitref.export(repo, "origin/nope", tmp_path / "export")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-such-flag"]) == 2
    assert main(["--stack", "no-such-stack"]) == 2
    assert "no stack 'no-such-stack': stacks/Pulumi.no-such-stack.yaml does not exist" in capsys.readouterr().err
    assert main(["--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    assert "--kubeconfig /nonexistent/kubeconfig does not exist" in capsys.readouterr().err
    assert main(["--help"]) == 0


def test_a_missing_base_ref_exits_2_before_any_engine_work(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--base", "refs/heads/no-such-branch-for-review"]) == 2
    assert "'refs/heads/no-such-branch-for-review' is not a commit" in capsys.readouterr().err


def test_the_cli_dispatches_review(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr("eks_hybrid_gpu.review.run", lambda args: seen.append((args.stack, args.base)) or 7)

    assert cli.main(["review", "--stack", "mixed"]) == 7
    assert seen == [("mixed", "main")]
    assert cli.main(["--help"]) == 0
    assert "review" in capsys.readouterr().out


def _env(tmp_path: Path, mirror: str | None = "http://127.0.0.1:1") -> RenderEnv:
    return RenderEnv(
        Path("/p"), Path("/b"), "4.25.0", Path("/k"), tmp_path, chart_mirror=mirror, chart_mirror_index=INDEX
    )


def _stack(*owners: str, charts: dict[str, object] | None = None) -> dict[str, object]:
    cohorts = [{"name": f"c{i}", "owner": owner} for i, owner in enumerate(owners)]
    config: dict[str, object] = {"eks-hybrid-gpu:cohorts": cohorts}
    if charts:
        config["eks-hybrid-gpu:charts"] = charts
    return {"config": config}


def test_mirror_serves_charts_without_a_source_at_their_pinned_version(tmp_path: Path) -> None:
    overrides = chart_overrides(_stack("device-plugin", "gpu-operator"), _env(tmp_path))

    assert overrides == {
        "devicePlugin": {"repo": "http://127.0.0.1:1", "version": "0.20.0"},
        "gpuOperator": {"repo": "http://127.0.0.1:1", "version": "v26.7.0"},
    }
    with_source = _stack("device-plugin", charts={"devicePlugin": {"version": "0.20.0", "source": {"archive": "x"}}})
    assert chart_overrides(with_source, _env(tmp_path)) == {}
    assert chart_overrides(_stack("device-plugin"), _env(tmp_path, mirror=None)) == {}


def test_mirror_without_the_pinned_version_is_a_render_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eks = _stack("dra")
    eks["config"]["eks-hybrid-gpu:cluster"] = {"source": "eks"}  # type: ignore[index]
    with pytest.raises(RenderError, match=r"no dra-driver-nvidia-gpu 0\.5\.0 \(it has 0\.4\.1\)"):
        chart_overrides(eks, _env(tmp_path))
    # Only a local stack falls back to the mirror's version, and says so naming both versions.
    assert chart_overrides(_stack("dra"), _env(tmp_path))["draDriver"]["version"] == "0.4.1"
    notice = capsys.readouterr().err
    assert "no dra-driver-nvidia-gpu 0.5.0 (the pinned version); the local stack uses dra-driver-nvidia-gpu 0.4.1" in (
        notice
    )
    pinned = _stack("dra", charts={"draDriver": {"version": "0.4.1"}})
    assert chart_overrides(pinned, _env(tmp_path))["draDriver"]["version"] == "0.4.1"


def test_policy_levels_and_the_render_config(tmp_path: Path) -> None:
    levels, path = policy_setup(tmp_path)
    config = json.loads(path.read_text())

    assert levels["single-allocation-owner"] == "mandatory"
    assert levels["driver-verification-declared"] == "advisory"
    assert set(config) == set(levels)
    assert {entry["enforcementLevel"] for entry in config.values()} == {"advisory"}

    user = tmp_path / "user.json"
    user.write_text(
        json.dumps(
            {
                "chart-version-pinned": "advisory",
                "driver-verification-declared": {"enforcementLevel": "mandatory", "verifiedCohorts": ["op"]},
                "no-dual-allocation": "disabled",
            }
        )
    )
    levels, path = policy_setup(tmp_path, user)
    config = json.loads(path.read_text())

    assert levels["chart-version-pinned"] == "advisory"
    assert levels["driver-verification-declared"] == "mandatory"
    assert config["driver-verification-declared"] == {"enforcementLevel": "advisory", "verifiedCohorts": ["op"]}
    assert config["no-dual-allocation"] == {"enforcementLevel": "disabled"}


def test_worker_stack_overrides(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.s.yaml"
    stack_file.write_text(
        yaml.safe_dump(
            {
                "config": {"eks-hybrid-gpu:cluster": {"source": "eks", "name": "n", "region": "r"}},
                "encryptionsalt": "v1:abc",
            }
        )
    )

    document = worker._stack_document(stack_file)
    worker._apply_chart_overrides(document, {"gpuOperator": {"repo": "http://m", "version": "v26.7.0"}})

    config = document["config"]
    assert config["eks-hybrid-gpu:cluster"] == {"source": "eks", "name": "n", "region": "r", "preflight": False}
    assert config["pulumi:disable-default-providers"] == ["kubernetes"]
    assert config["eks-hybrid-gpu:charts"] == {"gpuOperator": {"version": "v26.7.0", "source": {"repo": "http://m"}}}
    assert "encryptionsalt" not in document

    stack_file.write_text("config:\n  eks-hybrid-gpu:token:\n    secure: AAAA\nencryptionsalt: v1:abc\n")
    assert worker._stack_document(stack_file)["encryptionsalt"] == "v1:abc"


def _current_run(project_dir: Path, *, render_dir: str | None = None) -> Any:
    return None


def _old_run(project_dir: Path) -> Any:
    return None


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        # The current program: told through the explicit argument.
        (_current_run, True),
        # A base from before render mode (or one that no longer imports): rendered with the head's program, and
        # the summary says so.
        (_old_run, False),
        (None, False),
    ],
)
def test_worker_render_mode_per_program_generation(run: Any, expected: bool) -> None:
    assert worker.takes_render_dir(run) is expected
