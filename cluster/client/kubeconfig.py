"""Which cluster, as whom: a kubeconfig (a file, several merged, or the program's EKS text) opened into a `Kube`.

Several files (a `$KUBECONFIG` list, which the CLI reads) are merged as kubectl merges them: files that do not
exist or are empty are passed over; the first file that names a cluster, user or context wins for that name; the
first file that sets `current-context` sets it; relative paths (certificate files, a token file, an exec command
given by path) are resolved against the folder of the file that holds them. A `--context` may come from any file.

Every way of not getting a usable client — no file, a folder, unparsable YAML, a context the file lacks — is a
`KubeAccessError` whose one line names the kubeconfig and says what to do. The words of the fix belong to the
caller (`Hints`): the day-2 commands name their `--kubeconfig/--context`, the program's preflight names the stack's
`eks-hybrid-gpu:cluster.*` settings; the mapping of what happened to which words is here, once.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from cluster.client.errors import KubeAccessError


@dataclass(frozen=True)
class Hints:
    """What a refusal tells the person to do, per way of failing; the day-2 commands' words by default."""

    missing: str = "pass --kubeconfig PATH (and --context) of the cluster to inspect"
    unusable: str = "pass a valid --kubeconfig/--context"
    unreachable: str = "check that the cluster is running and pass the right --kubeconfig/--context"
    timed_out: str = (
        "check that the cluster is running and pass the right --kubeconfig/--context, or give it longer with "
        "--request-timeout"
    )
    unauthorized: str = "refresh the token or pass the administrator --kubeconfig/--context"
    forbidden: str = "use the administrator --kubeconfig/--context or ask the cluster owner for that permission"


@dataclass(frozen=True)
class Source:
    """Where a client reads from, how a refusal names it, and what it tells the person when that fails."""

    kubeconfig_path: str | None
    kubeconfig_content: str | None = None
    """A kubeconfig as JSON text (the one the program generates for an EKS cluster); wins over the path."""
    context: str | None = None
    described_as: str = ""
    """`kubeconfig PATH` or `the kubeconfig generated for EKS cluster NAME`: a refusal's first words."""
    hints: Hints = field(default_factory=Hints)
    kubeconfig_files: tuple[str, ...] = ()
    """Several kubeconfig files (a `$KUBECONFIG` list), merged as kubectl merges them; used without a path."""

    @property
    def files(self) -> tuple[str, ...]:
        """The kubeconfig files this source reads, in kubectl's order of precedence."""
        return (self.kubeconfig_path,) if self.kubeconfig_path else self.kubeconfig_files

    @property
    def name(self) -> str:
        """How refusals name this kubeconfig."""
        if self.described_as:
            return self.described_as
        if len(self.files) > 1:
            return f"kubeconfig {_shown(os.pathsep.join(self.files), 400)} (merged)"
        return f"kubeconfig {_shown(self.kubeconfig_path or ''.join(self.files), 400)}"


def missing_file(path: str) -> str:
    """Why a path given as a file is not one, in a refusal's words: a folder says it is a folder."""
    if path and Path(path).is_dir():
        return "is a folder, not a kubeconfig file"
    return "does not exist"


UNUSABLE = (
    ConfigException,
    yaml.YAMLError,
    OSError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    RecursionError,
)
"""What the kubernetes client's kubeconfig loader raises on a file it cannot use: it parses with PyYAML (nesting
thousands deep exhausts its recursion) and reads entries by key, so a value of the wrong type (`server: 5`, a user
that is a string) fails on whatever method that type lacks."""
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
"""Far above any real kubeconfig (a few KiB a cluster): a larger file is refused before PyYAML spends a minute on it."""


def _check_file(source: Source, path: str) -> None:
    """A kubeconfig file the loader may read: not larger than MAX_KUBECONFIG_BYTES, UTF-8; KubeAccessError else."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_KUBECONFIG_BYTES:
            msg = (
                f"{source.name} is {size // 1024} KiB, larger than any kubeconfig (at most "
                f"{MAX_KUBECONFIG_BYTES // (1024 * 1024)} MiB is read); {source.hints.unusable}"
            )
            raise KubeAccessError(msg)
        Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        msg = f"{source.name} is not UTF-8 text (byte offset {error.start}); {source.hints.unusable}"
        raise KubeAccessError(msg) from None
    except OSError as error:
        raise _unusable(source, error) from None


def _unusable(source: Source, error: Exception) -> KubeAccessError:
    if isinstance(error, RecursionError):
        reason = "it nests deeper than any kubeconfig"
    elif isinstance(error, AttributeError | TypeError | KeyError) and not isinstance(error, ConfigException):
        reason = (
            "it is not shaped as kubectl reads one: a mapping whose clusters, users and contexts are lists of named "
            "entries, with a string server and a mapping user; a value here has another type"
        )
    elif isinstance(error, OSError):
        reason = " ".join((error.strerror or str(error)).split()).lower()
    else:
        reason = " ".join(str(error).split())[:300]
    return KubeAccessError(f"{source.name} cannot be used ({reason}); {source.hints.unusable}")


SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
"""The named lists of a kubeconfig that a merge takes per name, each entry's body under its own key."""
RELATIVE_FILES = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}
"""The file fields kubectl resolves against the folder of the kubeconfig that holds them."""


