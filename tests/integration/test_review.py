"""`eks-hybrid-gpu review` with the real engine and provider: renders, diffs, summaries and exit codes.

Helm takes its capabilities from the session's local 1.34 API server; nothing is applied to it. The EKS stacks
render through `../shared/charts` served as a Helm repository (the chart mirror), since there is no internet.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from eks_hybrid_gpu import chartfetch, engine, localcluster, projectdir
from eks_hybrid_gpu.review import ReviewInput, main, review, write_review
from eks_hybrid_gpu.review.render import (
    RENDER_MODE_NOTE,
    RenderEnv,
    RenderError,
    RenderModeMissingError,
    chart_mirror,
    make_env,
    policy_setup,
    render_stack,
)
from eks_hybrid_gpu.review.report import Review, summary
from tests.integration.helpers import api, work_dir_with_stack
from tests.support import charts

pytestmark = [pytest.mark.integration, pytest.mark.charts]

SHARED_CHARTS = charts.folder()
STACKS = projectdir.SHIPPED / "stacks"
OFFLINE_STACKS = {
    "local": {"plugin": "device-plugin", "dra": "dra"},
    "device-plugin": {"plugin": "device-plugin"},
    "operator-cluster-policy": {"operator": "gpu-operator"},
    "operator-gpu-cluster": {"operator": "gpu-operator"},
    "dra": {"dra": "dra"},
    "mixed": {"plugin": "device-plugin", "dra": "dra"},
}
DRA_STACKS = ["dra", "mixed"]
"""They pin dra-driver-nvidia-gpu 0.5.0, the seed's release: a mirror without that archive cannot render them."""
PLUGIN_CONFIGS = "ConfigMap/gpu-system/hybrid-gpu-plugin-nvidia-device-plugin-configs.yaml"
PLUGIN_DS = "DaemonSet/gpu-system/hybrid-gpu-plugin-nvidia-device-plugin.yaml"
PLUGIN_MPS_DS = "DaemonSet/gpu-system/hybrid-gpu-plugin-nvidia-device-plugin-mps-control-daemon.yaml"
KUBELET_PLUGIN_DS = "DaemonSet/gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin.yaml"
LEDGER = "ConfigMap/gpu-system/gpu-allocation-ledger.yaml"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    return policy_setup(tmp_path_factory.mktemp("policy"))


@pytest.fixture(scope="module")
def mirror() -> Iterator[tuple[str, dict[str, Any]]]:
    with chart_mirror(SHARED_CHARTS) as served:
        yield served


@pytest.fixture
def render_env(
    toolchain: engine.Toolchain,
    cluster: localcluster.LocalCluster,
    policy: tuple[dict[str, str], Path],
    mirror: tuple[str, dict[str, Any]],
    tmp_path: Path,
) -> RenderEnv:
    levels, config = policy
    url, index = mirror
    return make_env(
        toolchain,
        cluster.kubeconfig,
        tmp_path / "renders",
        chart_mirror=url,
        chart_mirror_index=index,
        policy_levels=levels,
        policy_config=config,
    )


def _variant(tmp: Path, name: str, overrides: dict[str, Any]) -> Path:
    """The local stack with `overrides`, as stacks/Pulumi.v.yaml of its own folder."""
    (tmp / name).mkdir()
    return work_dir_with_stack(tmp / name, "v", overrides) / "stacks" / "Pulumi.v.yaml"


def _changed_lines(diff: str) -> dict[str, list[str]]:
    """File -> its -/+ lines, from a unified diff."""
    files: dict[str, list[str]] = {}
    current = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line.removeprefix("+++ ").removeprefix("b/")
            files[current] = []
        elif line.startswith("--- "):
            continue
        elif line[:1] in "+-":
            files[current].append(line)
    return files


def _review_pair(env: RenderEnv, stack: str, head: Path, base: Path) -> Review:
    return review(
        stack, ReviewInput(projectdir.SHIPPED, head, "head"), ReviewInput(projectdir.SHIPPED, base, "base"), env
    )


