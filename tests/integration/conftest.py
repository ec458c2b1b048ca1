"""The real engine against a real local API server: built (or cached) toolchain, one cluster per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from eks_hybrid_gpu import engine, localcluster


@pytest.fixture(scope="session")
def toolchain() -> engine.Toolchain:
    """Every tool, built from the Go module proxy on a cold machine, from the cache afterwards."""
    built = engine.ensure_toolchain()
    os.environ["PATH"] = os.pathsep.join([*built.path_entries, os.environ.get("PATH", "")])
    return built


@pytest.fixture(scope="session")
def cluster(toolchain: engine.Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[localcluster.LocalCluster]:
    """A Kubernetes 1.34 control plane on 127.0.0.1, stopped and removed after the session."""
    state = tmp_path_factory.mktemp("cluster") / "state"
    started = localcluster.start(state)
    yield started
    localcluster.stop(state)


@pytest.fixture(scope="session")
def engine_env(
    toolchain: engine.Toolchain, cluster: localcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> engine.EngineEnv:
    """Isolated Pulumi home and file backend with the locally built provider registered."""
    return engine.prepare(tmp_path_factory.mktemp("engine"), cluster.kubeconfig, toolchain)
