"""kubectl's habits on a server that takes the connection and never answers: every command that reads a cluster
ends within its `--request-timeout` with one line that names the server and the flag, says so while it waits, and
Ctrl-C (SIGINT) ends any command with exit 130 and one line, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.client import kubeclient, slowness
from cluster.client.kube_http import DEFAULT_REQUEST_SECONDS
from cluster.client.kubeconfig import Source
from eks_hybrid_gpu import cli, cluster_access
from tests.support.silent_api import silent_api

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
READERS = {
    "inspect": ["inspect"],
    "smoke": ["smoke"],
    "move-host": ["move-host", "gpu-0", "--to", "dra"],
    "migrate": ["migrate", "--stack", "mixed", "--cohort", "plugin", "--to", "dra", "--dry-run"],
    "simulate show": ["simulate", "show"],
}
"""Every command that reads a cluster through the shared options, with the least it needs to start reading."""


@pytest.fixture
def silent(tmp_path: Path) -> Iterator[tuple[str, str]]:
    with silent_api(tmp_path) as found:
        yield found


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_server_that_never_answers_ends_the_command_within_its_request_timeout_in_one_line(
    command: str, silent: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, kubeconfig = silent
    started = time.monotonic()
    code = cli.main([*READERS[command], "--kubeconfig", kubeconfig, "--request-timeout", "1s"])
    took = time.monotonic() - started
    captured = capsys.readouterr()
    assert code == cluster_access.ACCESS_EXIT_CODE
    assert took < 1 + 3, f"{command} took {took:.1f} s with --request-timeout 1s"
    assert "Traceback" not in captured.err
    assert captured.err.strip().splitlines()[-1] == (
        f"{command}: cannot reach the Kubernetes API (kubeconfig {kubeconfig}, context dev, server {url}): no answer "
        "within 1 s; check that the cluster is running and pass the right --kubeconfig/--context, or give it longer "
        "with --request-timeout"
    )


def test_a_request_still_waiting_is_said_within_seconds_and_again_while_it_waits(
    silent: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, kubeconfig = silent
    monkeypatch.setattr(slowness, "SLOW_SECONDS", 0.3)
    monkeypatch.setattr(slowness, "NOTICE_SECONDS", 0.8)
    assert cli.main(["inspect", "--kubeconfig", kubeconfig, "--request-timeout", "2s"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert 2 <= len(lines) - 1 <= 3, lines  # at 0.3 s, 1.1 s, 1.9 s: never more often than every 0.8 s
    request = "GET /api/v1/namespaces/gpu-system/configmaps/gpu-allocation-ledger"
    for line in lines[:-1]:
        assert line.startswith(f"waiting for the API server at {url} to answer {request}: no answer yet after "), line
        assert line.endswith(
            "s (request timeout 2 s); the API server is slow, overloaded or throttling this client; still waiting"
        ), line
    assert lines[-1].startswith("inspect: cannot reach the Kubernetes API")


def test_the_notices_come_at_their_pace_and_name_the_last_429_with_its_retry_after(
    silent: tuple[str, str],
) -> None:
    url, kubeconfig = silent
    said: list[tuple[float, str]] = []
    started = time.monotonic()
    kube = kubeclient.open_cluster(
        Source(kubeconfig), 7.0, lambda line: said.append((time.monotonic() - started, line))
    )
    assert kube.notices is not None
    kube.notices.refused("GET /api/v1/pods", 429, "Too Many Requests", "1")
    with pytest.raises(kubeclient.KubeUnreachable):
        kube.get("/api/v1/nodes/gpu-0")
    times = [t for t, _ in said]
    assert len(said) == 2, said  # at 1.5 s and 5 s; the request gave up at 7 s
    assert slowness.SLOW_SECONDS <= times[0] < slowness.SLOW_SECONDS + 0.5, times
    assert slowness.NOTICE_SECONDS <= times[1] - times[0] < slowness.NOTICE_SECONDS + 0.5, times
    assert said[1][1] == (
        f"waiting for the API server at {url} to answer GET /api/v1/nodes/gpu-0: no answer yet after 5 s (request "
        "timeout 7 s); it answered 429 Too Many Requests to GET /api/v1/pods 5 s ago (Retry-After 1 s): it is "
        "throttling this client; still waiting"
    )


def test_the_request_timeout_reads_as_kubectl_s() -> None:
    assert cluster_access.request_timeout("45s") == 45
    assert cluster_access.request_timeout("2m") == 120
    assert cluster_access.request_timeout("10") == 10
    assert cluster_access.request_timeout("0") is None  # kubectl's "no limit"
    assert cluster_access.request_timeout("0s") is cluster_access.request_timeout("0m") is None
    parser = cli.parser("inspect")
    assert parser.parse_args(["inspect"]).request_timeout == DEFAULT_REQUEST_SECONDS == 30
    with pytest.raises(SystemExit):
        parser.parse_args(["inspect", "--request-timeout", "soon"])


def test_the_rerun_line_keeps_a_request_timeout_that_is_not_the_default() -> None:
    from eks_hybrid_gpu.movehost import MoveRequest

    assert "--request-timeout" not in MoveRequest("gpu-0", "dra").rerun()
    assert MoveRequest("gpu-0", "dra", request_timeout=90).rerun().endswith("--request-timeout 90s")
    assert MoveRequest("gpu-0", "dra", request_timeout=None).rerun().endswith("--request-timeout 0")


def _interrupted(argv: list[str], tmp_path: Path) -> tuple[int, float, str, str]:
    """Run the CLI, wait for its first line on stderr (the waiting notice), send SIGINT: (code, seconds, first, rest).

    SIGINT's default disposition is restored in the child: a shell's background job may have it ignored.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "eks_hybrid_gpu", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    try:
        first = process.stderr.readline()
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        code = process.wait(timeout=20)
    finally:
        process.kill()
        process.wait()
    return code, time.monotonic() - sent, first, rest


@pytest.mark.parametrize("command", ["inspect", "move-host", "migrate"])
def test_ctrl_c_while_waiting_exits_130_with_one_line(command: str, silent: tuple[str, str], tmp_path: Path) -> None:
    url, kubeconfig = silent
    code, took, first, rest = _interrupted(
        [*READERS[command], "--kubeconfig", kubeconfig, "--request-timeout", "60s"], tmp_path
    )
    assert first.startswith(f"waiting for the API server at {url}")  # said before the interrupt
    assert code == cli.INTERRUPTED_EXIT_CODE == 130
    assert took < 5
    assert "Traceback" not in rest
    lines = rest.strip().splitlines()
    assert len(lines) == 1, rest
    assert lines[0].startswith((f"eks-hybrid-gpu {command}: interrupted", f"{command}: interrupted"))


def test_the_request_timeout_may_stand_before_the_command_as_kubectl_s_global_flag(
    silent: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _url, kubeconfig = silent
    started = time.monotonic()
    assert cli.main(["--request-timeout", "1s", "--kubeconfig", kubeconfig, "inspect"]) == 2
    assert time.monotonic() - started < 4
    assert "no answer within 1 s" in capsys.readouterr().err
