"""A small JSON client for the day-2 commands: kubeconfig loading and one-line refusals.

The commands read objects as plain JSON (the shape `kubectl get -o json` prints and the GPU integration guide's `jq`
checks read), so this wraps the Kubernetes client's transport instead of its typed models. Every way of
not getting an answer — no kubeconfig, an unreachable server, rejected credentials, a 403 — becomes a
`KubeAccessError` whose message names the kubeconfig, the context and the server, and says what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from components.config import NamespacesConfig
from components.kube_http import Unreachable, send, watch
from components.live import missing_file
from eks_hybrid_gpu import names
from eks_hybrid_gpu.localcluster import running_kubeconfig
from eks_hybrid_gpu.localpaths import local_state_dir
from eks_hybrid_gpu.names import BAD_NAME_EXIT_CODE, NameRefused

ACCESS_EXIT_CODE = 2
"""Exit code of a command that could not talk to the cluster at all."""
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
DAEMONSETS = "/apis/apps/v1/daemonsets"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
"""The cluster-wide lists the day-2 commands read."""
LIST_PAGE = 500
"""Items per page of `Kube.items`: what kubectl asks for."""


class KubeAccessError(Exception):
    """The cluster could not be reached or refused the user; the message is one line that says what to do."""


class KubeUnreachable(KubeAccessError):
    """No answer at all (refused, reset, timed out): the one access problem that waiting may cure."""


class KubeApiError(Exception):
    """The API server answered with an error other than an access refusal (for example 404 or 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def add_cluster_options(
    parser: argparse.ArgumentParser, kubeconfig_help: str = "default: $KUBECONFIG or ~/.kube/config"
) -> None:
    """--kubeconfig and --context, the same for every command that reads a cluster."""
    parser.add_argument("--kubeconfig", help=kubeconfig_help)
    parser.add_argument("--context", help="default: the kubeconfig's current context")


WORKLOADS_NAMESPACE: str = NamespacesConfig.model_fields["workloads"].default
"""The stack config's default workloads namespace: where the smoke Jobs and the claim template live."""


def add_namespace_option(parser: argparse.ArgumentParser, holds: str) -> None:
    """--namespace, defaulting to the stack config's workloads namespace; `holds` says what is read there."""
    parser.add_argument("--namespace", default=WORKLOADS_NAMESPACE, help=f"namespace of {holds}")


def default_kubeconfig() -> str:
    """$KUBECONFIG's first file, else ~/.kube/config: where kubectl looks."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return first or str(Path.home() / ".kube" / "config")


@dataclass
class Kube:
    """One cluster as one user: where it is, who we are, and raw JSON requests to it."""

    api: client.ApiClient
    kubeconfig: str
    context: str
    server: str

    @property
    def where(self) -> str:
        """`kubeconfig PATH, context C, server S`: the part of every refusal that says which cluster."""
        return f"kubeconfig {self.kubeconfig}, context {self.context}, server {self.server}"

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str | None = None,
        raw: bool = False,
    ) -> Any:
        """One API request; JSON in and out (text when `raw`). Access problems raise KubeAccessError."""
        headers = {"Accept": "text/plain, application/json, */*" if raw else "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (query or {}).items()}
        try:
            response = send(self.api, method, path, query=params, headers=headers, body=body)
        except Unreachable as error:
            raise KubeUnreachable(self._unreachable(str(error))) from None
        text = response.text
        if 200 <= response.status <= 299:
            return text if raw else (json.loads(text) if text else {})
        message = response.message
        if response.status == 401:
            msg = (
                f"the API server rejected the credentials ({self.where}): 401 Unauthorized; "
                "refresh the token or pass the administrator --kubeconfig/--context"
            )
            raise KubeAccessError(msg)
        if response.status == 403:
            msg = (
                f"permission denied ({self.where}): {message}; use the administrator --kubeconfig/--context "
                "or ask the cluster owner for that permission"
            )
            raise KubeAccessError(msg)
        raise KubeApiError(response.status, message)

    def _unreachable(self, reason: str) -> str:
        return (
            f"cannot reach the Kubernetes API ({self.where}): {reason}; check that the cluster is running "
            "and pass the right --kubeconfig/--context"
        )

    def get(self, path: str, **query: str | int | bool) -> dict[str, Any]:
        """One object (or a list object) as JSON."""
        found: dict[str, Any] = self.request("GET", path, query=query)
        return found

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        try:
            return self.get(path)
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    def items(self, path: str, **query: str | int | bool) -> list[dict[str, Any]]:
        """The items of a list, a page of `LIST_PAGE` at a time; a 404 (API or namespace absent) is an empty list.

        Paged unless the caller sets its own `limit`: no one response holds a whole large collection.
        """
        paged = "limit" not in query
        try:
            document = self.get(path, **({"limit": LIST_PAGE} if paged else {}), **query)
        except KubeApiError as error:
            if error.status == 404:
                return []
            raise
        items: list[dict[str, Any]] = list(document.get("items") or [])
        while paged and (token := str((document.get("metadata") or {}).get("continue") or "")):
            document = self.get(path, limit=LIST_PAGE, **query, **{"continue": token})
            items += document.get("items") or []
        return items

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST an object to a collection."""
        created: dict[str, Any] = self.request("POST", path, body=dict(body))
        return created

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386): lists are replaced, maps are merged, null removes a key."""
        patched: dict[str, Any] = self.request(
            "PATCH", path, body=dict(body), content_type="application/merge-patch+json"
        )
        return patched

    def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT an object whole; its metadata.resourceVersion makes it a write only over what was read (409 else)."""
        replaced: dict[str, Any] = self.request("PUT", path, body=dict(body))
        return replaced

    def delete(self, path: str, *, resource_version: str | None = None, **query: str | int | bool) -> bool:
        """Delete an object (only at `resource_version` when given); False when it was already gone."""
        body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
        try:
            self.request("DELETE", path, query=query, body=body)
        except KubeApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    def watch(self, path: str, **query: str | int | bool) -> Iterator[dict[str, Any]]:
        """The events of one watch of `path` (`type`, `object`); an ERROR event for a refused watch."""
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items()}
        try:
            yield from watch(self.api, path, params)
        except Unreachable as error:
            raise KubeUnreachable(self._unreachable(str(error))) from None

    def text(self, path: str, **query: str | int | bool) -> str:
        """A plain-text subresource such as a pod log."""
        found: str = self.request("GET", path, query=query, raw=True)
        return found


