"""The pack as a whole: names, default levels, metadata, entry points, real analyzer."""

from __future__ import annotations

import importlib
import json
import os
import re
import runpy
import stat
import subprocess
import sys
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel, PolicyConfigSchema, StackValidationPolicy

import policy.gpu_allocation.pack
from policy.gpu_allocation.pack import PACK_NAME, build_policies
from policy.gpu_allocation.rules.sdk_internals import (
    STACK_CONFIG_ENV,
    AnalyzerServicer,
    take_stack_config_from_configure_stack,
)
from tests.support.policy_harness import ROOT, Harness

pytestmark = pytest.mark.policy

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

EXPECTED_LEVELS = {
    "single-allocation-owner": MANDATORY,
    "operator-device-plugin-disabled": MANDATORY,
    "gpu-cluster-excludes-standalone-dra": MANDATORY,
    "compute-domain-crds-one-owner": MANDATORY,
    "nfd-one-owner": MANDATORY,
    "ownership-ledger-consistent": MANDATORY,
    "operator-cr-exclusive": MANDATORY,
    "operator-operand-tolerations-reviewed": ADVISORY,
    "no-auto-mode-targeting": MANDATORY,
    "gpu-discovery-affinity-kept": MANDATORY,
    "smoke-job-hardened": MANDATORY,
    "smoke-job-run-approved": ADVISORY,
    "smoke-job-token-unmounted": MANDATORY,
    "gpu-request-shape": MANDATORY,
    "no-visible-devices-override": MANDATORY,
    "no-dual-allocation": MANDATORY,
    "shared-gpu-resource-name": MANDATORY,
    "time-slicing-config-attached": ADVISORY,
    "mig-strategy-consistent": MANDATORY,
    "dra-api-current": MANDATORY,
    "dra-feature-gates-allowlisted": MANDATORY,
    "dra-webhook-needs-tls": MANDATORY,
    "dra-extended-resource-name-unique": MANDATORY,
    "dra-extended-resource-one-publisher": MANDATORY,
    "dra-extended-resource-request-served": MANDATORY,
    "dra-claim-on-dra-cohort": MANDATORY,
    "dra-extended-resource-gate-on": ADVISORY,
    "driver-ownership-consistent": MANDATORY,
    "driver-verification-declared": ADVISORY,
    "chart-version-pinned": MANDATORY,
    "operator-hooks-kept": MANDATORY,
}
STACK_POLICIES = {
    "single-allocation-owner",
    "operator-device-plugin-disabled",
    "gpu-cluster-excludes-standalone-dra",
    "compute-domain-crds-one-owner",
    "nfd-one-owner",
    "ownership-ledger-consistent",
    "operator-cr-exclusive",
    "operator-operand-tolerations-reviewed",
    "smoke-job-token-unmounted",
    "no-visible-devices-override",
    "shared-gpu-resource-name",
    "time-slicing-config-attached",
    "mig-strategy-consistent",
    "dra-extended-resource-name-unique",
    "dra-extended-resource-one-publisher",
    "dra-extended-resource-request-served",
    "dra-claim-on-dra-cohort",
    "dra-extended-resource-gate-on",
    "driver-ownership-consistent",
    "driver-verification-declared",
}


def test_policy_names_and_default_levels() -> None:
    policies = build_policies()
    names = [p.name for p in policies]
    assert len(names) == len(set(names))
    assert {p.name: p.enforcement_level for p in policies} == EXPECTED_LEVELS
    assert {p.name for p in policies if isinstance(p, StackValidationPolicy)} == STACK_POLICIES


@pytest.mark.parametrize("policy", build_policies(), ids=lambda p: p.name)
def test_policy_metadata(policy: Any) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", policy.name)
    description = policy.description
    assert description.endswith(".")
    assert ". " not in description, "the description is one sentence"
    assert policy.remediation_steps
    assert "eks-hybrid-gpu:" in policy.remediation_steps or policy.name == "operator-hooks-kept"
    assert policy.url.startswith("https://")
    assert policy.severity is not None
    assert isinstance(policy.config_schema, PolicyConfigSchema)
    assert "enforcementLevel" not in policy.config_schema.properties


