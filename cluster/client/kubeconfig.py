"""Which cluster, as whom: a kubeconfig (a file, or the text the program generated for EKS) opened into a `Kube`.

Every way of not getting a usable client — no file, a folder, unparsable YAML, a context the file lacks — is a
`KubeAccessError` whose one line names the kubeconfig and says what to do. The words of the fix belong to the
caller (`Hints`): the day-2 commands name their `--kubeconfig/--context`, the program's preflight names the stack's
`eks-hybrid-gpu:cluster.*` settings; the mapping of what happened to which words is here, once.
"""

from __future__ import annotations

import json
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
        return self.described_as or f"kubeconfig {self.kubeconfig_path}"


def missing_file(path: str) -> str:
    """Why a path given as a file is not one, in a refusal's words: a folder says it is a folder."""
    if path and Path(path).is_dir():
        return "is a folder, not a kubeconfig file"
    return "does not exist"


UNUSABLE = (ConfigException, yaml.YAMLError, OSError, ValueError, TypeError, KeyError)
"""What the kubernetes client's kubeconfig loader raises on a file it cannot use (it parses with PyYAML)."""


def _unusable(source: Source, error: Exception) -> KubeAccessError:
    return KubeAccessError(f"{source.name} cannot be used ({' '.join(str(error).split())}); {source.hints.unusable}")


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


def open_client(source: Source) -> tuple[client.ApiClient, str]:
    """The kubernetes ApiClient for the source's context, and that context's name; KubeAccessError when unusable."""
    if source.kubeconfig_content is not None:
        try:
            document = json.loads(source.kubeconfig_content)
            api: client.ApiClient = config.new_client_from_config_dict(document, context=source.context)  # type: ignore[no-untyped-call]
        except UNUSABLE as error:
            raise _unusable(source, error) from None
        return api, str(source.context or document.get("current-context") or "")
    path = source.kubeconfig_path or ""
    if not Path(path).is_file():
        msg = f"{source.name} {missing_file(path)}; {source.hints.missing}"
        raise KubeAccessError(msg)
    chosen = chosen_context(source)
    try:
        api = config.new_client_from_config(config_file=path, context=source.context)  # type: ignore[no-untyped-call]
    except UNUSABLE as error:
        raise _unusable(source, error) from None
    return api, chosen
