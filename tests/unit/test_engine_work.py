"""Each run works on its own copy of the stack file: a teammate's `pulumi up` cannot replace a migration's config."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eks_hybrid_gpu import engine, projectdir

pytestmark = pytest.mark.unit


def _engine(tmp_path: Path) -> engine.EngineEnv:
    return engine.EngineEnv(tmp_path / "state", engine.Toolchain((), tmp_path / "provider"), tmp_path / "kubeconfig")


def _project(folder: Path, drivers: str) -> Path:
    """A project whose stack `local` says `drivers` in its config (one caller's edit of the stack file)."""
    (folder / "stacks").mkdir(parents=True)
    shutil.copyfile(projectdir.SHIPPED / "Pulumi.yaml", folder / "Pulumi.yaml")
    document = yaml.safe_load((projectdir.SHIPPED / "stacks" / "Pulumi.local.yaml").read_text())
    document["config"]["eks-hybrid-gpu:note"] = drivers
    (folder / "stacks" / "Pulumi.local.yaml").write_text(yaml.safe_dump(document))
    return folder


def _config(work: Path) -> dict[str, object]:
    return dict(yaml.safe_load((work / "stacks" / "Pulumi.local.yaml").read_text())["config"])


def test_two_runs_get_two_folders_and_one_runs_config_cannot_overwrite_the_others(tmp_path: Path) -> None:
    env = _engine(tmp_path)
    migration = engine._work_copy(env, "local", _project(tmp_path / "migration", "the migration's phase config"))
    teammate = engine._work_copy(env, "local", _project(tmp_path / "teammate", "a teammate's edit"))
    assert migration != teammate
    assert migration.parent == teammate.parent == env.state_dir / engine.RUNS
    assert migration.name.startswith(f"local.{os.getpid()}.")
    assert _config(migration)["eks-hybrid-gpu:note"] == "the migration's phase config"  # not replaced
    assert _config(teammate)["eks-hybrid-gpu:note"] == "a teammate's edit"
    assert (engine.project_folder(env) / "Pulumi.yaml").is_file()
    assert not (engine.project_folder(env) / "stacks").exists()  # `pulumi cancel --cwd` there reads no config


def test_the_stacks_salt_is_kept_once_and_put_into_every_runs_copy(tmp_path: Path) -> None:
    env = _engine(tmp_path)
    project = _project(tmp_path / "p", "x")
    first = engine._work_copy(env, "local", project)
    assert "encryptionsalt" not in yaml.safe_load((first / "stacks" / "Pulumi.local.yaml").read_text())
    written = yaml.safe_load((first / "stacks" / "Pulumi.local.yaml").read_text())
    written["encryptionsalt"] = "v1:salt-of-the-stack"  # what the engine writes when it creates the stack
    (first / "stacks" / "Pulumi.local.yaml").write_text(yaml.safe_dump(written))
    engine._keep_salt(env, first, "Pulumi.local.yaml")
    second = engine._work_copy(env, "local", project)
    assert yaml.safe_load((second / "stacks" / "Pulumi.local.yaml").read_text())["encryptionsalt"] == (
        "v1:salt-of-the-stack"
    )
    other = yaml.safe_load((second / "stacks" / "Pulumi.local.yaml").read_text())
    other["encryptionsalt"] = "v1:another"
    (second / "stacks" / "Pulumi.local.yaml").write_text(yaml.safe_dump(other))
    engine._keep_salt(env, second, "Pulumi.local.yaml")  # written once: a later copy cannot change it
    assert engine._salt_of(env, "Pulumi.local.yaml") == "v1:salt-of-the-stack"


def test_the_salt_of_the_old_shared_work_folder_is_still_read(tmp_path: Path) -> None:
    env = _engine(tmp_path)
    (env.state_dir / "work" / "stacks").mkdir(parents=True)
    (env.state_dir / "work" / "stacks" / "Pulumi.local.yaml").write_text("encryptionsalt: v1:old\nconfig: {}\n")
    work = engine._work_copy(env, "local", _project(tmp_path / "p", "x"))
    assert yaml.safe_load((work / "stacks" / "Pulumi.local.yaml").read_text())["encryptionsalt"] == "v1:old"


def test_the_folders_of_runs_that_have_exited_are_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    env = _engine(tmp_path)
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    gone = env.state_dir / engine.RUNS / f"local.{process.pid}.abc123"
    gone.mkdir(parents=True)
    live = engine._work_copy(env, "local", _project(tmp_path / "p", "x"))
    engine._work_copy(env, "local", _project(tmp_path / "q", "y"))
    assert not gone.exists()
    assert live.exists()  # this process is alive: its folder stays while it runs
