"""What the program run on the GPU machine needs that can be checked here: scripts/hardware/program_run.py's stack file
loads as the program loads it, migrate's phase lines are read as migrate prints them, the charts' images are named
for the built ones, and scripts/hardware/stage_engine.sh stages every package the program, `migrate` and the policy
pack import that the GPU machine's python3 lacks, each at the lock's version.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu.migrate.planning import read_stack_file
from tests.support import charts

REPO = Path(__file__).resolve().parents[2]
HARDWARE = REPO / "scripts" / "hardware"
sys.path.insert(0, str(HARDWARE))
import program_run  # noqa: E402  (a script, not a package)

MACHINE_PACKAGES = {
    "grpcio", "protobuf", "pyyaml", "requests", "urllib3", "six", "typing-extensions", "setuptools", "pip", "packaging",
}  # fmt: skip
"""What the lent GPU machine's python3 3.12 has installed (docs/host-validation.md)."""

pytestmark = pytest.mark.unit


def _values(tmp_path: Path, charts: Path) -> dict[str, str]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({"apiVersion": "v1", "kind": "Config"}))
    return {
        "KUBECONFIG": str(kubeconfig),
        "KUBERNETES_VERSION": "1.34.4",
        "CHARTS": str(charts),
        "PROBE_IMAGE": "localhost/eks-hybrid-gpu-probe@sha256:" + "a" * 64,
    }


