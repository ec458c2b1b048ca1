"""Secret stack config stays secret end to end: provider inputs, chart repository credentials, ledger, outputs.

The engine's config marks keys as secret (`pulumi config set --secret`); the program reads plain values for
validation, so these tests set the secret keys the way the engine does and read what reached the monitor on
the wire, where a secret is a `4dabf18193072939515e22adb298388d` envelope.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.sync_await import _sync_await

from components.program import run as run_program
from eks_hybrid_gpu.mocks import ROOT, ParentRecordingMonitor
from policy.gpu_allocation.vocab.labels import PROJECT
from tests.support.configs import Recorder, _base_config

pytestmark = pytest.mark.unit

SECRET_SIG = "4dabf18193072939515e22adb298388d"
CLUSTER = {"source": "kubeconfig", "kubeconfig": "/home/ops/.kube/token-config", "context": "ops@prod"}
REPO = "https://robot:s3cr3t-t0ken@charts.example.com/nvidia"


@pytest.fixture(autouse=True)
def _forget_secret_keys() -> Iterator[None]:
    """The engine's secret-key set is process state: clear it so no later test runs with secret config."""
    yield
    pulumi.runtime.set_all_config({}, [])


class WireMonitor(ParentRecordingMonitor):
    """The mock monitor, keeping each registration's inputs exactly as serialized (secret envelopes intact)."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.wire: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request: Any) -> Any:
        """Keep the raw inputs, then register as the mock monitor does."""
        self.wire[request.name] = json_format.MessageToDict(request.object)
        return super().RegisterResource(request)


def _exported_is_secret(name: str) -> bool:
    """Whether the stack output `name` of the program that ran last is a secret Output."""
    root = get_root_resource()
    output = pulumi.Output.from_input(getattr(root, "outputs", {})[name])
    return bool(_sync_await(output.is_secret()))


def _secret(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270"


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        if _secret(value):
            return
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _run(config: Mapping[str, Any], secret_keys: Iterable[str]) -> WireMonitor:
    recorder = Recorder()
    monitor = WireMonitor(recorder)
    pulumi.runtime.set_mocks(recorder, project=PROJECT, stack="test", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        {f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value) for key, value in config.items()},
        [f"{PROJECT}:{key}" for key in secret_keys],
    )

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        return run_program(ROOT, cohort_leases=False).ownership  # the mocks reach no cluster

    program()
    return monitor


def _config() -> dict[str, Any]:
    return _base_config(
        cluster={**CLUSTER, "preflight": False},
        charts={"devicePlugin": {"version": "0.20.0", "source": {"repo": REPO}}},
    )


def test_secret_cluster_cohorts_and_repo_credentials_stay_secret() -> None:
    monitor = _run(_config(), ["cluster", "cohorts", "charts"])

    provider = monitor.wire["cluster"]
    assert _secret(provider["kubeconfig"])
    assert _secret(provider["context"])
    chart = monitor.wire["gpu-plugin-chart"]
    assert _secret(chart["repositoryOpts"]["repo"])
    ledger = monitor.wire["gpu-ledger-configmap"]
    assert _secret(ledger["data"]["ownership.json"])
    assert _exported_is_secret("ownership")
    assert _exported_is_secret("smokeJobs")
    assert _exported_is_secret("releases")
    every_string = [s for inputs in monitor.wire.values() for s in _strings(inputs)]
    assert not any("s3cr3t-t0ken" in s or "token-config" in s or "ops@prod" in s for s in every_string)


def test_plain_config_stays_plain_but_repo_credentials_never_do() -> None:
    monitor = _run(_config(), [])

    assert monitor.wire["cluster"]["kubeconfig"] == CLUSTER["kubeconfig"]
    assert monitor.wire["cluster"]["context"] == CLUSTER["context"]
    assert not _exported_is_secret("ownership")
    assert not _exported_is_secret("smokeJobs")
    assert not _exported_is_secret("releases")
    assert not _secret(monitor.wire["gpu-ledger-configmap"]["data"]["ownership.json"])
    assert _secret(monitor.wire["gpu-plugin-chart"]["repositoryOpts"]["repo"])


def test_a_secret_charts_key_makes_a_plain_repo_url_secret() -> None:
    config = _base_config(
        cluster={**CLUSTER, "preflight": False},
        charts={"devicePlugin": {"version": "0.20.0", "source": {"repo": "https://charts.example.com/nvidia"}}},
    )

    assert _secret(_run(config, ["charts"]).wire["gpu-plugin-chart"]["repositoryOpts"]["repo"])
    assert _run(config, []).wire["gpu-plugin-chart"]["repositoryOpts"]["repo"] == "https://charts.example.com/nvidia"


def test_refusal_of_a_secret_key_does_not_echo_it() -> None:
    config = _base_config(cluster={**CLUSTER, "context": "ops@prod token=abc", "preflight": False})

    with pytest.raises(pulumi.RunError) as caught:
        _run(config, ["cluster"])

    assert "token=abc" not in str(caught.value)
    assert str(caught.value).splitlines()[1] == (
        "  - eks-hybrid-gpu:cluster.context: the secret value at cluster.context is not a kubeconfig context name; "
        "use the name `kubectl config get-contexts` lists (letters, digits and @:._/+=- only)"
    )
