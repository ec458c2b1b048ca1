"""The review tree: one stable file per object, and no credential in it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eks_hybrid_gpu.review.normalize import (
    REDACTED,
    DuplicateObjectError,
    dump,
    normalize,
    object_path,
    read_render_dir,
    read_tree,
    redact_object,
    redact_text,
    sensitive_key,
    write_tree,
)

pytestmark = pytest.mark.unit

KUBECONFIG_TEXT = """apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0EtREFUQQ==
users:
- name: admin
  user:
    token: 0123456789abcdef0123456789abcdef
    client-key-data: S0VZLURBVEE=
- name: oidc
  user:
    auth-provider:
      config:
        id-token: eyJhbGciOi.payload.sig
        refresh-token: r3fr3sh
contexts:
- name: local
  context: {cluster: local, user: admin}
"""
SECRETS = [
    "0123456789abcdef0123456789abcdef",
    "S0VZLURBVEE=",
    "eyJhbGciOi.payload.sig",
    "r3fr3sh",
    "aHVudGVyMg==",
    "hunter2",
    "s3cr3t-value",
    "pa55word",
    "Zm9v",
    "bearer-secret-value",
]


def _secret() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "registry", "namespace": "gpu-system", "annotations": {"pulumi.com/autonamed": "true"}},
        "type": "Opaque",
        "data": {"password": "aHVudGVyMg==", "username": "Zm9v"},
        "stringData": {"config.json": "hunter2"},
    }


def _config_map() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "access", "namespace": "gpu-system"},
        "data": {
            "kubeconfig": KUBECONFIG_TEXT,
            "settings.json": '{\n  "apiToken": "s3cr3t-value",\n  "replicas": 4\n}\n',
            "token": "pa55word",
            "curl.sh": "curl -H 'Authorization: Bearer bearer-secret-value' https://x\n",
        },
    }


def _job() -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "smoke",
            "namespace": "ai-workloads",
            "annotations": {"pulumi.com/skipAwait": "true", "pulumi.com/autonamed": "true"},
        },
        "spec": {
            "template": {
                "spec": {
                    "automountServiceAccountToken": False,
                    "imagePullSecrets": [{"name": "registry"}],
                    "volumes": [{"name": "tls", "secret": {"secretName": "webhook-tls"}}],
                    "containers": [{"name": "c", "env": [{"name": "API_TOKEN", "value": "plain"}]}],
                }
            }
        },
    }


def _crd() -> dict[str, object]:
    schema = {
        "type": "object",
        "properties": {
            "pullSecret": {"description": "Name of the pull secret.", "type": "string"},
            "token": {"type": "string"},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]},
    }


@pytest.mark.parametrize(
    ("key", "sensitive"),
    [
        ("token", True),
        ("apiToken", True),
        ("id-token", True),
        ("password", True),
        ("clientSecret", True),
        ("client_secret", True),
        ("client-key-data", True),
        ("secretName", False),
        ("imagePullSecrets", False),
        ("tokenFile", False),
        ("name", False),
        ("automountServiceAccountToken", True),  # but its boolean value stays
    ],
)
def test_sensitive_keys(key: str, sensitive: bool) -> None:
    assert sensitive_key(key) is sensitive


def test_secret_values_are_redacted_and_keys_kept() -> None:
    redacted = redact_object(_secret())

    assert redacted["data"] == {"password": REDACTED, "username": REDACTED}
    assert redacted["stringData"] == {"config.json": REDACTED}
    assert redacted["type"] == "Opaque"


def test_kubeconfig_and_embedded_credentials_are_redacted() -> None:
    data = redact_object(_config_map())["data"]

    kubeconfig = yaml.safe_load(data["kubeconfig"])
    assert kubeconfig["users"][0]["user"] == {"token": REDACTED, "client-key-data": REDACTED}
    assert kubeconfig["users"][1]["user"]["auth-provider"]["config"] == {
        "id-token": REDACTED,
        "refresh-token": REDACTED,
    }
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert '"apiToken": <redacted>,' in data["settings.json"]
    assert '"replicas": 4' in data["settings.json"]
    assert data["token"] == REDACTED
    assert data["curl.sh"] == f"curl -H 'Authorization: Bearer {REDACTED}' https://x\n"


def test_no_secret_reaches_the_tree() -> None:
    tree = normalize([_secret(), _config_map(), _job()])

    text = "\n".join(tree.values())
    for secret in SECRETS:
        assert secret not in text, secret


def test_what_a_reviewer_needs_is_not_redacted() -> None:
    job = yaml.safe_load(normalize([_job()])["Job/ai-workloads/smoke.yaml"])
    pod = job["spec"]["template"]["spec"]

    assert pod["automountServiceAccountToken"] is False
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["volumes"][0]["secret"] == {"secretName": "webhook-tls"}
    assert pod["containers"][0]["env"] == [{"name": "API_TOKEN", "value": "plain"}]


def test_schema_field_names_are_not_credentials() -> None:
    crd = yaml.safe_load(normalize([_crd()])["CustomResourceDefinition/_cluster/things.example.com.yaml"])
    properties = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]

    assert properties["pullSecret"] == {"description": "Name of the pull secret.", "type": "string"}
    assert properties["token"] == {"type": "string"}


def test_messages_are_redacted() -> None:
    assert redact_text("password: hunter2") == f"password: {REDACTED}"
    assert redact_text("Authorization: Bearer abc.def") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("hostDriverVerified: true") == "hostDriverVerified: true"
    assert redact_text("token: true") == "token: true"


def test_paths_one_file_per_object() -> None:
    assert object_path(_job()) == "Job/ai-workloads/smoke.yaml"
    assert object_path(_crd()) == "CustomResourceDefinition/_cluster/things.example.com.yaml"
    role = {"kind": "ClusterRole", "metadata": {"name": "system:gpu|reader"}}
    assert object_path(role) == "ClusterRole/_cluster/system_gpu_reader.yaml"


def test_internal_annotations_dropped_and_behaviour_annotations_kept() -> None:
    job = yaml.safe_load(normalize([_job()])["Job/ai-workloads/smoke.yaml"])
    secret = yaml.safe_load(normalize([_secret()])["Secret/gpu-system/registry.yaml"])

    assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert "annotations" not in secret["metadata"]


def test_dump_is_sorted_literal_and_stable() -> None:
    first = {"kind": "ConfigMap", "data": {"b": "x\ny\n", "a": "1"}, "apiVersion": "v1"}
    second = {"apiVersion": "v1", "data": {"a": "1", "b": "x\ny\n"}, "kind": "ConfigMap"}

    assert dump(first) == dump(second)
    assert dump(first) == "apiVersion: v1\ndata:\n  a: '1'\n  b: |\n    x\n    y\nkind: ConfigMap\n"


def test_checkout_paths_are_spelled_relative_to_the_project() -> None:
    obj = {
        "kind": "DaemonSet",
        "metadata": {"name": "p", "namespace": "n", "annotations": {"eks-hybrid-gpu.io/chart": "/w/shared/c.tgz@1"}},
        "spec": {"path": "/w/sharedness", "other": "/w/main/charts/x.tgz"},
    }
    replacements = [("/w/main", "$PROJECT"), ("/w/shared", "$PROJECT/../shared")]

    out = yaml.safe_load(normalize([obj], replacements)["DaemonSet/n/p.yaml"])

    assert out["metadata"]["annotations"]["eks-hybrid-gpu.io/chart"] == "$PROJECT/../shared/c.tgz@1"
    assert out["spec"] == {"path": "/w/sharedness", "other": "$PROJECT/charts/x.tgz"}


def test_two_different_objects_on_one_path_are_refused() -> None:
    a = {"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "x"}}
    b = {"apiVersion": "v2", "kind": "Widget", "metadata": {"name": "x"}}

    assert len(normalize([a, a])) == 1
    with pytest.raises(DuplicateObjectError, match=r"Widget/_cluster/x\.yaml"):
        normalize([a, b])


def test_render_folder_round_trip(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "0-crd").mkdir(parents=True)
    (raw / "1-manifest").mkdir()
    (raw / "0-crd" / "crd.yaml").write_text(yaml.safe_dump(_crd()))
    (raw / "1-manifest" / "job.yaml").write_text(yaml.safe_dump(_job()))
    (raw / "1-manifest" / "secret.yaml").write_text(yaml.safe_dump(_secret()))

    tree = normalize(read_render_dir(raw))
    write_tree(tree, tmp_path / "tree")

    assert read_tree(tmp_path / "tree") == tree
    assert sorted(tree) == [
        "CustomResourceDefinition/_cluster/things.example.com.yaml",
        "Job/ai-workloads/smoke.yaml",
        "Secret/gpu-system/registry.yaml",
    ]
    on_disk = "".join(p.read_text() for p in (tmp_path / "tree").rglob("*.yaml"))
    assert "aHVudGVyMg==" not in on_disk


def test_objects_holding_a_pulumi_secret_keep_only_their_identity(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "1-manifest"
    raw.mkdir(parents=True)
    holder = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "gpu-system", "labels": {"a": "b"}},
        "data": {"message": "plain-secret-from-config", "count": 3},
    }
    (raw / "holder.yaml").write_text(yaml.safe_dump(holder))
    (raw / "job.yaml").write_text(yaml.safe_dump(_job()))

    objects = read_render_dir(tmp_path / "raw", frozenset({raw / "holder.yaml"}))

    assert objects[0] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "gpu-system", "labels": {"a": REDACTED}},
        "data": {"message": REDACTED, "count": 3},
    }
    assert objects[1] == _job()