def test_main_serves_the_self_contained_package_without_touching_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine runs __main__ with policy/ as sys.path[0]: it imports `gpu_allocation` and nothing above it."""
    policy_dir = str(ROOT / "policy")
    monkeypatch.setattr(sys, "path", [policy_dir, *sys.path])
    for name in [m for m in sys.modules if m == "gpu_allocation" or m.startswith("gpu_allocation.")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        pack = importlib.import_module("gpu_allocation.pack")
        calls: list[list[str]] = []
        monkeypatch.setattr(pack, "serve", lambda: calls.append(list(sys.path)))
        runpy.run_path(str(ROOT / "policy" / "__main__.py"), run_name="__main__")
    finally:
        for name in [m for m in sys.modules if m == "gpu_allocation" or m.startswith("gpu_allocation.")]:
            sys.modules.pop(name)
    assert calls == [[policy_dir, *sys.path[1:]]]


def test_serve_builds_the_named_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    built: dict[str, Any] = {}

    def fake_pack(**kwargs: Any) -> None:
        built.update(kwargs)

    monkeypatch.setattr(policy.gpu_allocation.pack, "PolicyPack", fake_pack)
    policy.gpu_allocation.pack.serve()
    assert built["name"] == PACK_NAME == "eks-hybrid-gpu"
    assert [p.name for p in built["policies"]] == list(EXPECTED_LEVELS)


def test_pulumi_policy_yaml_and_requirements() -> None:
    manifest = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    assert manifest["runtime"] == "python"
    requirements = (ROOT / "policy" / "requirements.txt").read_text().splitlines()
    assert "pulumi-policy==1.21.0" in requirements
    assert "pulumi==3.272.0" in requirements


def test_analyzer_script_launches_the_pack_with_python3_by_default(tmp_path: Any) -> None:
    """Without PULUMI_PYTHON_CMD it runs `python3 -u -m pulumi.policy ENGINE PACK_DIR` (python3 from PATH), from
    any directory; with it, see test_analyzer_script_serves_the_pack_over_grpc."""
    script = ROOT / "policy" / "analyzer"
    assert script.stat().st_mode & stat.S_IXUSR
    # Only the text shows the interpreter the CLI will start: /bin/sh, so the pack needs no bash where it runs.
    assert script.read_text().startswith("#!/bin/sh\n")
    python3 = tmp_path / "bin" / "python3"
    python3.parent.mkdir()
    python3.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    python3.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "PULUMI_PYTHON_CMD"}
    environment["PATH"] = f"{python3.parent}{os.pathsep}/usr/bin{os.pathsep}/bin"
    ran = subprocess.run(
        [str(script), "127.0.0.1:1"], capture_output=True, text=True, env=environment, cwd=tmp_path, check=True
    )
    assert ran.stdout.splitlines() == ["-u", "-m", "pulumi.policy", "127.0.0.1:1", str(ROOT / "policy")]


def test_readme_documents_every_policy_with_its_level() -> None:
    readme = (ROOT / "policy" / "README.md").read_text()
    for name, level in EXPECTED_LEVELS.items():
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, name
        assert f"| {level.value} |" in row, name
    example = re.search(r"```json\n(.*?)```", readme, re.DOTALL)
    assert example is not None
    config = json.loads(example.group(1))
    assert set(config) <= set(EXPECTED_LEVELS)
    assert "--policy-pack policy/analyzer" in readme
    assert "--policy-pack policy" in readme


def test_workflow_previews_every_stack_with_the_pack(tmp_path: Any) -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "policy-preview.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))
    assert "pull_request" in triggers
    steps = [s for job in workflow["jobs"].values() for s in job.get("steps", [])]
    pulumi = [s for s in steps if str(s.get("uses", "")).startswith("pulumi/actions@v6")]
    assert pulumi
    assert pulumi[0]["with"]["command"] == "preview"
    assert pulumi[0]["with"]["policyPacks"] == "policy"
    assert str(pulumi[0]["with"]["comment-on-pr"]).lower() == "true"
    # The matrix is what the listing step prints: run that step on this checkout, as the runner would.
    assert workflow["jobs"]["preview"]["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.names) }}"
    listing = next(s for s in workflow["jobs"]["stacks"]["steps"] if s.get("id") == "list")
    output = tmp_path / "github-output"
    environment = {**os.environ, "GITHUB_OUTPUT": str(output)}
    subprocess.run(
        [listing.get("shell", "bash"), "-c", listing["run"]], cwd=ROOT, env=environment, check=True, capture_output=True
    )
    names = output.read_text().strip().removeprefix("names=")
    stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert json.loads(names) == stacks
    assert len(stacks) >= 6


def _preview_steps() -> list[dict[str, Any]]:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "policy-preview.yml").read_text())
    steps: list[dict[str, Any]] = workflow["jobs"]["preview"]["steps"]
    return steps


def _choose_backend(tmp_path: Any, stack: str, **variables: str) -> tuple[int, dict[str, str], str]:
    """Runs the preview job's backend step on this checkout, as the runner would, with the repository's settings."""
    step = next(s for s in _preview_steps() if s.get("id") == "backend")
    output = tmp_path / f"github-output-{stack}-{len(variables)}"
    output.write_text("")
    settings = {"BACKEND_URL": "", "HAS_TOKEN": "false", "WITHOUT_BACKEND": "skip", **variables}
    environment = {**os.environ, "GITHUB_OUTPUT": str(output), "HOME": str(tmp_path), "STACK": stack, **settings}
    done = subprocess.run(
        [step.get("shell", "bash"), "-c", step["run"]], cwd=ROOT, env=environment, capture_output=True, text=True
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done.returncode, outputs, done.stdout


@pytest.mark.policy
def test_workflow_never_previews_an_eks_stack_against_empty_state(tmp_path: Any) -> None:
    code, outputs, said = _choose_backend(tmp_path, "dra")
    assert (code, outputs) == (0, {"run": "false"})
    assert said.startswith("::notice title=preview of dra skipped::stack dra: no state backend is configured")
    assert "PULUMI_BACKEND_URL" in said
    code, outputs, said = _choose_backend(tmp_path, "dra", WITHOUT_BACKEND="fail")
    assert code == 1
    assert "run" not in outputs
    assert said.startswith("::error title=preview of dra::")
    code, _, said = _choose_backend(tmp_path, "dra", WITHOUT_BACKEND="maybe")
    assert code == 1
    assert "set it to skip or fail" in said
    code, outputs, _ = _choose_backend(tmp_path, "dra", BACKEND_URL="s3://team-state")
    assert (code, outputs) == (0, {"run": "true", "cloud-url": "s3://team-state"})
    code, outputs, _ = _choose_backend(tmp_path, "dra", HAS_TOKEN="true")  # noqa: S106 (a flag, not a token)
    assert outputs == {"run": "true", "cloud-url": "https://api.pulumi.com"}
    # the local stack's cluster is started by the job itself: its state is new by construction
    code, outputs, _ = _choose_backend(tmp_path, "local")
    assert (code, outputs) == (0, {"run": "true", "cloud-url": f"file://{tmp_path}/.pulumi-state"})


@pytest.mark.policy
def test_workflow_skips_every_later_step_without_a_backend_and_installs_from_the_lock() -> None:
    steps = _preview_steps()
    after = steps[[s.get("id") for s in steps].index("backend") + 1 :]
    assert after
    assert all("steps.backend.outputs.run == 'true'" in str(s.get("if", "")) for s in after)
    preview = next(s for s in after if str(s.get("uses", "")).startswith("pulumi/actions@"))
    assert preview["with"]["cloud-url"] == "${{ steps.backend.outputs.cloud-url }}"
    install = "\n".join(str(s.get("run", "")) for s in after)
    assert "scripts/bootstrap.sh" in install
    assert "install -e ." not in install
    assert "--require-hashes -r requirements.lock" in (ROOT / "scripts" / "bootstrap.sh").read_text()


# --------------------------------------------------------------------------- the analyzer


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _servicer() -> Any:
    return AnalyzerServicer(PACK_NAME, "0.1.0", build_policies(), ADVISORY)


def _tagged_job(harness: Harness) -> dict[str, Any]:
    job = harness.find("seed-smoke-jobs.yaml", "Job", "hybrid-gpu-plugin-smoke")
    job["metadata"]["labels"] = {"eks-hybrid-gpu.io/smoke-job": "true"}
    return job


def test_real_analyzer_reports_with_default_level(harness: Harness) -> None:
    servicer = _servicer()
    job = _tagged_job(harness)
    request = proto.AnalyzeRequest(type="kubernetes:batch/v1:Job", properties=_struct(job), urn="urn:x", name="smoke")
    response = servicer.Analyze(request, None)
    diagnostics = [d for d in response.diagnostics if d.policyName == "smoke-job-hardened"]
    assert len(diagnostics) == 1
    assert diagnostics[0].enforcementLevel == proto.MANDATORY
    assert diagnostics[0].message.startswith(diagnostics[0].description + "\n")
    assert "not pinned by an @sha256: digest" in diagnostics[0].message
    not_applicable = {n.policy_name for n in response.not_applicable}
    assert "chart-version-pinned" in not_applicable


def test_the_stack_config_of_configure_stack_reaches_the_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STACK_CONFIG_ENV, raising=False)
    take_stack_config_from_configure_stack()
    take_stack_config_from_configure_stack()  # twice is once
    servicer = _servicer()
    cluster = json.dumps({"source": "local", "kubernetesVersion": "1.34.4"})
    request = proto.AnalyzerStackConfigureRequest(stack="s", project="p", config={"eks-hybrid-gpu:cluster": cluster})
    servicer.ConfigureStack(request, None)
    assert json.loads(os.environ[STACK_CONFIG_ENV]) == {"eks-hybrid-gpu:cluster": cluster}
    # A config the engine already put in the environment (the old shim's) is not replaced; an empty one is none.
    monkeypatch.setenv(STACK_CONFIG_ENV, '{"eks-hybrid-gpu:cluster": "{}"}')
    servicer.ConfigureStack(request, None)
    assert os.environ[STACK_CONFIG_ENV] == '{"eks-hybrid-gpu:cluster": "{}"}'
    monkeypatch.delenv(STACK_CONFIG_ENV)
    servicer.ConfigureStack(proto.AnalyzerStackConfigureRequest(stack="s"), None)
    assert STACK_CONFIG_ENV not in os.environ


def test_pack_config_overrides_enforcement_level_and_thresholds(harness: Harness) -> None:
    servicer = _servicer()
    config = {
        "smoke-job-hardened": proto.PolicyConfig(enforcementLevel=proto.ADVISORY),
        "gpu-request-shape": proto.PolicyConfig(enforcementLevel=proto.DISABLED),
    }
    servicer.Configure(proto.ConfigureAnalyzerRequest(policyConfig=config), None)
    job = _tagged_job(harness)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    request = proto.AnalyzeRequest(type="kubernetes:batch/v1:Job", properties=_struct(job), urn="urn:x", name="smoke")
    response = servicer.Analyze(request, None)
    by_policy = {d.policyName: d for d in response.diagnostics}
    assert by_policy["smoke-job-hardened"].enforcementLevel == proto.ADVISORY
    assert "gpu-request-shape" not in by_policy


def test_analyzer_info_lists_levels_and_schemas() -> None:
    info = _servicer().GetAnalyzerInfo(None, None)
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert levels["driver-verification-declared"] == proto.ADVISORY
    assert levels["single-allocation-owner"] == proto.MANDATORY
    schemas = {p.name: p.configSchema for p in info.policies}
    assert "maxActiveDeadlineSeconds" in schemas["smoke-job-hardened"].properties
    assert "allowedFeatureGates" in schemas["dra-feature-gates-allowlisted"].properties


def test_real_analyzer_survives_unknowns_in_a_stack() -> None:
    servicer = _servicer()
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    resources = [
        proto.AnalyzerResource(
            type="kubernetes:helm.sh/v4:Chart",
            properties=_struct({"chart": "nvidia-device-plugin", "version": "0.20.0", "values": unknown}),
            urn="urn:chart",
            name="dp",
        ),
        proto.AnalyzerResource(
            type="kubernetes:core/v1:ConfigMap",
            properties=_struct({"metadata": {"name": "gpu-allocation-ledger"}, "data": unknown}),
            urn="urn:ledger",
            name="ledger",
        ),
    ]
    response = servicer.AnalyzeStack(proto.AnalyzeStackRequest(resources=resources), None)
    assert not [d for d in response.diagnostics if "can't run policy" in d.message]


def test_analyzer_script_serves_the_pack_over_grpc(harness: Harness, tmp_path: Any) -> None:
    """Start policy/analyzer like the CLI does (engine address first) and talk to it over gRPC."""
    environment = {**os.environ, "PULUMI_PYTHON_CMD": sys.executable}
    process = subprocess.Popen(
        [str(ROOT / "policy" / "analyzer"), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=tmp_path,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().decode().strip())
        stub = analyzer_pb2_grpc.AnalyzerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        assert info.name == PACK_NAME
        assert [p.name for p in info.policies] == list(EXPECTED_LEVELS)
        request = proto.AnalyzeRequest(
            type="kubernetes:batch/v1:Job", properties=_struct(_tagged_job(harness)), urn="urn:x", name="smoke"
        )
        response = stub.Analyze(request, timeout=30)
        assert {d.policyName for d in response.diagnostics} == {"smoke-job-hardened"}
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
