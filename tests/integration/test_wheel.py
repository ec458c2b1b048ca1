"""`eks-hybrid-gpu review` from the installed wheel, outside the checkout: a copied project and a stacks-only one.

The CLI builds or finds the offline toolchain itself, from the toolchain script the wheel ships (the cache the
other integration tests fill), and starts its own private API server; the charts come from the tests' chain as
`--chart-mirror`. About 15 s a review.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import charts, wheel

pytestmark = [pytest.mark.integration, pytest.mark.charts]

PROGRAM = ["Pulumi.yaml", "__main__.py", "components", "policy", "stacks"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> wheel.Installed:
    return wheel.build_and_install(tmp_path_factory.mktemp("wheel"))


def _git_project(folder: Path, files: list[str]) -> Path:
    """`files` of the checkout copied to `folder`, committed as `main`: a team's own repository of the project."""
    wheel.copy_files(files, folder)
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the project"], check=True)
    return folder


def _without_the_dra_cohort(project: Path) -> None:
    stack_file = project / "stacks" / "Pulumi.local.yaml"
    document = yaml.safe_load(stack_file.read_text())
    cohorts = document["config"]["eks-hybrid-gpu:cohorts"]
    document["config"]["eks-hybrid-gpu:cohorts"] = [c for c in cohorts if c["name"] != "dra"]
    stack_file.write_text(yaml.safe_dump(document))


def _review(installed: wheel.Installed, out: Path, *argv: str, cwd: Path) -> dict[str, Any]:
    ran = installed.run("review", "--stack", "local", "--chart-mirror", str(charts.repository()), "--out", str(out),
                        *argv, cwd=cwd)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.startswith("27 object(s) differ from main; 0 mandatory policy violation(s).")
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    return result


def _assert_dra_cohort_removed(result: dict[str, Any]) -> None:
    assert (result["exitCode"], result["mandatoryFailures"]) == (0, 0)
    assert sorted(result["ownership"]["base"]["cohorts"]) == ["dra", "plugin"]
    assert sorted(result["ownership"]["head"]["cohorts"]) == ["plugin"]
    assert result["ownershipChanges"] == ["cohort `dra` removed (was owner `dra`)"]
    assert result["head"]["label"] == "the working tree"


def test_review_of_a_copied_project_found_from_a_subfolder(installed: wheel.Installed, tmp_path: Path) -> None:
    files = [f for f in wheel.source_files() if f.split("/")[0] in PROGRAM]
    project = _git_project(tmp_path / "team-gpu", files)
    _without_the_dra_cohort(project)
    result = _review(installed, tmp_path / "out", cwd=project / "stacks")
    _assert_dra_cohort_removed(result)
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "No violation: `single-allocation-owner`" in summary
    assert str(project) not in summary


def test_review_of_a_stacks_only_project_runs_the_shipped_program_and_pack(
    installed: wheel.Installed, tmp_path: Path
) -> None:
    project = _git_project(tmp_path / "stacks-only", ["Pulumi.yaml", *wheel.source_files("stacks")])
    assert not (project / "components").exists()
    assert not (project / "policy").exists()
    _without_the_dra_cohort(project)
    result = _review(installed, tmp_path / "out", "--project", str(project), cwd=installed.elsewhere)
    _assert_dra_cohort_removed(result)
