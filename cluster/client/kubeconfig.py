"""Which cluster, as whom: a kubeconfig (a file, or the text the program generated for EKS) opened into a `Kube`.

Every way of not getting a usable client — no file, a folder, unparsable YAML, a context the file lacks — is a
`KubeAccessError` whose one line names the kubeconfig and says what to do. The words of the fix belong to the
caller (`Hints`): the day-2 commands name their `--kubeconfig/--context`, the program's preflight names the stack's
`eks-hybrid-gpu:cluster.*` settings; the mapping of what happened to which words is here, once.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
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

    @property
    def name(self) -> str:
        """How refusals name this kubeconfig."""
        path = str(self.kubeconfig_path)
        return self.described_as or f"kubeconfig {path if path.isprintable() else ascii(path)}"


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


def chosen_context(source: Source) -> str:
    """The context the source names in its kubeconfig file, else the current one; KubeAccessError if it has none."""
    path = source.kubeconfig_path or ""
    try:
        contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        names = sorted(c["name"] for c in contexts or [])
        current = (active or {}).get("name", "")
    except UNUSABLE as error:
        raise _unusable(source, error) from None
    if source.context is not None and source.context not in names:
        msg = f"{source.name} has no context {source.context}; pick one of: {', '.join(names) or 'none'}"
        raise KubeAccessError(msg)
    return str(source.context or current)


@contextmanager
def _loader_log() -> Iterator[list[str]]:
    """What the kubernetes client's kubeconfig loader logs while it runs, kept from the process's output.

    It reports an exec credential plugin that is missing or fails with `logging.error` on the root logger — which,
    with no handler yet, configures logging for the whole process (an `ERROR:root:` line, then every urllib3 retry
    warning) — and then goes on without credentials, so the first request gets a misleading 401. Caught here, the
    failure becomes one refusal before any request.
    """
    caught: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
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


def _shown(value: str) -> str:
    return value if value.isascii() and value.isprintable() and len(value) <= 80 else ascii(value[:80])


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
    path = source.kubeconfig_path or ""
    try:
        found = Path(path).is_file()
    except (OSError, ValueError) as error:  # a name too long for the file system, a NUL byte
        raise _unusable(source, error) from None
    if not found:
        msg = f"{source.name} {missing_file(path)}; {source.hints.missing}"
        raise KubeAccessError(msg)
    _check_file(source, path)
    chosen = chosen_context(source)
    try:
        with _loader_log() as logged:
            api = config.new_client_from_config(config_file=path, context=source.context)  # type: ignore[no-untyped-call]
    except UNUSABLE as error:
        raise _unusable(source, error) from None
    return _loaded(source, api, chosen, logged), chosen