class MergeError(ValueError):
    """One of the merged files cannot be used; the message names it."""


def _absolute(body: Mapping[str, object], kind: str, folder: str) -> dict[str, object]:
    """`body` with its relative file paths made absolute against `folder`, as kubectl resolves them."""
    resolved = dict(body)
    for key in RELATIVE_FILES.get(kind, ()):
        value = resolved.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            resolved[key] = os.path.join(folder, value)
    plugin = resolved.get("exec")
    command = plugin.get("command") if isinstance(plugin, Mapping) else None
    if isinstance(plugin, Mapping) and isinstance(command, str) and os.sep in command and not os.path.isabs(command):
        resolved["exec"] = {**plugin, "command": os.path.join(folder, command)}
    return resolved


def merged(paths: Sequence[str]) -> dict[str, object]:
    """One kubeconfig document from several files, merged as kubectl merges a `$KUBECONFIG` list.

    A file that does not exist or is empty adds nothing; the first file that names a cluster, user or context wins
    for that name, and the first that sets `current-context` sets it. MergeError names a file that cannot be used.
    """
    document: dict[str, object] = {"apiVersion": "v1", "kind": "Config", "current-context": ""}
    taken: dict[str, dict[str, object]] = {section: {} for section, _ in SECTIONS}
    for path in paths:
        path = os.path.expanduser(path)
        if not path or not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = yaml.safe_load(handle)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            msg = f"{path}: {' '.join(str(error).split())}"
            raise MergeError(msg) from None
        if loaded is None:
            continue
        if not isinstance(loaded, Mapping):
            msg = f"{path} is not a kubeconfig (its top level is not a mapping)"
            raise MergeError(msg)
        folder = os.path.dirname(os.path.abspath(path))
        for section, kind in SECTIONS:
            for entry in loaded.get(section) or []:
                name = entry.get("name") if isinstance(entry, Mapping) else None
                if not isinstance(name, str) or not name:
                    msg = f"{path}: an entry of {section} has no name"
                    raise MergeError(msg)
                body = entry.get(kind) if isinstance(entry.get(kind), Mapping) else {}
                taken[section].setdefault(name, {"name": name, kind: _absolute(body, kind, folder)})
        current = loaded.get("current-context")
        if not document["current-context"] and isinstance(current, str):
            document["current-context"] = current
    for section, _ in SECTIONS:
        document[section] = list(taken[section].values())
    return document


def _merged_document(source: Source) -> dict[str, object]:
    try:
        return merged(source.files)
    except MergeError as error:
        raise _unusable(source, error) from None


def _context_names(source: Source) -> tuple[list[str], str]:
    """The source's context names (sorted) and its current context."""
    if len(source.files) > 1:
        document = _merged_document(source)
        contexts = document.get("contexts") or []
        names = sorted(str(c["name"]) for c in contexts)  # type: ignore[attr-defined, index]
        return names, str(document.get("current-context") or "")
    try:
        contexts, active = config.list_kube_config_contexts(config_file=source.files[0])  # type: ignore[no-untyped-call]
        return sorted(c["name"] for c in contexts or []), str((active or {}).get("name", ""))
    except UNUSABLE as error:
        raise _unusable(source, error) from None


def chosen_context(source: Source) -> str:
    """The context the source names in its kubeconfig file(s), else the current one; KubeAccessError if none."""
    names, current = _context_names(source)
    if source.context is not None and source.context not in names:
        msg = f"{source.name} has no context {source.context}; pick one of: {', '.join(names) or 'none'}"
        raise KubeAccessError(msg)
    if not source.context and not current and len(source.files) > 1:
        msg = f"{source.name} sets no current-context; pass --context (one of: {', '.join(names) or 'none'})"
        raise KubeAccessError(msg)
    return str(source.context or current)


