"""Whatever an API server, or a proxy in front of it, answers: a result, or one line that names the server.

A loopback server (`tests/support/hostile_api.py`) answers any status, content type and body bytes, cut short or
late; the real kubernetes client and transport read it through the one client (`cluster.client.kubeclient`). Every
case ends within a bounded time in a JSON object (only for a 2xx JSON object) or in one exception of the error map
whose one-line message names the server; `inspect` turns the unreadable ones into exit 2 (never 1, its conflict code)
and the preview's preflight into a refusal.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.client import kube_http
from cluster.client.errors import UNAVAILABLE_STATUSES, KubeAccessError, KubeApiError, KubeNotAnswer
from cluster.client.kubeclient import LIST_PAGE, NODES, Kube, open_cluster
from cluster.client.kubeconfig import Source
from cluster.judge.live import LiveReadError, read_live
from eks_hybrid_gpu import inspection
from tests.support.hostile_api import Answer, Script, hostile

pytestmark = pytest.mark.unit

MARK = "BODY-TEXT-BEYOND-THE-TITLE"
HTML = f"<html><head><title>502 Bad Gateway</title></head><body><h1>nginx</h1>{MARK}\n<p>line</p></body></html>"
BODIES = st.one_of(
    st.just(json.dumps({"kind": "NodeList", "items": [], "metadata": {}}).encode()),
    st.just(json.dumps({"kind": "Status", "status": "Failure", "message": "boom\nsecond line"}).encode()),
    st.just(HTML.encode()),
    st.just(b"upstream connect error or disconnect/reset before headers"),
    st.just(b"[1, 2, 3]"),
    st.just(b""),
    st.binary(max_size=300),
    st.text(max_size=200).map(str.encode),
)
CONTENT_TYPES = st.sampled_from(
    [None, "application/json", "application/json; charset=utf-8", "text/html", "text/plain", "application/x-bin", ""]
)
STATUSES = st.one_of(
    st.sampled_from([200, 201, 204, 400, 401, 403, 404, 409, 410, 429, 500, 502, 503, 504]), st.integers(200, 599)
)
READ_TIMEOUT = 0.5
BOUND_SECONDS = 12.0
"""A connect and read timeout of 0.5 s, retried by urllib3: no case may take longer than this."""


def client(kubeconfig: str) -> Kube:
    return dataclasses.replace(open_cluster(Source(kubeconfig)), timeout=(1.0, READ_TIMEOUT))


def one_line(error: Exception) -> str:
    text = str(error)
    assert "\n" not in text, text
    assert "\r" not in text, text
    assert len(text) < 1500, text
    assert MARK not in text, f"the raw body leaked into the message: {text}"
    return text


answers = st.builds(
    Answer,
    status=STATUSES,
    content_type=CONTENT_TYPES,
    body=BODIES,
    cut=st.one_of(st.none(), st.integers(0, 5)),
    stall=st.sampled_from([0.0, 0.0, 0.0, 1.2]),
)


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(answer=answers)
def test_any_answer_ends_in_a_result_or_one_line_naming_the_server(tmp_path: Path, answer: Answer) -> None:
    script = Script(default=answer)
    with hostile(tmp_path, script) as (url, kubeconfig):
        kube = client(kubeconfig)
        started = time.monotonic()
        failure: KubeAccessError | KubeApiError | None = None
        try:
            found = kube.get(NODES, what="nodes")
        except (KubeAccessError, KubeApiError) as error:
            failure = error
        if failure is not None:
            text = one_line(failure)
            assert url in text or url in getattr(failure, "where", ""), text
            if isinstance(failure, KubeNotAnswer):
                assert "not an API server answer" in text
                assert "proxy" in text
            if isinstance(failure, KubeApiError) and failure.status in UNAVAILABLE_STATUSES:
                assert "wait and run the command again" in text
        else:
            # Only a whole 2xx JSON object in time is a result; a 204 has no body by HTTP's rules: an empty one.
            assert 200 <= answer.status <= 299
            assert isinstance(found, dict)
            if answer.status != 204:
                assert answer.stall < READ_TIMEOUT
                assert answer.content_type
                assert "json" in answer.content_type
                assert answer.cut is None
                assert found == json.loads(answer.body)
        assert time.monotonic() - started < BOUND_SECONDS


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(answer=st.builds(Answer, status=STATUSES, content_type=CONTENT_TYPES, body=BODIES, cut=st.none()))
def test_inspect_over_any_answer_exits_0_or_2_never_the_conflict_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: Answer
) -> None:
    # One answer to every request can show no GPU conflict: whatever inspect cannot read is exit 2, in one line.
    with hostile(tmp_path, Script(default=answer)) as (url, kubeconfig):
        started = time.monotonic()
        code = inspection.main(["--kubeconfig", kubeconfig])
        assert time.monotonic() - started < BOUND_SECONDS * 3
    err = capsys.readouterr().err
    assert code in (0, 2), (answer, code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert url in lines[0], lines[0]
        assert MARK not in lines[0]


def run_inspect(kubeconfig: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = inspection.main(["--kubeconfig", kubeconfig])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return code, lines[0]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (Answer(200, "text/plain", b"hello from the wrong port"), "not an API server answer"),
        (Answer(200, "application/json", b"not json"), "not an API server answer"),
        (Answer(502, "text/html", HTML.encode()), "Bad Gateway"),
        (Answer(503, "application/json", b'{"kind":"Status","message":"etcd is down"}'), "etcd is down"),
        (Answer(200, "application/json", b'{"items": [], "metadata": {}', cut=10), "cannot reach"),
    ],
)
def test_inspect_cannot_read_the_cluster_exits_2_not_the_conflict_code(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: Answer,
    words: str,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://alice:s3cret@proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with hostile(tmp_path, Script(default=answer)) as (url, kubeconfig):
        code, line = run_inspect(kubeconfig, capsys)
    assert code == 2 != inspection.CONFLICT_EXIT_CODE
    assert words in line, line
    assert url in line, line
    assert "s3cret" not in line
    assert MARK not in line
    if "not an API server" in words or answer.status == 502:
        assert "proxy http://***@proxy.example:3128 bypassed for this server by NO_PROXY='127.0.0.1,localhost'" in line


def test_inspect_help_documents_both_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert inspection.main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 a GPU conflict" in out
    assert "2 a usage error, or the cluster could not be read" in out


def page(names: list[str], token: str = "") -> Answer:
    items = [{"metadata": {"name": n, "uid": f"uid-{n}"}} for n in names]
    return Answer(body=json.dumps({"items": items, "metadata": {"continue": token}}).encode())


GONE = Answer(410, "application/json", b'{"kind":"Status","reason":"Expired","message":"too old resource version"}')


def test_a_gone_next_page_restarts_the_list_once_and_skips_what_was_given(tmp_path: Path) -> None:
    script = Script(default=page(["a", "b"], "t1"), by_query={"continue=t1": [GONE, page(["c"])]})
    with hostile(tmp_path, script) as (_url, kubeconfig):
        found = client(kubeconfig).items(NODES, what="nodes")
    assert [n["metadata"]["name"] for n in found] == ["a", "b", "c"]
    assert [p.split("?", 1)[1] for p in script.seen] == [
        f"limit={LIST_PAGE}",
        f"limit={LIST_PAGE}&continue=t1",
        f"limit={LIST_PAGE}",
        f"limit={LIST_PAGE}&continue=t1",
    ]


def test_a_list_gone_twice_says_list_again(tmp_path: Path) -> None:
    script = Script(default=page(["a"], "t1"), by_query={"continue=t1": [GONE]})
    with hostile(tmp_path, script) as (url, kubeconfig), pytest.raises(KubeApiError) as raised:
        client(kubeconfig).items(NODES, what="nodes")
    assert raised.value.status == 410
    assert url in raised.value.where
    assert "list again" in one_line(raised.value)
    assert "too old resource version" in str(raised.value)


def test_the_preview_preflight_refuses_a_plain_text_200_naming_the_server(tmp_path: Path) -> None:
    with hostile(tmp_path, Script(default=Answer(200, "text/plain", b"ok"))) as (url, kubeconfig):
        with pytest.raises(LiveReadError) as raised:
            read_live(Source(kubeconfig), "gpu-system")
    text = one_line(raised.value)
    assert text.startswith("preflight: not an API server answer to GET "), text
    assert url in text, text


def test_a_body_past_the_cap_is_no_answer_and_is_not_read_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_http, "MAX_ANSWER_BYTES", 4096)
    body = json.dumps({"items": [{"metadata": {"name": "n" * 60}}] * 200, "metadata": {}}).encode()
    with hostile(tmp_path, Script(default=Answer(body=body))) as (url, kubeconfig):
        with pytest.raises(KubeNotAnswer) as raised:
            client(kubeconfig).get(NODES, what="nodes")
    text = one_line(raised.value)
    assert "200 OK: the body grew past 4096 bytes" in text
    assert url in text
