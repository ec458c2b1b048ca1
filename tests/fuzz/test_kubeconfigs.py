"""Whatever a kubeconfig holds: a client, or one line naming the kubeconfig, within a bounded time.

Bytes that are not UTF-8, YAML that is no mapping, kubeconfig-shaped documents with a value of the wrong type or a
key missing, nesting thousands deep, files of megabytes, an exec credential plugin that is not installed or fails,
a cluster without a server: `cluster.client.kubeconfig.open_client` (through `kubeclient.open_cluster`) turns each
into a `KubeAccessError` whose one line starts with `kubeconfig PATH`, or a client whose server is a URL. The command
(`inspect`, in a process of its own, so the process's logging is what a person sees) prints one line on stderr and
exits 2.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.client.errors import KubeAccessError
from cluster.client.kubeclient import open_cluster
from cluster.client.kubeconfig import MAX_KUBECONFIG_BYTES, Source

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
VALID: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}
BOUND_SECONDS = 10.0

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)
PATHS = [
    (),
    ("clusters",),
    ("clusters", 0),
    ("clusters", 0, "cluster"),
    ("clusters", 0, "cluster", "server"),
    ("clusters", 0, "name"),
    ("users",),
    ("users", 0, "user"),
    ("users", 0, "user", "token"),
    ("contexts",),
    ("contexts", 0, "context"),
    ("contexts", 0, "context", "cluster"),
    ("contexts", 0, "context", "user"),
    ("current-context",),
]


def mutated(path: tuple[Any, ...], value: object, delete: bool) -> object:
    """VALID with the value at `path` replaced (or the key deleted)."""
    if not path:
        return value
    document = copy.deepcopy(VALID)
    parent: Any = document
    for step in path[:-1]:
        parent = parent[step]
    if delete and isinstance(parent, dict):
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value
    return document


def outcome(path: Path) -> str:
    """`ok` or the refusal's one line; any other exception fails the test."""
    started = time.monotonic()
    try:
        kube = open_cluster(Source(str(path)))
    except KubeAccessError as error:
        text = str(error)
        assert "\n" not in text, text
        assert text.startswith(f"kubeconfig {path}"), text
        assert len(text) < 1200, text
        result = text
    else:
        assert kube.server.startswith(("https://", "http://")), kube.server
        result = "ok"
    assert time.monotonic() - started < BOUND_SECONDS
    return result


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_any_bytes_are_a_client_or_one_line(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "kubeconfig"
    path.write_bytes(data)
    outcome(path)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(PATHS), value=values, delete=st.booleans(), as_json=st.booleans())
def test_any_value_anywhere_is_a_client_or_one_line(
    tmp_path: Path, where: tuple[Any, ...], value: object, delete: bool, as_json: bool
) -> None:
    path = tmp_path / "kubeconfig"
    document = mutated(where, value, delete)
    path.write_text(json.dumps(document) if as_json else yaml.safe_dump(document))
    result = outcome(path)
    if document == VALID:
        assert result == "ok"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: " + "[" * 5000 + "]" * 5000, "it nests deeper than any kubeconfig"),
        ("[1, 2]", "it is not shaped as kubectl reads one"),
        (yaml.safe_dump(mutated(("clusters", 0, "cluster", "server"), 5, False)), "not shaped as kubectl reads one"),
        (yaml.safe_dump(mutated(("users", 0, "user"), "str", False)), "not shaped as kubectl reads one"),
        (yaml.safe_dump(mutated(("clusters", 0, "cluster", "server"), None, True)), "server) is missing"),
        (yaml.safe_dump(mutated(("clusters", 0, "cluster", "server"), "127.0.0.1:6443", False)), "not an https://"),
        ("clusters: [" + "{name: c, cluster: {server: 'https://a'}}," * 120_000 + "]\n", "larger than any kubeconfig"),
    ],
)
def test_hostile_kubeconfigs_are_refused_naming_why(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    if "larger" in words:
        assert path.stat().st_size > MAX_KUBECONFIG_BYTES
    assert words in outcome(path)


def test_a_kubeconfig_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_bytes(yaml.safe_dump(VALID).encode().replace(b"token: t", b"token: \xff"))
    offset = path.read_bytes().index(b"\xff")
    assert outcome(path) == (
        f"kubeconfig {path} is not UTF-8 text (byte offset {offset}); pass a valid --kubeconfig/--context"
    )


def inspect_stderr(kubeconfig: Path) -> tuple[int, list[str]]:
    """`eks-hybrid-gpu inspect` in a process of its own: exit code and stderr lines (logging included)."""
    done = subprocess.run(
        [sys.executable, "-m", "eks_hybrid_gpu", "inspect", "--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stderr.splitlines()


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (
            "aws-iam-nope",
            "the user's exec credential plugin aws-iam-nope is not installed (not found on PATH): no credentials, so "
            "no request was sent; install it (for EKS: the AWS CLI, `aws eks get-token`) or fix the user's exec "
            "entry, or pass a valid --kubeconfig/--context",
        ),
        ("false", "the user's exec credential plugin failed (exec: process returned 1): no credentials"),
    ],
)
def test_an_exec_plugin_missing_or_failing_is_one_line_before_any_request(
    tmp_path: Path, command: str, words: str
) -> None:
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": command}}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(mutated(("users", 0, "user"), exec_user, False)))
    code, lines = inspect_stderr(path)
    assert code == 2
    assert len(lines) == 1, lines  # no `ERROR:root:` line, no urllib3 retry warnings, no 401
    assert lines[0].startswith(f"inspect: kubeconfig {path}, context x: {words}"), lines


def test_a_cluster_without_a_server_is_one_line_and_no_urllib3_warning(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(mutated(("clusters", 0, "cluster"), {}, False)))
    code, lines = inspect_stderr(path)
    assert code == 2
    assert lines == [
        f"inspect: kubeconfig {path}, context x: the cluster's server (clusters[].cluster.server) is missing; set it "
        "or pass a valid --kubeconfig/--context"
    ]