def _missing(source: Source) -> KubeAccessError | None:
    """Why the source's files give no kubeconfig at all (one missing file, or none of several), else None."""
    files = source.files
    if len(files) == 1 and not Path(files[0]).is_file():
        return KubeAccessError(f"{source.name} {missing_file(files[0])}; {source.hints.missing}")
    if len(files) > 1 and not any(Path(os.path.expanduser(f)).is_file() for f in files):
        return KubeAccessError(f"{source.name}: none of these files exists; {source.hints.missing}")
    if not files:
        return KubeAccessError(f"no kubeconfig file was named; {source.hints.missing}")
    return None


@contextmanager
def _loader_log() -> Iterator[list[str]]:
    """What the kubernetes client's kubeconfig loader logs while it runs, kept from the process's output.

    It reports an exec credential plugin that is missing or fails with `logging.error` on the root logger — which,
    with no handler yet, configures logging for the whole process (an `ERROR:root:` line, then every urllib3 retry
    warning) — and then goes on without credentials, so the first request gets a misleading 401. Caught here, the
    failure becomes one refusal before any request. Only what the loading thread logs counts, and never urllib3's
    own warnings: another thread of the process (a Lease renewal, a parallel read) may log meanwhile, and its
    "Connection pool is full" once read as the plugin's failure and refused a `pulumi up`.
    """
    caught: list[str] = []
    loading = threading.get_ident()

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.thread == loading and not record.name.startswith("urllib3"):
                caught.append(record.getMessage())

    handler = Catch(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield caught
    finally:
        root.removeHandler(handler)


def _loaded(source: Source, api: client.ApiClient, context: str, logged: list[str]) -> client.ApiClient:
    """The client, once its credentials and its server are known to be there; KubeAccessError otherwise."""
    where = f"{source.name}, context {context or '(none)'}"
    if logged:
        reason = " ".join(logged[0].split())[:200]
        missing = _NOT_FOUND.search(reason)
        what = (
            f"{_shown(missing[1])} is not installed (not found on PATH)"
            if missing
            else f"failed ({_ERRNO.sub('', reason)})"
        )
        msg = (
            f"{where}: the user's exec credential plugin {what}: no credentials, so no request was sent; install it "
            f"(for EKS: the AWS CLI, `aws eks get-token`) or fix the user's exec entry, or {source.hints.unusable}"
        )
        raise KubeAccessError(msg)
    host = str(api.configuration.host or "")
    if not host.startswith(("https://", "http://")):
        said = f"is {_shown(host)}, not an https:// URL" if host else "is missing"
        msg = f"{where}: the cluster's server (clusters[].cluster.server) {said}; set it or {source.hints.unusable}"
        raise KubeAccessError(msg)
    return api


_NOT_FOUND = re.compile(r"\[Errno 2\][^:]*: '([^']*)'")
"""How the loader logs a plugin that is not there: Popen's `[Errno 2] No such file or directory: 'aws'`."""
_ERRNO = re.compile(r"\[Errno -?\d+\] ")


def _shown(value: str, limit: int = 80) -> str:
    """A value as a refusal shows it: as is when short and printable, else escaped and cut."""
    return value if value.isascii() and value.isprintable() and len(value) <= limit else ascii(value[:limit])


def open_client(source: Source) -> tuple[client.ApiClient, str]:
    """The kubernetes ApiClient for the source's context, and that context's name; KubeAccessError when unusable.

    Unusable: the file is missing or no kubeconfig, the context is absent, the user's exec credential plugin is
    missing or fails, the cluster names no server.
    """
    if source.kubeconfig_content is not None:
        try:
            document = json.loads(source.kubeconfig_content)
            with _loader_log() as logged:
                api: client.ApiClient = config.new_client_from_config_dict(document, context=source.context)  # type: ignore[no-untyped-call]
        except UNUSABLE as error:
            raise _unusable(source, error) from None
        chosen = str(source.context or document.get("current-context") or "")
        return _loaded(source, api, chosen, logged), chosen
    try:
        missing = _missing(source)
    except (OSError, ValueError) as error:  # a name too long for the file system, a NUL byte
        raise _unusable(source, error) from None
    if missing is not None:
        raise missing
    for path in source.files:
        if Path(os.path.expanduser(path)).is_file():
            _check_file(source, os.path.expanduser(path))
    chosen = chosen_context(source)
    try:
        with _loader_log() as logged:
            if len(source.files) > 1:
                merged_document = _merged_document(source)
                api = config.new_client_from_config_dict(merged_document, context=chosen)  # type: ignore[no-untyped-call]
            else:
                # One file: the client's own loader, which also writes refreshed auth-provider tokens back to it.
                api = config.new_client_from_config(config_file=source.files[0], context=source.context)  # type: ignore[no-untyped-call]
    except UNUSABLE as error:
        raise _unusable(source, error) from None
    return _loaded(source, api, chosen, logged), chosen
