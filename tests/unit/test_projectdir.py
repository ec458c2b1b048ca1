"""Where the project is: --project, else the nearest Pulumi.yaml of this project upwards, else the shipped one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from eks_hybrid_gpu import cli, projectdir
from eks_hybrid_gpu.migrate import MigrateRequest
from policy.gpu_allocation.vocab.labels import PROJECT

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _project(folder: Path, name: str = PROJECT) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(f"name: {name}  # the config namespace\nruntime: python\n")
    return folder


def test_the_project_name_is_the_config_namespace() -> None:
    assert projectdir.PROJECT_NAME == PROJECT
    assert projectdir.names_this_project(REPO)


def test_a_source_install_ships_its_checkout() -> None:
    assert projectdir.SHIPPED == REPO
    assert projectdir.tool_file("scripts/toolchain.sh") == REPO / "scripts" / "toolchain.sh"


def test_the_nearest_project_upwards_wins_and_another_projects_file_is_passed_over(tmp_path: Path) -> None:
    outer = _project(tmp_path / "team")
    inner = _project(outer / "apps" / "gpu", name="someone-elses-app")
    deep = inner / "stacks" / "notes"
    deep.mkdir(parents=True)
    assert projectdir.locate(cwd=deep) == outer.resolve()
    assert projectdir.search_upwards(tmp_path) is None


def test_without_any_project_upwards_the_shipped_one_is_used(tmp_path: Path) -> None:
    assert projectdir.locate(cwd=tmp_path) == projectdir.SHIPPED


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d.mkdir(), "holds no Pulumi.yaml"),
        (lambda d: _project(d, name="other"), "is another Pulumi project"),
    ],
)
def test_an_explicit_folder_must_be_this_project(tmp_path: Path, make: object, says: str) -> None:
    folder = tmp_path / "p"
    make(folder)  # type: ignore[operator]
    with pytest.raises(projectdir.ProjectDirError) as refused:
        projectdir.locate(folder, cwd=REPO)
    assert str(refused.value) == (
        f"--project {folder} {says}; name the folder whose Pulumi.yaml says `name: eks-hybrid-gpu`"
    )


def test_an_explicit_project_beats_the_working_directory(tmp_path: Path) -> None:
    assert projectdir.locate(_project(tmp_path / "p"), cwd=REPO) == (tmp_path / "p").resolve()


def test_use_puts_the_project_then_the_shipped_program_first_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path])
    monkeypatch.setattr(projectdir, "_chosen", None)
    project = _project(tmp_path / "p")
    assert projectdir.use(project) == project
    assert sys.path[:2] == [str(project), str(projectdir.SHIPPED)]
    assert projectdir.current() == project
    projectdir.use(project)
    assert sys.path.count(str(project)) == 1


def test_a_project_without_its_own_pack_is_served_the_shipped_one(tmp_path: Path) -> None:
    bare = _project(tmp_path / "bare")
    assert projectdir.policy_pack(bare) == projectdir.SHIPPED / "policy" / "analyzer"
    own = _project(tmp_path / "own")
    (own / "policy").mkdir()
    (own / "policy" / "analyzer").write_text("#!/bin/sh\n")
    assert projectdir.policy_pack(own) == own / "policy" / "analyzer"
    assert projectdir.shared_charts(own) == tmp_path / "shared" / "charts"


def test_the_cli_refuses_a_folder_that_is_no_project_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["inspect", "--project", str(tmp_path), "--json"]) == 2
    assert capsys.readouterr().err == (
        f"eks-hybrid-gpu: --project {tmp_path} holds no Pulumi.yaml; "
        "name the folder whose Pulumi.yaml says `name: eks-hybrid-gpu`\n"
    )


@pytest.mark.parametrize("where", ["before", "after-nested-command"])
def test_the_cli_takes_project_anywhere_for_the_length_of_the_command(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "path", [*sys.path])
    monkeypatch.setattr(projectdir, "_chosen", None)
    project = _project(tmp_path / "p")
    (project / "stacks").mkdir()
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())
    cohorts = document["config"]["eks-hybrid-gpu:cohorts"]
    document["config"]["eks-hybrid-gpu:cohorts"] = [c for c in cohorts if c["name"] == "plugin"]
    (project / "stacks" / "Pulumi.local.yaml").write_text(yaml.safe_dump(document))
    argv = ["simulate", "fleet", "--stack", "local"]
    assert cli.main(argv) == 0
    assert "- name: sim-dra-0" in capsys.readouterr().out  # the checkout's stack: the working directory's project
    argv = ["--project", str(project), *argv] if where == "before" else [*argv, "--project", str(project)]
    assert cli.main(argv) == 0
    fleet = capsys.readouterr().out
    assert "- name: sim-plugin-0" in fleet
    assert "sim-dra-" not in fleet
    assert projectdir.current() == REPO  # the choice ended with the command
    assert cli.main(["simulate", "fleet", "--stack", "absent", "--project", str(project)]) == 2  # a usage error
    assert "stacks/Pulumi.absent.yaml does not exist" in capsys.readouterr().err


def test_a_migrate_rerun_line_keeps_the_project(tmp_path: Path) -> None:
    args = cli.parser("migrate").parse_args(["migrate", "--stack", "s", "--cohort", "c", "--to", "dra"])
    args.project = tmp_path
    assert MigrateRequest.from_args(args).rerun() == (
        f"eks-hybrid-gpu migrate --stack s --cohort c --to dra --project {tmp_path}"
    )


def test_a_child_gets_the_project_then_the_shipped_copy_before_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path / "p")
    monkeypatch.setattr(projectdir, "_chosen", project)
    env = projectdir.child_environment({"PYTHONPATH": f"/elsewhere:{project}", "HOME": "/h"})
    assert env == {"PYTHONPATH": f"{project}:{projectdir.SHIPPED}:/elsewhere", "HOME": "/h"}