@pytest.mark.parametrize("stack", sorted(OFFLINE_STACKS))
def test_render_is_deterministic(render_env: RenderEnv, stack: str) -> None:
    stack_file = STACKS / f"Pulumi.{stack}.yaml"

    result = _review_pair(render_env, stack, stack_file, stack_file)

    assert result.head.tree == result.base.tree
    assert result.changes == ()
    assert result.diff == ""
    assert {name: c["owner"] for name, c in result.head.ownership["cohorts"].items()} == OFFLINE_STACKS[stack]
    text = "".join(result.head.tree.values())
    assert str(projectdir.SHIPPED) not in text
    assert str(SHARED_CHARTS) not in text
    assert all(re.fullmatch(r"[A-Za-z]+/[a-z0-9_.-]+/[A-Za-z0-9_.-]+\.yaml", path) for path in result.head.tree)
    assert result.exit_code == 0, result.head.policy
    if "gpu-operator" in OFFLINE_STACKS[stack].values():
        assert result.head.notes == (RENDER_MODE_NOTE,)
        kinds = {path.split("/")[0] for path in result.head.tree}
        assert {"Deployment", "CustomResourceDefinition"} <= kinds
        assert ("ClusterPolicy" in kinds) is (stack == "operator-cluster-policy")
        assert ("GPUCluster" in kinds) is (stack == "operator-gpu-cluster")


@pytest.mark.parametrize("stack", DRA_STACKS)
def test_dra_stacks_refuse_a_mirror_without_the_pinned_0_5_0(render_env: RenderEnv, stack: str, tmp_path: Path) -> None:
    stack_file = STACKS / f"Pulumi.{stack}.yaml"
    folder = tmp_path / "mirror-0.4.1"
    folder.mkdir()
    for archive in (charts.device_plugin(), charts.dra_driver(), charts.gpu_operator()):
        (folder / archive.name).symlink_to(archive)
    chartfetch.write_index(folder)
    with chart_mirror(folder) as (url, index):
        old = dataclasses.replace(render_env, chart_mirror=url, chart_mirror_index=index)
        with pytest.raises(RenderError, match=r"no dra-driver-nvidia-gpu 0\.5\.0 \(it has 0\.4\.1\)"):
            review(stack, ReviewInput(projectdir.SHIPPED, stack_file, "head"), None, old)


def test_time_slicing_replicas_change_is_a_small_diff(render_env: RenderEnv, tmp_path: Path) -> None:
    def plugin(replicas: int) -> dict[str, Any]:
        sharing = {"mode": "time-slicing", "replicas": replicas}
        return {
            "cohorts": [{"name": "plugin", "owner": "device-plugin", "hostDriverVerified": True, "sharing": sharing}]
        }

    result = _review_pair(render_env, "v", _variant(tmp_path, "head", plugin(2)), _variant(tmp_path, "base", plugin(4)))

    assert [(c.path, c.status) for c in result.changes] == [
        (PLUGIN_CONFIGS, "changed"),
        (PLUGIN_MPS_DS, "changed"),
        (PLUGIN_DS, "changed"),
    ]
    lines = _changed_lines(result.diff)
    assert lines[PLUGIN_CONFIGS] == ["-          replicas: 4", "+          replicas: 2"]
    checksum = r"[-+]        checksum/config: [0-9a-f]{64}"
    for daemonset in (PLUGIN_DS, PLUGIN_MPS_DS):
        assert len(lines[daemonset]) == 2
        assert all(re.fullmatch(checksum, line) for line in lines[daemonset]), lines[daemonset]
        assert lines[daemonset][0][1:].split(": ")[1] != lines[daemonset][1][1:].split(": ")[1]
    assert result.head.ownership == result.base.ownership
    assert "Ownership changes: none" in summary(result, [])


