"""`KUBECONFIG` with several files, read as kubectl reads it: merged (the first file wins per name, the first
current-context set wins, missing and empty files add nothing, relative paths resolve against their own file's
folder), `--context` from any file, and the same for every command that reads a cluster."""

from __future__ import annotations

import http.server
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from cluster.client.errors import KubeAccessError
from cluster.client.kubeconfig import Source, chosen_context, merged
from eks_hybrid_gpu import cli, cluster_access
from tests.support.loopback_api import send_json

pytestmark = pytest.mark.unit


def _config(contexts: dict[str, str], current: str | None = None, **extra: Any) -> dict[str, Any]:
    """A kubeconfig whose context NAME uses cluster NAME at `contexts[NAME]` and user NAME."""
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in contexts.items()],
        "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in contexts],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in contexts],
        **extra,
    }
    if current is not None:
        document["current-context"] = current
    return document


def _write(path: Path, document: dict[str, Any] | str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return str(path)


@pytest.fixture
def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_first_file_wins_per_name_and_for_the_current_context(tmp_path: Path) -> None:
    first = _write(tmp_path / "a" / "config", _config({"shared": "https://first.test", "a": "https://a.test"}, "a"))
    second = _write(tmp_path / "b" / "config", _config({"shared": "https://second.test", "b": "https://b.test"}, "b"))
    empty = _write(tmp_path / "empty", "")
    document = merged([first, str(tmp_path / "missing"), empty, second])
    assert [c["name"] for c in document["contexts"]] == ["shared", "a", "b"]  # type: ignore[index]
    servers = {c["name"]: c["cluster"]["server"] for c in document["clusters"]}  # type: ignore[index]
    assert servers == {"shared": "https://first.test", "a": "https://a.test", "b": "https://b.test"}
    assert document["current-context"] == "a"


def test_the_current_context_comes_from_the_first_file_that_sets_one(tmp_path: Path) -> None:
    first = _write(tmp_path / "a", _config({"a": "https://a.test"}))  # sets none
    second = _write(tmp_path / "b", _config({"b": "https://b.test"}, "b"))
    third = _write(tmp_path / "c", _config({"c": "https://c.test"}, "c"))
    assert merged([first, second, third])["current-context"] == "b"
    assert chosen_context(Source(None, kubeconfig_files=(first, second, third))) == "b"


def test_relative_files_resolve_against_the_folder_of_the_file_that_names_them(tmp_path: Path) -> None:
    first = _write(tmp_path / "a" / "config", _config({"a": "https://a.test"}, "a"))
    second_document = _config({"b": "https://b.test"})
    second_document["clusters"][0]["cluster"]["certificate-authority"] = "ca.crt"
    second_document["users"][0]["user"] = {"client-certificate": "certs/me.crt", "client-key": "/abs/me.key"}
    second = _write(tmp_path / "b" / "config", second_document)
    document = merged([first, second])
    cluster = next(c for c in document["clusters"] if c["name"] == "b")  # type: ignore[attr-defined]
    user = next(u for u in document["users"] if u["name"] == "b")  # type: ignore[attr-defined]
    assert cluster["cluster"]["certificate-authority"] == str(tmp_path / "b" / "ca.crt")
    assert user["user"] == {"client-certificate": str(tmp_path / "b" / "certs" / "me.crt"), "client-key": "/abs/me.key"}


def test_a_context_from_any_file_is_accepted_and_an_unknown_one_names_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_url: str
) -> None:
    first = _write(tmp_path / "a", _config({"prod": dead_url}, "prod"))
    second = _write(tmp_path / "b", _config({"lab": dead_url}, "lab"))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([first, second]))
    kube = cluster_access.connect(context="lab")
    assert (kube.context, kube.server, kube.kubeconfig) == ("lab", dead_url, f"{first}{os.pathsep}{second}")
    assert cluster_access.connect().context == "prod"
    with pytest.raises(KubeAccessError) as refused:
        cluster_access.connect(context="stage")
    assert (
        str(refused.value)
        == f"kubeconfig {first}{os.pathsep}{second} (merged) has no context stage; pick one of: lab, prod"
    )


def test_none_of_the_files_existing_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = os.pathsep.join([str(tmp_path / "x"), str(tmp_path / "y")])
    monkeypatch.setenv("KUBECONFIG", listed)
    with pytest.raises(KubeAccessError) as refused:
        cluster_access.connect()
    assert str(refused.value) == (
        f"kubeconfig {listed} (merged): none of these files exists; pass --kubeconfig PATH (and --context) of the "
        "cluster to inspect"
    )


def test_a_broken_file_in_the_list_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_url: str) -> None:
    good = _write(tmp_path / "a", _config({"a": dead_url}, "a"))
    broken = _write(tmp_path / "broken", "contexts: [unclosed\n")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([good, broken]))
    with pytest.raises(KubeAccessError, match=rf"cannot be used \({broken}: while parsing"):
        cluster_access.connect()


def test_kubeconfig_flag_is_one_file_as_kubectl_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_url: str
) -> None:
    only = _write(tmp_path / "only", _config({"only": dead_url}, "only"))
    other = _write(tmp_path / "other", _config({"other": dead_url}, "other"))
    monkeypatch.setenv("KUBECONFIG", other)
    with pytest.raises(KubeAccessError, match="has no context other; pick one of: only"):
        cluster_access.connect(only, "other")


class Recording(http.server.BaseHTTPRequestHandler):
    """An API server that answers every GET with 404 and records the paths asked."""

    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.paths.append(self.path.split("?", 1)[0])
        send_json(self, 404, json.dumps({"kind": "Status", "message": "not found"}).encode())

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture
def recorded() -> Iterator[tuple[str, list[str]]]:
    import threading

    handler = type("Recorded", (Recording,), {"paths": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.paths
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect"],
        ["smoke"],
        ["move-host", "gpu-0", "--to", "dra"],
        ["migrate", "--stack", "mixed", "--cohort", "plugin", "--to", "dra", "--dry-run"],
        ["simulate", "show"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_that_reads_a_cluster_takes_a_context_from_the_second_file(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recorded: tuple[str, list[str]],
    dead_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, paths = recorded
    first = _write(tmp_path / "a", _config({"prod": dead_url}, "prod"))
    second = _write(tmp_path / "b", _config({"lab": url}, "lab"))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([first, second]))
    if argv[0] == "simulate":  # simulate's default is the local cluster's kubeconfig, never $KUBECONFIG
        argv = [*argv, "--kubeconfig", second]
    cli.main([*argv, "--context", "lab"])
    err = capsys.readouterr().err
    assert "has no context" not in err
    assert "cannot reach" not in err  # the first file's dead server was never asked
    assert paths, f"{argv[0]} sent nothing to the second file's server: {err}"


def test_only_the_loading_thread_s_log_counts_as_the_exec_plugin_s_failure() -> None:
    """Another thread's warning while a kubeconfig loads (urllib3's "Connection pool is full" from a Lease renewal)
    once refused a `pulumi up` as a failed exec credential plugin."""
    import logging
    import threading

    from cluster.client.kubeconfig import _loader_log

    with _loader_log() as caught:
        other = threading.Thread(target=lambda: logging.getLogger("elsewhere").warning("not the loader's"))
        other.start()
        other.join()
        logging.getLogger("urllib3.connectionpool").warning("Connection pool is full, discarding connection")
        logging.getLogger().error("exec: process returned 1")
    assert caught == ["exec: process returned 1"]
