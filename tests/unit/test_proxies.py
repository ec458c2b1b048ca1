"""Proxies: every chart download goes through `HTTPS_PROXY`/`HTTP_PROXY` (lower-case too) unless `NO_PROXY` names
the host, as curl and requests do; API requests follow kubectl (the environment's proxy and a kubeconfig's
`proxy-url`, never a proxy for a loopback server).

The proxy is a forward proxy on 127.0.0.1 (tests/support/forward_proxy.py) that records each `CONNECT` and each
plain `GET`; the upstream is a loopback Helm repository, named where it matters by a host only the proxy resolves
(`charts.corp.test`), as a repository behind a company proxy is.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster.client.errors import KubeAccessError
from eks_hybrid_gpu import chartfetch, cluster_access
from eks_hybrid_gpu.review.render import chart_mirror
from tests.support.forward_proxy import forward_proxy, https_folder, self_signed
from tests.support.loopback_api import LoopbackApi, api_fixture  # noqa: F401 (registers fixture `api`)

pytestmark = pytest.mark.unit

CHART, VERSION = "c", "1.0.0"
ARCHIVE = f"{CHART}-{VERSION}.tgz"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A Helm repository folder: index.yaml listing c 1.0.0, and its archive (bytes nobody opens here)."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / ARCHIVE).write_bytes(b"archive bytes")
    index = {"apiVersion": "v1", "entries": {CHART: [{"name": CHART, "version": VERSION, "urls": [ARCHIVE]}]}}
    (folder / "index.yaml").write_text(yaml.safe_dump(index))
    return folder


@pytest.fixture
def served(repo: Path) -> Iterator[str]:
    """`http://127.0.0.1:PORT` of the repository."""
    with chart_mirror(repo) as (url, _index):
        yield url


@pytest.fixture
def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fetch(environ: dict[str, str], cache: Path) -> Path:
    return chartfetch.fetch(CHART, VERSION, "oci://registry.invalid/c", cache, lambda _p, _s: None, environ)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy"])
def test_a_chart_download_goes_through_the_http_proxy(served: str, tmp_path: Path, variable: str) -> None:
    upstream = f"http://charts.corp.test:{_port(served)}"
    with forward_proxy({"charts.corp.test": _port(served)}) as (proxy, seen):
        fetched = _fetch({chartfetch.UPSTREAM_ENV: upstream, variable: proxy}, tmp_path / "cache")
    assert fetched.read_bytes() == b"archive bytes"
    # The machine cannot resolve charts.corp.test: only the proxy reaches it, and it saw both requests.
    assert seen.requests == [f"GET {upstream}/index.yaml", f"GET {upstream}/{ARCHIVE}"]


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy"])
def test_an_https_chart_download_is_tunnelled_through_the_proxy_with_connect(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the repository's certificate is the one trusted
    with https_folder(repo, cert, key) as url, forward_proxy() as (proxy, seen):
        fetched = _fetch({chartfetch.UPSTREAM_ENV: url, variable: proxy}, tmp_path / "cache")
    assert fetched.read_bytes() == b"archive bytes"
    assert seen.requests == [f"CONNECT 127.0.0.1:{_port(url)}"] * 2


def test_the_lower_case_proxy_variable_wins_as_curl_and_requests_read_them(
    served: str, tmp_path: Path, dead_port: int
) -> None:
    with forward_proxy() as (proxy, seen):
        environ = {chartfetch.UPSTREAM_ENV: served, "HTTP_PROXY": f"http://127.0.0.1:{dead_port}", "http_proxy": proxy}
        _fetch(environ, tmp_path / "cache")
    assert len(seen.requests) == 2


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "NO_PROXY=localhost,127.0.0.0/8", "no_proxy=*", ".0.0.1"])
def test_no_proxy_sends_the_download_direct(served: str, tmp_path: Path, no_proxy: str) -> None:
    name, _, value = no_proxy.rpartition("=")
    with forward_proxy() as (proxy, seen):
        environ = {chartfetch.UPSTREAM_ENV: served, "HTTP_PROXY": proxy, name or "NO_PROXY": value}
        if value == ".0.0.1":  # a domain suffix does not match an address
            _fetch(environ, tmp_path / "cache")
            assert len(seen.requests) == 2
            return
        fetched = _fetch(environ, tmp_path / "cache")
    assert fetched.read_bytes() == b"archive bytes"
    assert seen.requests == []


def test_the_reach_check_asks_the_proxy_not_the_host_it_cannot_resolve(served: str, tmp_path: Path) -> None:
    """Before: a direct TCP check of charts.corp.test refused the download although the proxy reaches it."""
    upstream = f"http://charts.corp.test:{_port(served)}"
    with pytest.raises(chartfetch.FetchError, match=r"^http://charts\.corp\.test:\d+ cannot be reached \("):
        _fetch({chartfetch.UPSTREAM_ENV: upstream}, tmp_path / "direct")
    with forward_proxy({"charts.corp.test": _port(served)}) as (proxy, _seen):
        assert _fetch({chartfetch.UPSTREAM_ENV: upstream, "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy}, tmp_path / "c")


def test_a_proxy_that_is_down_is_named_without_its_password(served: str, tmp_path: Path, dead_port: int) -> None:
    proxy = f"http://alice:s3cret@127.0.0.1:{dead_port}"
    with pytest.raises(chartfetch.FetchError) as refused:
        _fetch({chartfetch.UPSTREAM_ENV: served, "HTTP_PROXY": proxy}, tmp_path / "cache")
    message = str(refused.value)
    assert message.startswith(f"{served} cannot be reached through the proxy http://alice:***@127.0.0.1:{dead_port}")
    assert "s3cret" not in message


def test_proxy_credentials_are_sent_as_basic_auth(served: str, tmp_path: Path) -> None:
    with forward_proxy(credentials="alice:s3cret") as (proxy, seen):
        authed = proxy.replace("http://", "http://alice:s3cret@")
        _fetch({chartfetch.UPSTREAM_ENV: served, "HTTP_PROXY": authed}, tmp_path / "ok")
        assert len(seen.requests) == 2
        with pytest.raises(chartfetch.FetchError, match="answered HTTP 407 through the proxy"):
            _fetch({chartfetch.UPSTREAM_ENV: served, "HTTP_PROXY": proxy}, tmp_path / "no-credentials")


def _kubeconfig(path: Path, server: str, **cluster: str) -> str:
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "corp", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "corp",
            }
        )
    )
    return str(path)


def test_api_requests_go_through_the_kubeconfig_proxy_url(api: LoopbackApi, tmp_path: Path) -> None:
    handler, url, _kubeconfig_path = api
    handler.served = {"/api/v1/nodes": [{"metadata": {"name": "gpu-0"}}]}
    server = f"http://kube.corp.test:{_port(url)}"
    with forward_proxy({"kube.corp.test": _port(url)}) as (proxy, seen):
        kube = cluster_access.connect(_kubeconfig(tmp_path / "kc", server, **{"proxy-url": proxy}))
        assert [n["metadata"]["name"] for n in kube.items("/api/v1/nodes")] == ["gpu-0"]
    assert seen.requests == [f"GET {server}/api/v1/nodes?limit=500"]


def test_api_requests_go_through_the_environment_proxy_as_kubectl_s_do(
    api: LoopbackApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, url, _kubeconfig_path = api
    handler.served = {"/api/v1/nodes": []}
    server = f"http://kube.corp.test:{_port(url)}"
    with forward_proxy({"kube.corp.test": _port(url)}) as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        kube = cluster_access.connect(_kubeconfig(tmp_path / "kc", server))
        assert kube.items("/api/v1/nodes") == []
        monkeypatch.setenv("NO_PROXY", "kube.corp.test")
        with pytest.raises(KubeAccessError, match="cannot reach the Kubernetes API"):
            cluster_access.connect(_kubeconfig(tmp_path / "kc", server)).items("/api/v1/nodes")
    assert seen.requests == [f"GET {server}/api/v1/nodes?limit=500"]


def test_a_loopback_api_server_is_never_reached_through_the_environment_proxy(
    api: LoopbackApi, monkeypatch: pytest.MonkeyPatch, dead_port: int
) -> None:
    """kubectl (Go) never proxies loopback; `local up` behind a company proxy reaches its own API server."""
    handler, _url, kubeconfig = api
    handler.served = {"/api/v1/nodes": []}
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(variable, f"http://127.0.0.1:{dead_port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert cluster_access.connect(kubeconfig).items("/api/v1/nodes") == []
