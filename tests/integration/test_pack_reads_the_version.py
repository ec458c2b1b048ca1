"""The pack judges a class mapping `nvidia.com/gpu` by the Kubernetes version the stack's config declares.

The version policies read it from the stack config the engine hands the analyzer in its ConfigureStack call
(policy/gpu_allocation/rules/cluster_version.py, sdk_internals.take_stack_config_from_configure_stack). The policy
tests give the pack that config directly; here the real engine does, in a real `pulumi preview` with the pack, so a
stack config that never reached the analyzer shows as "cannot know the cluster's Kubernetes version" on both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest

from eks_hybrid_gpu import engine
from tests.integration.helpers import cluster_provider, refused_by, work_dir_with_stack

pytestmark = [pytest.mark.integration]

POLICY = "dra-extended-resource-gate-on"
UNKNOWN = "cannot know the cluster's Kubernetes version"
HYBRID_DRA = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "dra"}
IMAGE = "registry.example.com/train@sha256:" + "b" * 64


def _mapping_and_a_plain_request(engine_env: engine.EngineEnv) -> Callable[[], None]:
    """A class mapping `nvidia.com/gpu` and a suspended Job asking it plainly that may land only on DRA nodes."""

    def program() -> None:
        provider = pulumi.ResourceOptions(provider=cluster_provider(engine_env))
        k8s.apiextensions.CustomResource(
            "keep-gpu-name",
            api_version="resource.k8s.io/v1",
            kind="DeviceClass",
            metadata={"name": "keep-gpu-name"},
            spec={
                "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                "extendedResourceName": "nvidia.com/gpu",
            },
            opts=provider,
        )
        k8s.batch.v1.Job(
            "plain-gpu",
            metadata={"name": "plain-gpu", "namespace": "default", "annotations": {"pulumi.com/skipAwait": "true"}},
            spec={
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": HYBRID_DRA,
                        "containers": [
                            {"name": "train", "image": IMAGE, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                        ],
                    }
                },
            },
            opts=provider,
        )

    return program


def _preview(engine_env: engine.EngineEnv, tmp_path: Path, name: str, version: str) -> str:
    tmp_path.mkdir()
    cluster = {"source": "local", "kubernetesVersion": version, "skipAwait": True, "preflight": False}
    work = work_dir_with_stack(tmp_path, name, {"cluster": cluster})
    stack = engine.stack(engine_env, name, work_dir=work, program=_mapping_and_a_plain_request(engine_env))
    lines: list[str] = []
    try:
        stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
    except pulumi.automation.CommandError as error:
        lines.append(str(error))
    output = "\n".join(lines)
    assert "can't run policy" not in output
    return output


def test_the_version_in_the_stack_config_reaches_the_pack(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    old = _preview(engine_env, tmp_path / "old", "keep-name-134", "1.34.4")
    assert f"[advisory] [severity: medium]  {POLICY}" in old, old
    assert "DRAExtendedResource is off in Kubernetes 1.34" in old
    assert "kubernetesVersion '1.34.4' in the stack config" in old
    assert UNKNOWN not in old
    assert refused_by(old) == {}

    new = _preview(engine_env, tmp_path / "new", "keep-name-137", "1.37.2")
    assert POLICY not in new, new
    assert UNKNOWN not in new
    assert refused_by(new) == {}