def test_owner_flip_moves_the_daemonsets_and_the_ledger(render_env: RenderEnv, tmp_path: Path) -> None:
    selector = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "gpu-a"}

    def owned_by(owner: str) -> dict[str, Any]:
        return {"cohorts": [{"name": "gpu-a", "owner": owner, "hostDriverVerified": True, "nodeSelector": selector}]}

    head, base = _variant(tmp_path, "head", owned_by("dra")), _variant(tmp_path, "base", owned_by("device-plugin"))
    result = _review_pair(render_env, "v", head, base)

    status = {c.path: c.status for c in result.changes}
    daemonsets = {path: s for path, s in status.items() if path.startswith("DaemonSet/")}
    assert daemonsets == {
        "DaemonSet/gpu-system/hybrid-gpu-gpu-a-nvidia-device-plugin.yaml": "removed",
        "DaemonSet/gpu-system/hybrid-gpu-gpu-a-nvidia-device-plugin-mps-control-daemon.yaml": "removed",
        KUBELET_PLUGIN_DS: "added",
    }
    assert status[LEDGER] == "changed"
    kubelet_plugin = yaml.safe_load(result.head.tree[KUBELET_PLUGIN_DS])
    assert kubelet_plugin["spec"]["template"]["spec"]["nodeSelector"] == selector
    assert kubelet_plugin["metadata"]["labels"]["eks-hybrid-gpu.io/owner"] == "dra"

    text = summary(result, [])
    assert "- cohort `gpu-a`: owner `device-plugin` → `dra`" in text
    migration = text.split("### Owner migrations")[1].split("###")[0]
    assert f"run `eks-hybrid-gpu migrate --stack {result.stack} --cohort gpu-a --to dra`" in migration
    assert "3. [wait-unpublished] wait until no allocator pod is left" in migration
    before, after = text.split("**After (head)**")
    assert "| `gpu-a` | `device-plugin` | none | `gpu-system` |" in before
    assert "| `gpu-a` | `dra` | none | `gpu-dra-system` |" in after
    assert f"| `{KUBELET_PLUGIN_DS}` | added |" in text
    assert 'owner_gpu_a[["dra<br/>namespace gpu-dra-system"]]' in text


def test_the_ledger_is_read_in_the_stacks_own_device_plugin_namespace(render_env: RenderEnv, tmp_path: Path) -> None:
    cohorts = [{"name": "plugin", "owner": "device-plugin", "hostDriverVerified": True}]
    head = _variant(tmp_path, "head", {"cohorts": cohorts, "namespaces": {"devicePlugin": "team-gpu"}})

    result = review("v", ReviewInput(projectdir.SHIPPED, head, "head"), None, render_env)

    assert "ConfigMap/team-gpu/gpu-allocation-ledger.yaml" in result.head.tree
    assert LEDGER not in result.head.tree
    assert result.head.ledger_problem is None
    assert {name: c["owner"] for name, c in result.head.ownership["cohorts"].items()} == {"plugin": "device-plugin"}
    text = summary(result, [])
    assert "| `plugin` | `device-plugin` | none | `team-gpu` |" in text
    assert "_no cohorts_" not in text
    assert 'owner_plugin[["device-plugin<br/>namespace team-gpu"]]' in text


def test_mandatory_violation_exits_1(render_env: RenderEnv, tmp_path: Path) -> None:
    overrides = {
        "cohorts": [{"name": "dra", "owner": "dra", "hostDriverVerified": True}],
        "dra": {"featureGates": {"MPSSupport": True}},
    }
    head = _variant(tmp_path, "head", overrides)

    result = review("v", ReviewInput(projectdir.SHIPPED, head, "head"), None, render_env)

    assert result.exit_code == 1
    failing = {(p.level, p.policy, p.object) for p in result.mandatory_failures}
    assert (
        "mandatory",
        "dra-feature-gates-allowlisted",
        "DaemonSet gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin",
    ) in failing
    text = summary(result, list(render_env.policy_levels))
    assert "❌ **" in text
    assert "| mandatory | `dra-feature-gates-allowlisted` | DaemonSet gpu-dra-system/" in text


FAKE_PROGRAM = """
import os
import pulumi
import pulumi_kubernetes as k8s

def run(project_dir, render_dir=None):
    # It takes render mode's argument and ignores it: a provider that names a real cluster, which the review's
    # safety net must turn into a render provider.
    provider = k8s.Provider("p", kubeconfig=os.environ["REVIEW_TEST_KUBECONFIG"])
    opts = pulumi.ResourceOptions(provider=provider)
    k8s.core.v1.Secret("s", metadata={"name": "creds", "namespace": "default"},
                       string_data={"password": "hunter2-plain"}, data={"token": "c2VjcmV0LXRva2Vu"}, opts=opts)
    k8s.core.v1.ConfigMap("c", metadata={"name": "access", "namespace": "default"},
                          data={"kubeconfig": "users:\\n- name: admin\\n  user:\\n    token: %s\\n"}, opts=opts)
    # A Pulumi secret in a field that no key rule calls sensitive: the provider reports the file.
    k8s.core.v1.ConfigMap("m", metadata={"name": "motd", "namespace": "default"},
                          data={"message": pulumi.Output.secret("config-secret-in-plain-field")}, opts=opts)
"""