def connect(kubeconfig: str | None = None, context: str | None = None) -> Kube:
    """A client for the kubeconfig's context; a missing or unusable kubeconfig is a KubeAccessError."""
    path = kubeconfig or default_kubeconfig()
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and not Path(path).is_file():
        local = running_kubeconfig(local_state_dir())
        if local is not None:
            print(
                f"using the local default's cluster ({local}, from `eks-hybrid-gpu local up`): no --kubeconfig, "
                f"$KUBECONFIG or {path}",
                file=sys.stderr,
            )
            path = str(local)
    if not Path(path).is_file():
        msg = (
            f"kubeconfig {path} {missing_file(path)}; pass --kubeconfig PATH (and --context) of the cluster to inspect"
        )
        raise KubeAccessError(msg)
    chosen = chosen_context(path, context)
    try:
        api = config.new_client_from_config(config_file=path, context=context)  # type: ignore[no-untyped-call]
    except _UNUSABLE as error:
        raise KubeAccessError(_unusable(path, error)) from None
    return Kube(api, path, chosen, api.configuration.host)


_UNUSABLE = (ConfigException, yaml.YAMLError, OSError, ValueError, TypeError, KeyError)
"""What the kubernetes client's kubeconfig loader raises on a file it cannot use (it parses with PyYAML)."""


def _unusable(path: str, error: Exception) -> str:
    return f"kubeconfig {path} cannot be used ({' '.join(str(error).split())}); pass a valid --kubeconfig/--context"


def chosen_context(path: str, context: str | None) -> str:
    """The context `context` names in the kubeconfig at `path`, else its current one; KubeAccessError if it has none."""
    try:
        contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        names = sorted(c["name"] for c in contexts or [])
        current = (active or {}).get("name", "")
    except _UNUSABLE as error:
        raise KubeAccessError(_unusable(path, error)) from None
    if context is not None and context not in names:
        msg = f"kubeconfig {path} has no context {context}; pick one of: {', '.join(names) or 'none'}"
        raise KubeAccessError(msg)
    return context or current


def run_reporting(
    command: str,
    body: Callable[[], int],
    refusals: tuple[type[Exception], ...] = (),
    answers: tuple[type[Exception], ...] = (KubeApiError,),
) -> int:
    """Run a day-2 command's `body`, turning what stopped it into one line on stderr and the exit code.

    Not reaching the cluster (KubeAccessError) exits ACCESS_EXIT_CODE; one of the command's own `refusals`, whose
    message says what to do, exits 1 with it; an API answer the command did not expect (`answers`) exits 1.
    """
    try:
        return body()
    except KubeAccessError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return ACCESS_EXIT_CODE
    except NameRefused as error:
        print(f"{command}: {error}", file=sys.stderr)
        return BAD_NAME_EXIT_CODE
    except refusals as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 1
    except answers as error:
        print(f"{command}: the API server answered {error}", file=sys.stderr)
        return 1


def segment(value: str) -> str:
    """A name as one URL path segment; NameRefused for anything that is not a Kubernetes object name.

    Every name in a path is a DNS-1123 subdomain (nodes, pods, ConfigMaps, DaemonSets, slices) or label
    (namespaces), so nothing else may become a segment: `a/b`, `..`, `.` and the empty string are refused here,
    whichever caller forgot to check first.
    """
    return quote(names.object_name(value, "the name"), safe="")
