"""The real engine against a real local cluster: built (or cached) toolchain, one cluster per session.

`cluster` is what `eks-hybrid-gpu local up` starts: control plane, workload controllers, kube-scheduler and
kwok, with the local stack's simulated fleet Ready. `sim_cluster` has no kwok: its tests play the kubelet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.client import kubeclient
from eks_hybrid_gpu import cluster_access, engine, local, localcluster, simulate
from eks_hybrid_gpu.localpaths import LOCAL_KUBECONFIG_ENV


@pytest.fixture(scope="session")
def toolchain() -> engine.Toolchain:
    """Every tool, built from the Go module proxy on a cold machine, from the cache afterwards."""
    built = engine.ensure_toolchain()
    built.activate()
    return built


def _started(
    state: Path, populate: Callable[[kubeclient.Kube], object], **options: Any
) -> Iterator[localcluster.LocalCluster]:
    """A local cluster started in `state` and populated through its admin client; stopped when the session ends."""
    started = localcluster.start(state, **options)
    try:
        populate(cluster_access.connect(str(started.kubeconfig)))
        yield started
    finally:
        localcluster.stop(state)


@pytest.fixture(scope="session")
def cluster(
    toolchain: engine.Toolchain, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[localcluster.LocalCluster]:
    """The local default's cluster on 127.0.0.1 with the local stack's simulated nodes; removed after the session."""
    state = tmp_path_factory.mktemp("cluster") / "state"
    fleet = local.stack_config("local")
    controllers = localcluster.WORKLOAD_CONTROLLERS
    yield from _started(state, lambda kube: local.simulate_nodes(kube, fleet), controllers=controllers, kwok=True)


@pytest.fixture(scope="session")
def kube(cluster: localcluster.LocalCluster) -> kubeclient.Kube:
    """The kwok cluster's admin, as a JSON client."""
    return cluster_access.connect(str(cluster.kubeconfig))


@pytest.fixture(scope="session")
def engine_env(
    toolchain: engine.Toolchain, cluster: localcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> engine.EngineEnv:
    """Isolated Pulumi home and file backend with the locally built provider registered."""
    return engine.prepare(tmp_path_factory.mktemp("engine"), cluster.kubeconfig, toolchain)


def _control_plane_path() -> list[str]:
    """kube-* and etcd bin dirs from the toolchain cache, when both are built.

    The simulated cluster needs no Pulumi engine, so its tests do not wait for the provider plugin build.
    """
    cache = Path(
        os.environ.get("EKS_HYBRID_GPU_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eks-hybrid-gpu"
    )
    versions = engine._versions()
    dirs = [
        cache / "toolchain" / f"kube-{versions['KUBE_VERSION']}" / "bin",
        cache / "toolchain" / f"etcd-{versions['ETCD_VERSION']}" / "bin",
    ]
    needed = [dirs[0] / n for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")]
    return [str(d) for d in dirs] if all(p.exists() for p in [*needed, dirs[1] / "etcd"]) else []


@pytest.fixture(scope="session")
def sim_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[localcluster.LocalCluster]:
    """The simulated cluster: kube-scheduler, the Job/claim controllers and the default simulated fleet."""
    path = _control_plane_path()
    if path:
        os.environ["PATH"] = os.pathsep.join([*path, os.environ.get("PATH", "")])
    else:
        request.getfixturevalue("toolchain")
    state = tmp_path_factory.mktemp("sim-cluster") / "state"
    fleet = simulate.default_simulation()
    controllers = simulate.SIMULATION_CONTROLLERS
    yield from _started(state, lambda kube: simulate.apply(kube, fleet), controllers=controllers, scheduler=True)


@pytest.fixture(scope="session")
def sim_kube(sim_cluster: localcluster.LocalCluster) -> kubeclient.Kube:
    """The simulated cluster's admin, as the day-2 commands' JSON client."""
    return cluster_access.connect(str(sim_cluster.kubeconfig))


@pytest.fixture(scope="session")
def sim_engine_env(
    toolchain: engine.Toolchain, sim_cluster: localcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> engine.EngineEnv:
    """Pulumi home and file backend of the placement tests, pointed at the simulated cluster.

    `engine.prepare` also points this process's environment (read by inline programs) at the simulated
    cluster; it is put back, so `engine_env` users keep theirs. The placement tests set it per test.
    """
    before = dict(os.environ)
    prepared = engine.prepare(tmp_path_factory.mktemp("sim-engine"), sim_cluster.kubeconfig, toolchain)
    for key in set(os.environ) - set(before):
        del os.environ[key]
    os.environ.update(before)
    return prepared


@pytest.fixture
def _program_reads_the_simulated_cluster(sim_engine_env: engine.EngineEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inline program runs in this process: point its `local` source at the simulated cluster."""
    for key, value in sim_engine_env.variables.items():
        if key != "PATH":
            monkeypatch.setenv(key, value)
    assert os.environ[LOCAL_KUBECONFIG_ENV] == str(sim_engine_env.kubeconfig)
