"""The local cluster's own CA: the API server's certificate verifies against it, and nothing skips verification.

`localcluster.make_certificates` runs openssl as `local up` does; a loopback HTTPS server presents the serving
certificate, and the clients the local cluster has — its readiness check and the one cluster client reading the
kubeconfig `local up` writes — verify it, with no InsecureRequestWarning; a client without the CA is refused.
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cluster.client.errors import KubeUnreachable
from cluster.client.kubeclient import NODES, open_cluster
from cluster.client.kubeconfig import Source
from eks_hybrid_gpu import localcluster
from tests.support.loopback_api import send_json

pytestmark = pytest.mark.unit


class Nodes(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        send_json(self, 200, json.dumps({"kind": "NodeList", "items": [], "metadata": {}}).encode())

    def log_message(self, *_args: object) -> None:
        return


@contextmanager
def https_server(cert: Path, key: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Nodes)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return localcluster.make_certificates(tmp_path_factory.mktemp("state") / "pki")


def test_the_serving_certificate_verifies_against_the_clusters_ca(pki: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ca, cert, key = pki
    with https_server(cert, key) as url:
        assert localcluster._get(f"{url}/readyz", "token", ca)[0] == 200
        # localhost is a name of the certificate too; the hostname is checked, not skipped.
        assert localcluster._get(url.replace("127.0.0.1", "localhost") + "/readyz", "token", ca)[0] == 200
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(f"{url}/readyz", context=ssl.create_default_context(), timeout=5)  # noqa: S310


def test_the_kubeconfig_carries_the_ca_and_the_client_verifies_without_warnings(
    pki: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    ca, cert, key = pki
    state = ca.parent.parent
    with https_server(cert, key) as url:
        cluster = localcluster.LocalCluster(state, url, "token")
        localcluster._write_kubeconfig(cluster)
        document = json.loads(cluster.kubeconfig.read_text())
        entry = document["clusters"][0]["cluster"]
        assert "insecure-skip-tls-verify" not in entry
        assert base64.b64decode(entry["certificate-authority-data"]) == ca.read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an InsecureRequestWarning would fail the read
            assert open_cluster(Source(str(cluster.kubeconfig))).get(NODES)["kind"] == "NodeList"
        # Another CA's kubeconfig is refused: the server is verified, not trusted.
        other, _, _ = localcluster.make_certificates(tmp_path / "other")
        entry["certificate-authority-data"] = base64.b64encode(other.read_bytes()).decode()
        stranger = tmp_path / "kubeconfig"
        stranger.write_text(json.dumps(document))
        with pytest.raises(KubeUnreachable, match="certificate verify failed"):
            open_cluster(Source(str(stranger))).get(NODES)
