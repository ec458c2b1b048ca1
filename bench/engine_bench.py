"""Real `pulumi preview`s against one local Kubernetes API server (the toolchain's default version).

Everything runs in one throw-away area (temporary directory): one local API server, one Pulumi home
and file backend, one work dir holding a copy of `stacks/Pulumi.local.yaml`. Each operation runs in
a fresh `bench.engine_worker` process whose tree (worker hosting the inline program, pulumi CLI,
Kubernetes provider, policy analyzer) is sampled by `bench.proctree.TreeSampler`; the local API
server, etcd and controller manager are not in that tree (they are the cluster, not the preview).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from bench.proctree import TreeSampler
from bench.synthetic import local_document, synthetic_document
from eks_hybrid_gpu import engine, localcluster, projectdir

ROOT = Path(__file__).resolve().parents[1]
RECORDING_PACK = ROOT / "bench" / "analyzer"
WORKER_RESULT = "BENCH-RESULT "


def role_of(pid: int, root: int, comm: str) -> str:
    """Name a process of the sampled tree by what it does."""
    if pid == root:
        return "program (worker python)"
    if comm == "pulumi":
        return "pulumi CLI"
    if comm.startswith("pulumi-resource"):
        return "kubernetes provider"
    if comm.startswith(("python", "sh")):
        return "policy analyzer"
    return comm


@dataclass
class OperationResult:
    """One engine operation: the worker's timings and the sampled memory of its process tree."""

    wall_s: float
    program_cpu_s: float
    """CPU of the worker during the operation: the inline program and the Automation API hosting it."""
    engine_cpu_s: float
    """CPU of the worker's descendants started by the operation: CLI, provider, analyzer."""
    changes: dict[str, int]
    peak_tree_kib: int
    peak_by_role_kib: dict[str, int]
    cpu_by_role_s: dict[str, float]
    """CPU of the descendants by role, as last sampled (misses each process's last interval)."""
    samples: int
    setup_s: float = 0.0
    """Worker start to operation start: interpreter, imports, stack selection (not in wall_s)."""

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the whole tree during the operation."""
        return self.program_cpu_s + self.engine_cpu_s


@dataclass
class EngineArea:
    """A local API server and an isolated engine area, removed on exit."""

    keep: bool = False
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="eks-hybrid-gpu-bench-")))
    toolchain: engine.Toolchain | None = None
    cluster: localcluster.LocalCluster | None = None
    cluster_start_s: float = 0.0
    _environ: dict[str, str] = field(default_factory=dict)

    @property
    def work_dir(self) -> Path:
        """Pulumi.yaml and stacks/ of the benchmark's stacks."""
        return self.base / "work"

    def __enter__(self) -> EngineArea:
        import time

        self._environ = dict(os.environ)  # engine.prepare points this process's environment into the area
        self.toolchain = engine.ensure_toolchain()
        self.toolchain.activate()
        started = time.perf_counter()
        self.cluster = localcluster.start(self.base / "cluster")
        self.cluster_start_s = time.perf_counter() - started
        # Registers the provider plugin in this area's Pulumi home once, so workers find it.
        engine.prepare(self.base / "engine", self.cluster.kubeconfig, self.toolchain)
        (self.work_dir / "stacks").mkdir(parents=True)
        shutil.copy(ROOT / "Pulumi.yaml", self.work_dir / "Pulumi.yaml")
        # The local stack as the node-less benchmark server can take it (see bench.synthetic.local_document).
        projectdir.stack_file("local", self.work_dir).write_text(yaml.safe_dump(local_document(), sort_keys=False))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        localcluster.stop(self.base / "cluster")
        os.environ.clear()
        os.environ.update(self._environ)
        if not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def add_synthetic_stack(self, name: str, cohorts: int) -> None:
        """Write stacks/Pulumi.<name>.yaml: the synthetic stack of `cohorts` cohorts."""
        path = projectdir.stack_file(name, self.work_dir)
        path.write_text(yaml.safe_dump(synthetic_document(cohorts), sort_keys=False))

    def operation(
        self,
        stack: str,
        operation: str,
        *,
        program: str = "project",
        policy_pack: Path | None = None,
        objects: Path | None = None,
        record: Path | None = None,
        capture: Path | None = None,
    ) -> OperationResult:
        """Run one operation in a fresh worker, sampling its process tree's memory."""
        assert self.toolchain is not None
        assert self.cluster is not None
        request = {
            "state_dir": str(self.base / "engine"),
            "kubeconfig": str(self.cluster.kubeconfig),
            "path_entries": list(self.toolchain.path_entries),
            "provider_binary": str(self.toolchain.provider_binary),
            "work_dir": str(self.work_dir),
            "stack": stack,
            "program": program,
            "operation": operation,
            "policy_pack": str(policy_pack) if policy_pack else None,
            "objects": str(objects) if objects else None,
            "record": str(record) if record else None,
            "capture": str(capture) if capture else None,
        }
        request_file = self.base / "request.json"
        request_file.write_text(json.dumps(request))
        worker = subprocess.Popen(
            [sys.executable, "-m", "bench.engine_worker", str(request_file)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        sampler = TreeSampler(worker.pid, role_of).start()
        try:
            stdout, stderr = worker.communicate()
        finally:
            sampler.stop()
        results = [line for line in stdout.splitlines() if line.startswith(WORKER_RESULT)]
        if worker.returncode != 0 or not results:
            msg = f"{operation} of stack {stack} failed (exit {worker.returncode}):\n{stderr[-4000:]}"
            raise RuntimeError(msg)
        result: dict[str, Any] = json.loads(results[-1].removeprefix(WORKER_RESULT))
        return OperationResult(
            wall_s=result["wall_s"],
            program_cpu_s=result["program_cpu_s"],
            engine_cpu_s=result["engine_cpu_s"],
            changes=result["changes"],
            peak_tree_kib=sampler.peak_kib,
            peak_by_role_kib=dict(sampler.peak_by_role),
            cpu_by_role_s=sampler.cpu_by_role(result["started_monotonic"]),
            samples=sampler.samples,
            setup_s=result["setup_s"],
        )
