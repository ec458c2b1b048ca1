"""Turn a raw `renderYamlToDirectory` folder into the review tree: one sorted, redacted file per object.

Layout: `<Kind>/<namespace or _cluster>/<name>.yaml`. Keys are sorted, multi-line strings are literal blocks
(so a ConfigMap holding a config file diffs line by line), and the same objects always give the same bytes.

Pulumi annotations: the provider adds nothing of its own in render mode with server-side apply; every
`pulumi.com/*` annotation that reaches the tree was asked for by the program or a chart option
(`pulumi.com/skipAwait`, `…/waitFor`, `…/patchForce`, `…/deletionPropagationPolicy`…) and changes how the
object is applied, so it is kept. Only the provider's bookkeeping (`pulumi.com/autonamed`) is dropped.

Redaction, before anything is written: every value of a Secret's `data`/`stringData`; every string under a key
whose last word is token, password, passwd or secret (`token`, `apiToken`, `client-secret`…) or that holds key
material (`client-key-data`, `private-key`…); and, inside multi-line strings (embedded config files,
kubeconfigs), the value of any `key: value`/`"key": "value"` whose key is such a key, and `Bearer` tokens. An
object into which the program put a Pulumi secret (the provider reports the file) keeps only its apiVersion,
kind, name and namespace. Booleans and numbers stay (`automountServiceAccountToken: false` matters to a
reviewer), and so do the reference fields (`secretName`, `name`, `key`, `path`…) of a `secret:` volume source
or projection. Keys of a JSON schema's `properties` (a CRD's `pullSecret` field) name fields and are not
treated as credentials.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REDACTED = "<redacted>"
CLUSTER_SCOPED = "_cluster"
DROPPED_ANNOTATIONS = frozenset({"pulumi.com/autonamed"})
_SENSITIVE_WORDS = frozenset({"token", "password", "passwd", "secret"})
_SENSITIVE_KEYS = frozenset(
    {"client-key-data", "client-key", "private-key", "privatekey", "api-key", "apikey", "credentials", "auth"}
)
REFERENCE_FIELDS = frozenset(
    {"name", "secretName", "key", "path", "items", "optional", "defaultMode", "mode", "audience", "expirationSeconds"}
)
"""Fields of a `secret:` volume source, a secret projection or a `serviceAccountToken:` projection: names, keys
and paths of a credential, not the credential, so they stay readable under a sensitive key."""
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_UNSAFE_PATH = re.compile(r'[":<>|*?\\\r\n/]')
_EMBEDDED_PAIR = re.compile(
    r"""(?P<lead>^[ \t]*-?[ \t]*["']?(?P<key>[A-Za-z0-9_.\-]+)["']?[ \t]*[:=][ \t]*)"""
    r"""(?P<value>[^\s,{}\[\]].*?)(?P<tail>[ \t]*,?[ \t]*)$""",
    re.MULTILINE,
)
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]+")


def sensitive_key(key: str) -> bool:
    """Whether values under this mapping key are credentials."""
    words = [w for w in re.split(r"[-_.]", _CAMEL.sub(r"\1-\2", key).lower()) if w]
    if not words:
        return False
    return words[-1] in _SENSITIVE_WORDS or "-".join(words) in _SENSITIVE_KEYS or key.lower() in _SENSITIVE_KEYS


def _redact_all(value: Any) -> Any:
    """Every string under a sensitive key, except the reference fields of a Kubernetes secret/token source."""
    if isinstance(value, str):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: v if k in REFERENCE_FIELDS and isinstance(v, str) else _redact_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_all(v) for v in value]
    return value


def redact_text(text: str) -> str:
    """Redact credentials inside an embedded document (a config file, a kubeconfig) or a message."""

    def pair(match: re.Match[str]) -> str:
        if not sensitive_key(match["key"]):
            return match[0]
        value = match["value"].strip()
        if value.lower() in ("true", "false", "null", "~", "") or value.startswith("|") or value.startswith(">"):
            return match[0]
        return f"{match['lead']}{REDACTED}{match['tail']}"

    return _BEARER.sub(rf"\g<1>{REDACTED}", _EMBEDDED_PAIR.sub(pair, text))


