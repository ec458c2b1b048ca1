"""Answers that trip no read timeout and streams that are no watch: bounded as a whole, and never skipped (#44).

A loopback server (`tests/support/hostile_api.py`) sends a body one byte at a time, each byte well within the read
timeout, or a watch stream of any lines. The real client reads it: a body ends within its request timeout in one
line naming the server and `--request-timeout`; a watch line that is no watch event is an error naming the server
and the watched path, never skipped; a wait restarts such a watch once, saying so, and then stops with that error.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.client import kube_http, waits
from cluster.client.errors import KubeNotAnswer, KubeUnreachable
from cluster.client.kubeclient import NODES, PODS, Kube, open_cluster
from cluster.client.kubeconfig import Source
from eks_hybrid_gpu import inspection
from tests.support.hostile_api import Answer, Script, hostile

pytestmark = pytest.mark.unit

NODE_LIST = json.dumps({"kind": "NodeList", "metadata": {"resourceVersion": "7"}, "items": []}).encode()


def client(kubeconfig: str, seconds: float) -> Kube:
    return dataclasses.replace(open_cluster(Source(kubeconfig)), timeout=(1.0, seconds))


@pytest.mark.parametrize("seconds", [1.0, 2.0])
def test_a_body_sent_a_byte_at_a_time_ends_within_the_request_timeout_naming_the_server(
    tmp_path: Path, seconds: float
) -> None:
    # 2 kB at a byte per 0.05 s: 100 s of answer, though no read waits longer than 0.05 s.
    body = json.dumps({"kind": "NodeList", "items": [], "metadata": {"pad": "x" * 2000}}).encode()
    with hostile(tmp_path, Script(default=Answer(body=body, trickle=0.05))) as (url, kubeconfig):
        started = time.monotonic()
        with pytest.raises(KubeUnreachable) as caught:
            client(kubeconfig, seconds).get(NODES)
        took = time.monotonic() - started
    assert seconds <= took < seconds + 1.0, took
    text = str(caught.value)
    assert "\n" not in text
    assert f"server {url}" in text
    assert f"the answer's body was still arriving {seconds:g} s after its headers (" in text
    assert "bytes so far: sent slowly)" in text
    assert text.endswith("or give it longer with --request-timeout"), text


def test_inspect_over_a_trickled_answer_exits_2_within_its_request_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = json.dumps({"kind": "ConfigMap", "metadata": {"pad": "x" * 2000}}).encode()
    with hostile(tmp_path, Script(default=Answer(body=body, trickle=0.05))) as (url, kubeconfig):
        started = time.monotonic()
        code = inspection.main(["--kubeconfig", kubeconfig, "--request-timeout", "2s"])
        took = time.monotonic() - started
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert took < 2 + 1.5, took
    assert lines[-1].startswith(f"inspect: cannot reach the Kubernetes API (kubeconfig {kubeconfig}, context dev")
    assert f"server {url}" in lines[-1]
    assert "the answer's body was still arriving 2 s after its headers" in lines[-1]
    # Said while it waited, naming the request: the slow answer is no silence either.
    assert any(line.startswith(f"waiting for the API server at {url} to answer GET ") for line in lines[:-1]), lines


def event(kind: str, version: int) -> bytes:
    obj = {"kind": "Pod", "metadata": {"name": f"p{version}", "resourceVersion": str(version)}}
    return json.dumps({"type": kind, "object": obj}).encode()


GOOD = st.builds(event, st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]), st.integers(1, 10**6))
BAD = st.one_of(
    st.just(b"<html><title>502 Bad Gateway</title></html>"),
    st.just(b"data: {}"),
    st.just(b'{"type": "ADDED"}'),  # no object
    st.just(b'{"object": {}}'),  # no type
    st.just(b"[1, 2]"),
    st.just(b"null"),
    st.just(b'"ADDED"'),
    st.binary(min_size=1, max_size=80).filter(
        lambda b: b.strip() and b"\n" not in b and b[:1] not in b'{["n0123456789-tf'
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(good=st.lists(GOOD, max_size=5), bad=BAD, after=st.lists(GOOD, max_size=3))
def test_a_watch_line_that_is_no_event_is_an_error_naming_the_server_and_path_never_skipped(
    tmp_path: Path, good: list[bytes], bad: bytes, after: list[bytes]
) -> None:
    stream = b"\n".join([*good, bad, *after]) + b"\n"
    script = Script(default=Answer(body=stream, content_type="application/json;stream=watch"))
    with hostile(tmp_path, script) as (url, kubeconfig):
        seen = []
        with pytest.raises(KubeNotAnswer) as caught:
            seen.extend(client(kubeconfig, 5.0).watch(PODS, timeoutSeconds=5))
    assert [json.dumps(e).encode() for e in seen] == [json.dumps(json.loads(g)).encode() for g in good]
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(
        f"not an API server answer to WATCH {PODS} (kubeconfig {kubeconfig}, context dev, server {url}): "
    )
    assert "a line of the watch stream is no watch event" in text
    assert caught.value.request == f"WATCH {PODS}"


def test_a_watch_that_trickles_one_line_forever_ends_past_the_time_it_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube_http, "WATCH_GRACE_SECONDS", 0.5)
    script = Script(default=Answer(body=b'{"type": "ADDED", "object": {' + b" " * 4000, trickle=0.02))
    with hostile(tmp_path, script) as (url, kubeconfig):
        started = time.monotonic()
        with pytest.raises(KubeUnreachable) as caught:
            list(client(kubeconfig, 5.0).watch(PODS, timeoutSeconds=1))
        took = time.monotonic() - started
    assert 1.5 <= took < 3.0, took
    assert f"server {url}" in str(caught.value)
    assert "the watch stream (asked to end after 1 s) was still arriving 1.5 s after its headers" in str(caught.value)


def test_a_wait_restarts_a_garbled_watch_once_saying_so_then_stops_with_the_error(tmp_path: Path) -> None:
    garbled = Answer(body=b"<html>proxy page</html>\n", content_type="text/html")
    script = Script(default=Answer(body=NODE_LIST), by_query={"watch=true": [garbled]})
    said: list[str] = []
    with hostile(tmp_path, script) as (url, kubeconfig):
        kube = client(kubeconfig, 5.0)
        started = time.monotonic()
        with waits.NodeChanges(kube, "gpu-0") as changes, pytest.raises(KubeNotAnswer) as caught:
            waits.wait_for("the thing", lambda: (False, "the thing is not done"), 60, said.append, "again", changes)
        took = time.monotonic() - started
    assert took < 10, took  # not the wait's 60 s: the second garbled stream stops it
    restarted = [line for line in said if "restarting that watch once" in line]
    assert len(restarted) == 1, said
    assert f"from server {url}" in restarted[0]
    assert "the API server broke a watch (WATCH /api" in restarted[0]
    assert "a line of the watch stream is no watch event" in str(caught.value)
    assert f"server {url}" in str(caught.value)
    assert str(caught.value).startswith("not an API server answer to WATCH /api")
