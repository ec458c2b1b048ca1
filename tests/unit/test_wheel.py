"""The wheel installs a working `eks-hybrid-gpu` outside the checkout: one top-level package, the project as data.

Built and installed once per module, offline (tests/support/wheel.py says how): about 5 s, so it runs with the
unit tests. The review of a copied project, which needs the engine toolchain, is tests/integration/test_wheel.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import recorded_host, wheel

pytestmark = pytest.mark.unit

PROJECT_DATA = {
    "Pulumi.yaml",
    "policy/PulumiPolicy.yaml",
    "policy/analyzer",
    "policy/requirements.txt",
    "policy/README.md",
    "scripts/toolchain.sh",
    "scripts/toolchain-versions.env",
}
"""What the commands need that is not Python, beside the example stacks."""
WHEEL_SIZE_LIMIT = 600_000
"""The wheel is about 430 kB; a wheel far larger has picked up something it should not ship (tests, charts)."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> wheel.Installed:
    return wheel.build_and_install(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_has_one_top_level_package_and_the_project_under_it(installed: wheel.Installed) -> None:
    names = installed.names()
    assert {n.split("/")[0] for n in names} == {"eks_hybrid_gpu", "eks_hybrid_gpu-0.1.0.dist-info"}
    top_level = next(n for n in names if n.endswith("dist-info/top_level.txt"))
    assert installed.site_packages.joinpath(top_level).read_text().split() == ["eks_hybrid_gpu"]
    wanted = {f for f in wheel.source_files("eks_hybrid_gpu") if f.endswith(".py")}
    tops = ("cluster", "components", "payloads", "policy")
    program = ["__main__.py", *(f for top in tops for f in wheel.source_files(top))]
    wanted |= {f"eks_hybrid_gpu/_project/{f}" for f in program if f.endswith(".py")}
    wanted |= {f"eks_hybrid_gpu/_project/{f}" for f in [*PROJECT_DATA, *wheel.source_files("stacks")]}
    shipped = {n for n in names if not n.startswith("eks_hybrid_gpu-0.1.0.dist-info/")}
    assert shipped == wanted
    assert installed.wheel.stat().st_size < WHEEL_SIZE_LIMIT


def test_the_entry_points_keep_their_executable_bit(installed: wheel.Installed) -> None:
    project = installed.site_packages / "eks_hybrid_gpu" / "_project"
    for entry in ("policy/analyzer", "scripts/toolchain.sh"):
        assert os.access(project / entry, os.X_OK), entry


def test_version_and_help_come_from_the_installed_package(installed: wheel.Installed) -> None:
    version = installed.run("--version")
    assert (version.returncode, version.stdout) == (0, "eks-hybrid-gpu 0.1.0\n")
    shown = installed.run("inspect", "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: eks-hybrid-gpu inspect [-h] [--project DIR]")
    assert "who owns and who really publishes each GPU node" in shown.stdout


def test_the_installed_code_runs_from_the_venv_and_installs_no_components_or_policy(
    installed: wheel.Installed,
) -> None:
    code = (
        "import importlib.util, json, eks_hybrid_gpu.projectdir as p; "
        "print(json.dumps([p.__file__, str(p.SHIPPED), str(p.locate()), "
        "importlib.util.find_spec('components') is None, importlib.util.find_spec('policy') is None]))"
    )
    ran = subprocess.run(
        [str(installed.python), "-c", code], cwd=installed.elsewhere, capture_output=True, text=True, check=True
    )
    module, shipped, located, no_components, no_policy = json.loads(ran.stdout)
    package = installed.site_packages / "eks_hybrid_gpu"
    assert (Path(module), Path(shipped), Path(located)) == (package / "projectdir.py",) + (package / "_project",) * 2
    assert no_components
    assert no_policy


@pytest.mark.parametrize(
    ("smi", "code", "model"), [("driver-570.csv", 0, "NVIDIA H200"), ("old-driver.csv", 1, "NVIDIA A100-SXM4-80GB")]
)
def test_hostcheck_on_a_recorded_host_agrees_with_the_checkout(
    installed: wheel.Installed, tmp_path: Path, smi: str, code: int, model: str
) -> None:
    argv = ["hostcheck", *recorded_host.host_args(tmp_path, smi)]
    from_wheel = installed.run(*argv)
    as_module = subprocess.run(
        [str(installed.python), "-m", "eks_hybrid_gpu.hostcheck", *argv[1:]],
        cwd=installed.elsewhere,
        capture_output=True,
        text=True,
        check=False,
    )
    from_checkout = subprocess.run(
        [sys.executable, "-m", "eks_hybrid_gpu", *argv], cwd=wheel.REPO, capture_output=True, text=True, check=False
    )
    assert from_wheel.returncode == as_module.returncode == from_checkout.returncode == code, as_module.stderr
    inventory = json.loads(from_wheel.stdout)
    assert inventory == json.loads(as_module.stdout) == json.loads(from_checkout.stdout)
    assert [gpu["model"] for gpu in inventory["gpus"]] == [model]


def test_the_installed_wheel_writes_the_checkouts_artifact_byte_for_byte(
    installed: wheel.Installed, tmp_path: Path
) -> None:
    from eks_hybrid_gpu import hostartifact

    written = installed.run("hostcheck", "--artifact", str(tmp_path / "hc.pyz"))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "hc.pyz").read_bytes() == hostartifact.archive()


def test_a_folder_that_is_no_project_is_refused_in_one_line(installed: wheel.Installed) -> None:
    refused = installed.run("inspect", "--project", str(installed.elsewhere))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"eks-hybrid-gpu: --project {installed.elsewhere} holds no Pulumi.yaml; "
        "name the folder whose Pulumi.yaml says `name: eks-hybrid-gpu`\n"
    )


def test_a_child_process_of_the_cli_imports_the_project_through_its_environment(installed: wheel.Installed) -> None:
    """`local up` starts the simulated device manager as `python -m …`; the wheel's site-packages has no `policy`."""
    code = (
        "import subprocess, sys; from eks_hybrid_gpu import projectdir; "
        "argv = [sys.executable, '-m', 'eks_hybrid_gpu.simulate.devicemanager', '--help']; "
        "bare = subprocess.run(argv, capture_output=True, text=True); "
        "child = subprocess.run(argv, capture_output=True, text=True, env=projectdir.child_environment()); "
        "print(bare.returncode, 'No module named' in bare.stderr, child.returncode, child.stdout.split()[:2])"
    )
    ran = subprocess.run(
        [str(installed.python), "-c", code], cwd=installed.elsewhere, capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip().split(maxsplit=3) == [
        "1",
        "True",
        "0",
        "['usage:', 'eks-hybrid-gpu-simulated-device-manager']",
    ]