def redact(value: Any, *, field_names: bool = False) -> Any:
    """A copy of a value with credentials replaced by `<redacted>` (see the module docstring).

    `field_names`: the mapping's keys name fields of a JSON schema (under `properties`, as in a CRD), so a
    key such as `pullSecret` there describes a field and holds no credential.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not field_names and sensitive_key(str(key)):
                out[key] = _redact_all(item)
            else:
                out[key] = redact(item, field_names=key == "properties" and not field_names)
        return out
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Redact one Kubernetes object; a Secret loses every data value (its keys stay, to show what changed)."""
    result: dict[str, Any] = redact(obj)
    if obj.get("kind") == "Secret" and str(obj.get("apiVersion", "")) == "v1":
        for field in ("data", "stringData"):
            if isinstance(result.get(field), Mapping):
                result[field] = {key: REDACTED for key in result[field]}
    return result


def _drop_internal(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("annotations"), dict):
        annotations = {k: v for k, v in metadata["annotations"].items() if k not in DROPPED_ANNOTATIONS}
        metadata = {**metadata, "annotations": annotations} if annotations else {**metadata}
        if not annotations:
            metadata.pop("annotations", None)
        obj = {**obj, "metadata": metadata}
    return obj


def _replace_paths(value: Any, replacements: list[tuple[str, str]]) -> Any:
    """Respell strings that start with a checkout-specific absolute path (the first, longest match only)."""
    if isinstance(value, str):
        for old, new in replacements:
            if value == old or value.startswith(old + "/"):
                return new + value[len(old) :]
        return value
    if isinstance(value, Mapping):
        return {k: _replace_paths(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_paths(v, replacements) for v in value]
    return value


def _safe(part: str) -> str:
    return _UNSAFE_PATH.sub("_", part) or "_"


def object_path(obj: Mapping[str, Any]) -> str:
    """`<Kind>/<namespace or _cluster>/<name>.yaml`, with characters artifact stores refuse replaced by `_`."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace") or CLUSTER_SCOPED
    return f"{_safe(str(obj.get('kind', 'Unknown')))}/{_safe(str(namespace))}/{_safe(str(metadata.get('name')))}.yaml"


class _Dumper(yaml.SafeDumper):
    """Sorted keys, block style, literal blocks for multi-line strings, no line folding."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str)


def dump(obj: Any) -> str:
    """The stable YAML text of one object."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=10**6)


class DuplicateObjectError(ValueError):
    """Two rendered objects map to the same review file."""


def normalize(objects: list[dict[str, Any]], replacements: list[tuple[str, str]] | None = None) -> dict[str, str]:
    """Path -> stable, redacted YAML text of every object."""
    ordered = sorted(replacements or [], key=lambda pair: -len(pair[0]))
    tree: dict[str, str] = {}
    for raw in objects:
        obj = redact_object(_replace_paths(_drop_internal(raw), ordered))
        path = object_path(obj)
        text = dump(obj)
        if path in tree and tree[path] != text:
            msg = f"two rendered objects map to {path}; their kinds, namespaces and names must differ"
            raise DuplicateObjectError(msg)
        tree[path] = text
    return dict(sorted(tree.items()))


def _every_string(value: Any) -> Any:
    if isinstance(value, str):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: _every_string(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_every_string(v) for v in value]
    return value


def redact_secret_holder(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object the provider says holds a Pulumi secret: every string but its apiVersion, kind, name, namespace.

    Where the secret sits is unknown (any field can take a secret Output), so nothing else is shown.
    """
    metadata = obj.get("metadata") or {}
    result = {k: v if k in ("apiVersion", "kind") else _every_string(v) for k, v in obj.items() if k != "metadata"}
    result["metadata"] = {k: v if k in ("name", "namespace") else _every_string(v) for k, v in metadata.items()}
    return result


def read_render_dir(render_dir: Path, secret_files: frozenset[Path] = frozenset()) -> list[dict[str, Any]]:
    """Every object the provider rendered (`0-crd/` and `1-manifest/`), in file-name order.

    Objects of `secret_files` (files the provider reported a Pulumi secret in) are wholly redacted on read.
    """
    objects: list[dict[str, Any]] = []
    secret = {p.resolve() for p in secret_files}
    for file in sorted(render_dir.rglob("*.yaml")):
        for document in yaml.safe_load_all(file.read_text()):
            if isinstance(document, dict) and document.get("kind"):
                objects.append(redact_secret_holder(document) if file.resolve() in secret else document)
    return objects


def write_tree(tree: Mapping[str, str], root: Path) -> None:
    """Write the tree under `root` (which is emptied first)."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for path, text in tree.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def read_tree(root: Path) -> dict[str, str]:
    """A tree written by `write_tree`."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.yaml"))}
