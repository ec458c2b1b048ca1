"""Shared helpers for the program and component tests: base configs, cohorts, fake nodes and a fresh recorder.

Every test gets its own recorder and its own `set_mocks` call (through `run_program` or `construct`), so no
state leaks between tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from cluster.judge.live import LiveCluster
from eks_hybrid_gpu import mocks as mocks_module
from eks_hybrid_gpu.mocks import run_program
from policy.gpu_allocation.vocab.labels import (
    PROJECT,
)
from tests.support.configs import (
    PLUGIN_COHORT,
    Construct,
    ReadRecordingMonitor,
    Recorder,
    RunProgram,
    _base_config,
    cohort,
)


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> RunProgram:
    """Run the real program under fresh mocks; `nodes` replaces the live node list for the preflight.

    `render_dir` runs it in the review's render mode (`components.program.run(..., render_dir=...)`).
    """
    monkeypatch.setattr(mocks_module, "ParentRecordingMonitor", ReadRecordingMonitor)

    def _run(
        config: Mapping[str, Any],
        stack: str = "test",
        *,
        recorder: Recorder | None = None,
        nodes: Iterable[Mapping[str, Any]] | None = None,
        render_dir: str | None = None,
    ) -> Recorder:
        if nodes is not None:
            listed = [dict(n) for n in nodes]
            monkeypatch.setattr("components.program.read_cluster", lambda *_args: LiveCluster(listed))
        chosen = recorder if recorder is not None else Recorder()
        run_program(config, stack, chosen, render_dir=render_dir)
        return chosen

    return _run


@pytest.fixture
def construct() -> Construct:
    """Set fresh mocks and run `build` (which constructs components) as a Pulumi program."""

    def _construct(build: Callable[[], Any]) -> Recorder:
        recorder = Recorder()
        pulumi.runtime.set_mocks(
            recorder, project=PROJECT, stack="test", preview=False, monitor=ReadRecordingMonitor(recorder)
        )

        @pulumi.runtime.test
        def program() -> Any:
            return build()

        program()
        return recorder

    return _construct


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder whose stack `t` declares one verified device-plugin cohort with the preflight on (migrate)."""
    (tmp_path / "stacks").mkdir()
    config = _base_config(cohorts=[cohort(PLUGIN_COHORT)])
    config["cluster"]["preflight"] = True
    document = {"config": {f"eks-hybrid-gpu:{k}": v for k, v in config.items()}}
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text("# the team's stack\n" + yaml.safe_dump(document))
    return tmp_path
