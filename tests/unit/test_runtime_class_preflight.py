"""Where the program reuses an existing RuntimeClass, the preflight says whether it exists; a folder given as a
kubeconfig says it is a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.client.kubeclient import KubeAccessError
from cluster.judge.live import LiveCluster, LiveReadError, read_live
from cluster.judge.preflight import check, check_runtime_class
from components.cluster import ClusterTarget, source_of
from components.config import ClusterConfig, StackConfig
from components.validation import ClusterFacts
from eks_hybrid_gpu.cluster_access import connect
from tests.support.configs import DRA_COHORT, PLUGIN_COHORT, _base_config
from tests.support.loopback_api import LoopbackApi, api_fixture  # noqa: F401 (registers fixture `api`)


def _config(hosts_have_handler: bool, *cohorts: dict[str, Any]) -> StackConfig:
    raw = _base_config(
        cohorts=list(cohorts or [PLUGIN_COHORT]), runtimeClass={"hostsHaveNvidiaHandler": hosts_have_handler}
    )
    return StackConfig.model_validate(raw)


def _classes(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"metadata": {"name": name}, "handler": handler} for name, handler in pairs]


def test_a_reused_runtime_class_that_is_missing_is_refused_naming_what_exists() -> None:
    live = LiveCluster([], runtime_classes=_classes(("runc-gvisor", "runsc")))
    problems = check_runtime_class(_config(False), live)
    assert len(problems) == 1
    assert problems[0].path == "runtimeClass.name"
    assert "RuntimeClass nvidia does not exist in the cluster (it has: runc-gvisor (handler runsc))" in str(problems[0])
    assert "reuse an existing RuntimeClass" in problems[0].message
    assert problems[0] in check(_config(False), live)


def test_a_reused_runtime_class_that_exists_passes() -> None:
    live = LiveCluster([], runtime_classes=_classes(("nvidia", "nvidia")))
    assert check_runtime_class(_config(False), live) == []


def test_nothing_to_check_when_the_program_creates_the_class_or_needs_none() -> None:
    empty = LiveCluster([], runtime_classes=[])
    assert check_runtime_class(_config(True), empty) == []
    assert check_runtime_class(_config(False, DRA_COHORT), empty) == []  # the DRA path runs no RuntimeClass
    assert check_runtime_class(_config(False), LiveCluster([])) == []  # not read


def test_read_live_lists_the_runtime_classes(api: LoopbackApi) -> None:
    handler, _, kubeconfig = api
    handler.served = {
        "/api/v1/nodes": [],
        "/api/v1/pods": [],
        "/apis/apps/v1/daemonsets": [],
        "/apis/node.k8s.io/v1/runtimeclasses": _classes(("nvidia", "nvidia")),
    }
    cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": kubeconfig})
    live = read_live(source_of(cluster, ClusterTarget(ClusterFacts(), kubeconfig, None, None)))
    assert live.runtime_classes == _classes(("nvidia", "nvidia"))


def test_runtime_classes_that_cannot_be_listed_are_refused_only_where_a_class_is_reused(api: LoopbackApi) -> None:
    handler, _, kubeconfig = api
    handler.served = {"/api/v1/nodes": [], "/api/v1/pods": [], "/apis/apps/v1/daemonsets": []}
    handler.forbidden = ("/apis/node.k8s.io/",)
    cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": kubeconfig})
    live = read_live(source_of(cluster, ClusterTarget(ClusterFacts(), kubeconfig, None, None)))
    assert live.runtime_classes is None
    assert live.runtime_classes_error is not None
    assert "permission denied listing RuntimeClasses" in live.runtime_classes_error
    problems = check_runtime_class(_config(False), live)
    assert len(problems) == 1
    assert "the preflight cannot list RuntimeClasses: permission denied listing RuntimeClasses" in problems[0].message
    assert check_runtime_class(_config(True), live) == []


def test_a_folder_given_as_kubeconfig_says_it_is_a_folder(tmp_path: Path) -> None:
    cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": str(tmp_path)})
    with pytest.raises(LiveReadError) as refused:
        read_live(source_of(cluster, ClusterTarget(ClusterFacts(), str(tmp_path), None, None)))
    assert f"kubeconfig {tmp_path} (eks-hybrid-gpu:cluster.kubeconfig) is a folder, not a kubeconfig file;" in str(
        refused.value
    )
    with pytest.raises(KubeAccessError) as inspected:
        connect(str(tmp_path))
    assert f"kubeconfig {tmp_path} is a folder, not a kubeconfig file;" in str(inspected.value)
    with pytest.raises(KubeAccessError) as absent:
        connect(str(tmp_path / "absent"))
    assert "does not exist" in str(absent.value)
