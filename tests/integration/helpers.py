"""Small helpers for the engine tests: temporary stack files, API reads, inline programs and the pack's verdicts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from kubernetes import client, config
from pulumi import automation as auto

from cluster.client import kubeclient
from cluster.records.lease_records import HeldLease, utc_now
from components.config import StackConfig
from components.ownership_ledger import ownership_map
from eks_hybrid_gpu import chartmirror, engine, local, projectdir
from eks_hybrid_gpu.chartmirror import CHART_MIRROR_ENV
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME
from tests.support import charts

LOCAL_STACK_FILE = projectdir.SHIPPED / "stacks" / "Pulumi.local.yaml"
SHARED_CHARTS = charts.folder()
VIOLATION = re.compile(r"- \[mandatory\] \[severity: \w+\]\s+(\S+)\s+\((.*)\)$")
"""A mandatory violation line of `pulumi preview` output: the policy, then the resource it names."""


def local_charts() -> dict[str, Any]:
    """The local stack's `charts` from the tests' chart archives (tests/support/charts.py), as `local up` takes them."""
    return chartmirror.mirror_overrides(local.stack_config("local"), SHARED_CHARTS).overrides


def work_dir_with_stack(tmp: Path, stack: str, overrides: dict[str, Any]) -> Path:
    """A work dir holding Pulumi.yaml and stacks/Pulumi.<stack>.yaml: the local stack with `overrides` applied.

    Its charts come from the tests' chart archives (`local_charts`) unless `overrides` sets `charts`.
    """
    shutil.copy(projectdir.SHIPPED / "Pulumi.yaml", tmp / "Pulumi.yaml")
    (tmp / "stacks").mkdir(exist_ok=True)
    document = yaml.safe_load(LOCAL_STACK_FILE.read_text())
    document["config"]["eks-hybrid-gpu:charts"] = local_charts()
    for key, value in overrides.items():
        document["config"][f"eks-hybrid-gpu:{key}"] = value
    (tmp / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return tmp


def command_process(command: str, *argv: str) -> subprocess.Popen[str]:
    """`eks-hybrid-gpu COMMAND ARGV...` in a process of its own, its output (stdout and stderr) on one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "eks_hybrid_gpu", command, *argv],
        cwd=projectdir.SHIPPED,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def api(kubeconfig: Path) -> client.ApiClient:
    """A Kubernetes client for the local cluster."""
    return config.new_client_from_config(config_file=str(kubeconfig))


def get_cluster_object(kubeconfig: Path, group: str, version: str, plural: str, name: str) -> dict[str, Any]:
    """One cluster-scoped custom-API object (e.g. a DeviceClass)."""
    found: dict[str, Any] = client.CustomObjectsApi(api(kubeconfig)).get_cluster_custom_object(
        group, version, plural, name
    )
    return found


@contextmanager
def ledger_in(kube: kubeclient.Kube, namespace: str, config: StackConfig) -> Iterator[str]:
    """The stack's ledger ConfigMap in a namespace of its own, as `inspect --ledger` takes it: NAMESPACE/NAME."""
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    kube.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": LEDGER_NAME}, "data": {LEDGER_KEY: json.dumps(ownership_map(config))}},
    )
    try:
        yield f"{namespace}/{LEDGER_NAME}"
    finally:
        kube.delete(f"/api/v1/namespaces/{namespace}")


def refused_by(output: str) -> dict[str, list[str]]:
    """Mandatory violations in a preview's output: policy -> the resources it named."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        match = VIOLATION.search(line.strip())
        if match:
            found.setdefault(match[1], []).append(match[2])
    return found


def cluster_provider(engine_env: engine.EngineEnv) -> k8s.Provider:
    """An inline program's provider for the engine's cluster."""
    return k8s.Provider("cluster", kubeconfig=str(engine_env.kubeconfig))


def namespace(name: str, provider: k8s.Provider) -> k8s.core.v1.Namespace:
    """An inline program's Namespace `name`."""
    return k8s.core.v1.Namespace(f"ns-{name}", metadata={"name": name}, opts=pulumi.ResourceOptions(provider=provider))


def _refused(operation: Callable[..., Any]) -> str:
    output: list[str] = []
    with pytest.raises(auto.CommandError) as failure:
        operation(on_output=output.append, color="never", policy_packs=engine.policy_packs())
    text = "\n".join([*output, str(failure.value)])
    print(text)  # shown by pytest when an assertion after it fails
    return text


def refused_preview(stack: auto.Stack) -> str:
    """What a `pulumi preview` with the pack printed, then its error, when it must fail."""
    return _refused(stack.preview)


def refused_up(stack: auto.Stack) -> str:
    """What a `pulumi up` with the pack printed, then its error, when it must fail."""
    return _refused(stack.up)


@contextmanager
def stack_up(
    env: engine.EngineEnv,
    kube: kubeclient.Kube,
    work: Path,
    name: str,
    nodes: Sequence[str],
    cleanup: Sequence[str] = (),
) -> Iterator[auto.Stack]:
    """A module's stack `name` of `work`, up with the policy pack over the tests' chart archives; destroyed after.

    Its nodes are uncordoned and the `cleanup` API paths deleted before the destroy, whatever the tests left.
    """
    previous = os.environ.get(CHART_MIRROR_ENV)
    os.environ[CHART_MIRROR_ENV] = str(SHARED_CHARTS)  # no internet: the charts of the tests' chart archives
    stack = engine.stack(env, name, work_dir=work)
    stack.up(color="never", policy_packs=engine.policy_packs())
    try:
        yield stack
    finally:
        if previous is None:
            os.environ.pop(CHART_MIRROR_ENV, None)
        else:
            os.environ[CHART_MIRROR_ENV] = previous
        for node in nodes:
            kube.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
        for path in cleanup:
            kube.delete(path)
        engine.stack(env, name, work_dir=work).destroy(color="never")
        stack.workspace.remove_stack(name)


@dataclass
class LeaseWatch:
    """Reads the cohort's Lease every 0.2 s: who held it, and the longest it went unrenewed (this machine's clock)."""

    kube: kubeclient.Kube
    path: str
    holders: dict[str, str] = field(default_factory=dict)
    """holderIdentity -> its command."""
    longest: dict[str, float] = field(default_factory=dict)
    """holderIdentity -> the most seconds seen since its renewTime."""
    ages: list[tuple[float, float]] = field(default_factory=list)
    """(time.monotonic(), seconds since its renewTime) at each read that found it."""
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.wait(0.2):
            found = self.kube.get_or_none(self.path)
            if found is None:
                continue
            lease = HeldLease.of(found)
            age = lease.age(utc_now()) or 0.0
            self.ages.append((time.monotonic(), age))
            self.holders[lease.holder] = lease.command
            self.longest[lease.holder] = max(self.longest.get(lease.holder, 0.0), age)

    def age_at(self, moment: float) -> float | None:
        """The Lease's age at the last read before `moment` plus the time since: how long unrenewed then, at least."""
        before = [(t, age) for t, age in self.ages if t <= moment]
        return before[-1][1] + (moment - before[-1][0]) if before else None

    def __enter__(self) -> LeaseWatch:
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