def _checkout(root: Path, program: str, cluster_module: str | None = None) -> Path:
    """A checkout of a program of our project with one stack, `fake`: its program (and components.cluster) module."""
    checkout = root / "checkout"
    (checkout / "components").mkdir(parents=True)
    (checkout / "stacks").mkdir()
    (checkout / "Pulumi.yaml").write_text("name: eks-hybrid-gpu\nruntime: python\nstackConfigDir: stacks\n")
    (checkout / "components" / "__init__.py").write_text("")
    if cluster_module is not None:
        (checkout / "components" / "cluster.py").write_text(cluster_module)
    (checkout / "components" / "program.py").write_text(program)
    (checkout / "stacks" / "Pulumi.fake.yaml").write_text("config: {}\n")
    return checkout


def test_secrets_never_reach_the_output_and_nothing_is_applied(
    render_env: RenderEnv, cluster: localcluster.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, FAKE_PROGRAM % cluster.token)
    monkeypatch.setenv("REVIEW_TEST_KUBECONFIG", str(cluster.kubeconfig))

    result = review("fake", ReviewInput(checkout, checkout / "stacks" / "Pulumi.fake.yaml", "head"), None, render_env)
    write_review(result, tmp_path / "out", [])

    assert sorted(result.head.tree) == [
        "ConfigMap/default/access.yaml",
        "ConfigMap/default/motd.yaml",
        "Secret/default/creds.yaml",
    ]
    assert yaml.safe_load(result.head.tree["ConfigMap/default/motd.yaml"])["data"] == {"message": "<redacted>"}
    assert yaml.safe_load(result.head.tree["Secret/default/creds.yaml"])["data"] == {
        "password": "<redacted>",
        "token": "<redacted>",
    }
    written = "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
    plain = ("hunter2-plain", "c2VjcmV0LXRva2Vu", "aHVudGVyMi1wbGFpbg==", "config-secret-in-plain", cluster.token)
    for secret in plain:
        assert secret not in written
    core = client.CoreV1Api(api(cluster.kubeconfig))
    assert [s.metadata.name for s in core.list_namespaced_secret("default").items] == []
    assert "access" not in [c.metadata.name for c in core.list_namespaced_config_map("default").items]


@pytest.mark.parametrize(
    "program",
    [
        "def run(project_dir):\n    raise AssertionError('a program without render mode must not run')\n",
        "raise ImportError('a program from long ago that no longer imports')\n",
    ],
    ids=["no-render-mode", "import-fails"],
)
def test_a_program_without_any_render_mode_is_reported_not_run(
    render_env: RenderEnv, tmp_path: Path, program: str
) -> None:
    # No `run(..., render_dir=...)`: the review renders such a base's stack file with the head's program and says
    # so (BASE_WITHOUT_RENDER_MODE).
    checkout = _checkout(tmp_path, program, cluster_module="")

    with pytest.raises(RenderModeMissingError, match="has no render mode"):
        render_stack(checkout, "fake", checkout / "stacks" / "Pulumi.fake.yaml", render_env, label="base", policy=False)


def test_command_against_a_git_ref(
    cluster: localcluster.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    # The local stack takes its charts from upstream; offline, the mirror stands in (through the environment).
    monkeypatch.setenv("EKS_HYBRID_GPU_CHART_MIRROR", str(SHARED_CHARTS))

    code = main(["--stack", "local", "--base", "HEAD", "--out", str(out), "--kubeconfig", str(cluster.kubeconfig)])

    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["base", "head", "result.json", "review.diff", "summary.md"]
    text = (out / "summary.md").read_text()
    assert text.startswith("## GPU allocation review: stack `local`\n\nBase: `HEAD` (")
    assert (out / "head" / "ConfigMap" / "gpu-system" / "gpu-allocation-ledger.yaml").is_file()
    assert (out / "base" / "ConfigMap" / "gpu-system" / "gpu-allocation-ledger.yaml").is_file()
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert cluster.token not in written
