"""`pulumi policy publish` uploads policy/ alone: the pack must start and judge from a copy of that folder.

The copy lives outside the repository and runs in a virtual environment built from policy/requirements.txt and
nothing else (cached per requirements and interpreter), so an import of `components` or a `sys.path` reach into
the repository fails here exactly as it would for a platform team.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc

from policy.gpu_allocation.pack import PACK_NAME, build_policies
from tests.support.policy_harness import ROOT

from .test_foreign_stacks import dra, static_plugin

pytestmark = pytest.mark.policy

REQUIREMENTS = ROOT / "policy" / "requirements.txt"


def _pack_python() -> Path:
    """An interpreter with policy/requirements.txt installed and nothing of this repository."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eks-hybrid-gpu" / f"pack-venv-{key}"
    python = cache / "bin" / "python"
    if python.exists():
        return python
    partial = cache.with_name(f"{cache.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True, timeout=120)
    pip = [str(partial / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True, timeout=600)
    partial.rename(cache)
    return python


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(interpreter, copy of policy/) with the copy in a folder that holds nothing else."""
    python = _pack_python()
    copy = tmp_path_factory.mktemp("published") / "eks-hybrid-gpu-pack"
    shutil.copytree(ROOT / "policy", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return python, copy


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def test_the_pack_environment_cannot_reach_the_repository(published: tuple[Path, Path]) -> None:
    python, copy = published
    probe = "import importlib.util as u; print([m for m in ('components', 'eks_hybrid_gpu') if u.find_spec(m)])"
    completed = subprocess.run(
        [str(python), "-c", probe], cwd=copy.parent, capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "[]"


@pytest.mark.charts
def test_a_copy_of_policy_alone_serves_and_judges_a_foreign_stack(published: tuple[Path, Path]) -> None:
    python, copy = published
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.Popen(
        [str(copy / "analyzer"), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**environment, "PULUMI_PYTHON_CMD": str(python)},
        cwd=copy.parent,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        assert line.isdigit(), process.stderr.read().decode() if process.stderr else line
        stub = analyzer_pb2_grpc.AnalyzerStub(grpc.insecure_channel(f"127.0.0.1:{line}"))
        info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        assert info.name == PACK_NAME
        assert [p.name for p in info.policies] == [p.name for p in build_policies()]
        resources = []
        for index, manifest in enumerate([static_plugin(), *dra()]):
            kind, version = manifest["kind"], manifest["apiVersion"]
            group = version if "/" in version else f"core/{version}"
            resources.append(
                proto.AnalyzerResource(
                    type=f"kubernetes:{group}:{kind}",
                    properties=_struct(manifest),
                    urn=f"urn:pulumi:team::platform-gpu::kubernetes:{group}:{kind}::r{index}",
                    name=f"r{index}",
                )
            )
        response = stub.AnalyzeStack(proto.AnalyzeStackRequest(resources=resources), timeout=60)
        names = sorted(d.policyName for d in response.diagnostics)
        assert "single-allocation-owner" in names, [d.message for d in response.diagnostics]
    finally:
        process.terminate()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