@pytest.mark.charts
def test_the_run_s_stack_file_loads_as_the_program_loads_it(tmp_path: Path) -> None:
    archives = charts.repository()  # the pinned archives (mirror, ../shared/charts or the cache); fails when none
    (tmp_path / "stacks").mkdir()
    shutil.copyfile(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    written = program_run.program_stack(program_run.TEMPLATE.read_text(), _values(tmp_path, archives))
    (tmp_path / "stacks" / f"Pulumi.{program_run.STACK}.yaml").write_text(written)

    stack = read_stack_file(program_run.STACK, tmp_path)

    assert stack.config.cluster.source == "kubeconfig"
    assert stack.config.cluster.kubeconfig == str(tmp_path / "kubeconfig")
    assert [(c.name, c.owner) for c in stack.config.cohorts] == [(program_run.COHORT, "device-plugin")]
    assert stack.config.smoke_jobs.approved_cohort == program_run.COHORT
    assert stack.config.charts.device_plugin.source is not None
    assert stack.config.charts.device_plugin.source.archive == f"{archives}/nvidia-device-plugin-0.20.0.tgz"
    assert not any(name in written for name in program_run.PLACEHOLDERS)


@pytest.mark.charts
def test_a_keep_name_run_s_edit_moves_the_cohort_to_dra_keeping_the_name(tmp_path: Path) -> None:
    archives = charts.repository()
    (tmp_path / "stacks").mkdir()
    shutil.copyfile(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    values = {**_values(tmp_path, archives), "KUBERNETES_VERSION": "1.37.2"}  # KEP-5004 on by default from 1.36
    written = program_run.program_stack(program_run.TEMPLATE.read_text(), values)
    (tmp_path / "stacks" / f"Pulumi.{program_run.STACK}.yaml").write_text(program_run.keeping_the_name(written))

    stack = read_stack_file(program_run.STACK, tmp_path)

    assert stack.config.dra.extended_resource_name == "nvidia.com/gpu"
    assert [(c.name, c.owner) for c in stack.config.cohorts] == [(program_run.COHORT, "dra")]


def test_the_keep_name_edit_needs_one_cohort_and_the_dra_section(tmp_path: Path) -> None:
    written = program_run.program_stack(program_run.TEMPLATE.read_text(), _values(tmp_path, tmp_path))
    with pytest.raises(ValueError, match="exactly one"):
        program_run.keeping_the_name(written.replace("  eks-hybrid-gpu:dra:\n", ""))
    with pytest.raises(ValueError, match="exactly one"):
        program_run.keeping_the_name(program_run.keeping_the_name(written))


def _smoke_job(**pod: Any) -> dict[str, Any]:
    container = {"name": "gpu-check", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hybrid-gpu-plugin-smoke", "namespace": "gpu-smoke", "labels": {"a": "b"}},
        "spec": {
            "suspend": True,
            "selector": {"matchLabels": {"x": "y"}},
            "template": {"spec": {"containers": [container], **pod}},
        },
    }


def test_the_keep_name_probe_is_the_device_plugin_smoke_job_unedited_but_its_name() -> None:
    rendered = _smoke_job()
    job = program_run.plain_request_job(rendered)

    assert job["metadata"] == {"name": program_run.KEEP_NAME_JOB, "namespace": "gpu-smoke"}
    assert job["spec"]["suspend"] is False
    assert "selector" not in job["spec"]
    assert job["spec"]["template"]["spec"]["containers"] == rendered["spec"]["template"]["spec"]["containers"]
    assert rendered["spec"]["suspend"] is True  # the render is left as it was


@pytest.mark.parametrize(
    "rendered",
    [
        _smoke_job(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]),
        {**_smoke_job(), "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {}}]}}}},
    ],
)
def test_a_smoke_job_without_the_plain_request_is_no_keep_name_probe(rendered: dict[str, Any]) -> None:
    with pytest.raises(program_run.StepFailed):
        program_run.plain_request_job(rendered)


def test_a_placeholder_left_unfilled_is_refused(tmp_path: Path) -> None:
    values = _values(tmp_path, tmp_path)
    del values["CHARTS"]
    with pytest.raises(ValueError, match="placeholders"):
        program_run.program_stack(program_run.TEMPLATE.read_text(), values)


def test_each_phase_s_seconds_are_read_as_migrate_prints_them() -> None:
    lines = [
        "migrate: cohort plugin device-plugin -> dra on h100-0",
        "cordoned h100-0",
        "[phase cordon] done in 2.1 s",
        "  | Updating (hardware-program):",
        "[phase remove] done in 14.6 s",
        "[phase wait-unpublished] done in 0.5 s",
        "[phase install] done in 21.0 s",
        "[phase wait-published] done in 1.6 s",
        "uncordoned h100-0",
        "[phase uncordon] done in 0.0 s; ConfigMap gpu-allocation-migration removed",
        "cohort plugin is owned by dra (40.0 s: ...)",
    ]
    assert program_run.migrate_phases(lines) == {
        "cordon": 2.1,
        "remove": 14.6,
        "wait-unpublished": 0.5,
        "install": 21.0,
        "wait-published": 1.6,
        "uncordon": 0.0,
    }


def test_the_phase_line_is_the_one_migrate_prints() -> None:
    source = (REPO / "eks_hybrid_gpu" / "migrate" / "phases.py").read_text()
    assert 'say(f"[phase {phase}] done in {records.timings[phase]:.1f} s")' in source
    assert "say(f\"[phase uncordon] done in {records.timings['uncordon']:.1f} s;" in source


@pytest.mark.parametrize(
    ("help_text", "accepted"),
    [
        ("  --drain      evict the pods\n  --yes        confirm without asking\n", True),
        ("  --drain      evict the pods\n  --dry-run    print the plan\n", False),
        ("  --yes-really  another option\n", False),
        ("[--drain] [--yes] [--timeout TIMEOUT]", True),
    ],
)
def test_yes_is_passed_only_when_migrate_has_it(help_text: str, accepted: bool) -> None:
    assert program_run.accepts_flag(help_text, "--yes") is accepted


def _daemonset(*images: str, policy: str = "IfNotPresent") -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": image, "imagePullPolicy": policy} for i, image in enumerate(images)]
    return {"spec": {"template": {"spec": {"initContainers": containers[:1], "containers": containers[1:]}}}}


def test_every_image_a_daemonset_names_runs_the_built_one() -> None:
    plugin = _daemonset("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0")
    dra = _daemonset("registry.k8s.io/dra:v0.5.0", "registry.k8s.io/dra:v0.5.0")
    named = program_run.images_as_rendered([(plugin, "localhost/plugin:v0.19.0"), (dra, "localhost/dra:v0.5.0")])
    assert named == {
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0": "localhost/plugin:v0.19.0",
        "registry.k8s.io/dra:v0.5.0": "localhost/dra:v0.5.0",
    }


def test_an_image_pulled_always_is_refused() -> None:
    with pytest.raises(program_run.StepFailed, match=r"pulls .* always"):
        program_run.images_as_rendered([(_daemonset("a:1", "a:1", policy="Always"), "localhost/a:1")])


def _staged_wheels() -> list[str]:
    script = (HARDWARE / "stage_engine.sh").read_text()
    listed = re.search(r"^WHEELS=\((.*?)^\)", script, flags=re.MULTILINE | re.DOTALL)
    assert listed is not None
    return listed.group(1).split()


def _locked() -> dict[str, str]:
    lines = (REPO / "requirements.lock").read_text().splitlines()
    return dict(line.split()[0].split("==") for line in lines if re.match(r"^[A-Za-z0-9]", line))


def test_every_staged_wheel_is_locked() -> None:
    locked = _locked()
    assert [name for name in _staged_wheels() if name not in locked] == []


def test_the_stage_has_every_package_the_program_migrate_and_the_pack_import() -> None:
    code = (
        "import importlib.metadata as md, json, sys\n"
        "import components.program, eks_hybrid_gpu.migrate.runner, eks_hybrid_gpu.engine, pulumi.automation\n"
        "import pulumi_policy, policy.gpu_allocation\n"
        "owners = md.packages_distributions()\n"
        "print(json.dumps(sorted({d for m in list(sys.modules) for d in owners.get(m.split('.')[0], [])})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    imported = {re.sub(r"[-_.]+", "-", name).lower() for name in json.loads(done.stdout)} - {"eks-hybrid-gpu"}
    staged = set(_staged_wheels())
    assert sorted(imported - staged - MACHINE_PACKAGES) == []
