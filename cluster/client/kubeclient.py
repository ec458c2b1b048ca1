"""The one door to a Kubernetes API server: JSON requests, paging, watches and one error map, for every reader.

The program's preflight and every day-2 command read and write objects as plain JSON (the shape `kubectl get -o json`
prints and the GPU integration guide's `jq` checks read), so this wraps the Kubernetes client's transport
(`cluster.client.kube_http`) instead of its typed models. Every way of not getting an answer becomes an exception of
`cluster.client.errors` whose message names the kubeconfig, the context and the server, and says what to do in the
caller's words (`cluster.client.kubeconfig.Hints`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kubernetes import client

from cluster.client import names
from cluster.client.errors import (
    GONE,
    UNAVAILABLE_STATUSES,
    KubeAccessError,
    KubeApiError,
    KubeNotAnswer,
    KubeUnreachable,
)
from cluster.client.kube_http import (
    GO_NOT_FOUND,
    REQUEST_TIMEOUT,
    NotEvent,
    Response,
    TimedOut,
    TooLarge,
    Unreachable,
    json_object,
    preview,
    proxies_in_force,
    request_timeout,
    send,
    sent_once,
    transport,
    watch,
)
from cluster.client.kubeconfig import Hints, Source, open_client
from cluster.client.slowness import SlowNotices, retry_after_seconds

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
DAEMONSETS = "/apis/apps/v1/daemonsets"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RUNTIME_CLASSES = "/apis/node.k8s.io/v1/runtimeclasses"
"""The cluster-wide lists the readers read."""
LIST_PAGE = 500
"""Items per page of `Kube.items`: what kubectl asks for."""

__all__ = ["KubeAccessError", "KubeApiError", "KubeNotAnswer", "KubeUnreachable"]


@dataclass
class Kube:
    """One cluster as one user: where it is, who we are, and raw JSON requests to it."""

    api: client.ApiClient
    kubeconfig: str
    context: str
    server: str
    source: Source | None = field(default=None, compare=False)
    """How refusals name the kubeconfig and what they tell the person; None: the day-2 commands' words."""
    timeout: tuple[float, float | None] = field(default=REQUEST_TIMEOUT, compare=False)
    """Connect and read timeouts of each request."""
    notices: SlowNotices | None = field(default=None, compare=False)
    """Told of every request, to say while one stays unanswered (`cluster.client.slowness`); None: silence."""

    def own_connection(self, timeout: tuple[float, float | None], *, resend: bool = True) -> Kube:
        """The same cluster and user through a connection pool of its own, with its own request deadline.

        What must not wait behind the other requests of a run (a Lease's renewal behind a slow list, a throttled
        read, a watch) goes through this. Without `resend`, a request the server dropped unanswered is not sent
        again on a new connection (urllib3 sends an idempotent one up to three times more, each with the whole
        deadline): for a caller that tries again itself, with a fresh body (a renewal and its renewTime).
        """
        api = client.ApiClient(configuration=self.api.configuration) if resend else sent_once(self.api)
        return dataclasses.replace(self, api=api, timeout=timeout)

    @property
    def hints(self) -> Hints:
        """The fixes this client's refusals name."""
        return self.source.hints if self.source is not None else Hints()

    @property
    def where(self) -> str:
        """`kubeconfig PATH, context C, server S`: the part of every refusal that says which cluster."""
        named = self.source.name if self.source is not None else f"kubeconfig {self.kubeconfig}"
        return f"{named}, context {self.context or '(none)'}, server {self.server}"

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str | None = None,
        raw: bool = False,
        what: str = "",
    ) -> Any:
        """One API request; JSON in and out (text when `raw`). Access problems raise KubeAccessError.

        `what` (`nodes`, `ConfigMap NS/NAME`) names the object in a refusal of permission.
        """
        headers = {"Accept": "text/plain, application/json, */*" if raw else "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (query or {}).items()}
        request = f"{method} {path}"
        notice = None if self.notices is None else self.notices.started(request, self.timeout[1])
        try:
            response = send(self.api, method, path, query=params, headers=headers, body=body, timeout=self.timeout)
        except TimedOut as error:
            raise KubeUnreachable(self._unreachable(str(error), self.hints.timed_out), f"{method} {path}") from None
        except Unreachable as error:
            raise KubeUnreachable(self._unreachable(str(error)), f"{method} {path}") from None
        except TooLarge as error:
            msg = (
                f"not an API server answer to {method} {path} ({self.where}): {error}; {proxies_in_force(self.api)}; "
                f"check the kubeconfig's server URL and the proxy variables, and {self.hints.unreachable}"
            )
            raise KubeNotAnswer(msg, 0, f"{method} {path}") from None
        finally:
            if self.notices is not None and notice is not None:
                self.notices.ended(notice)
        if raw and 200 <= response.status <= 299:
            return response.text
        document = json_object(response)
        if response.status in UNAVAILABLE_STATUSES:
            if self.notices is not None and not _about_the_object(document):
                self.notices.refused(request, response.status, response.reason, response.retry_after)
            refusal = KubeApiError(response.status, self._unavailable(response, document), what, self.where, request)
            refusal.retry_after = retry_after_seconds(response.retry_after)
            raise refusal
        if document is None and not (response.status == 404 and response.text.strip() == GO_NOT_FOUND):
            if response.status != 204:
                raise KubeNotAnswer(self._not_an_answer(response, request), response.status, request)
            document = {}
        if 200 <= response.status <= 299:
            return document
        message = response.message
        if response.status == 401:
            msg = f"the API server rejected the credentials ({self.where}): 401 Unauthorized; {self.hints.unauthorized}"
            raise KubeAccessError(msg)
        if response.status == 403:
            verb = {"GET": "listing" if "limit" in params else "reading"}.get(method, method.lower() + "ing")
            refused = f" {verb} {what}" if what else ""
            msg = f"permission denied{refused} ({self.where}): {message}; {self.hints.forbidden}"
            raise KubeAccessError(msg)
        raise KubeApiError(response.status, message, what, self.where, request)

    def _not_an_answer(self, response: Response, request: str) -> str:
        """A body no API server sends: the request, the server, what came back, the proxy; check the URL and proxy."""
        return (
            f"not an API server answer to {request} ({self.where}): {response.status} {response.reason}, "
            f"{preview(response)}; {proxies_in_force(self.api)}; a proxy or another server answered: check the "
            f"kubeconfig's server URL and the proxy variables, and {self.hints.unreachable}"
        )

    def _unavailable(self, response: Response, document: dict[str, Any] | None) -> str:
        """A 5xx or 429: the server (or what stands in front of it) cannot answer now; waiting may cure it."""
        said = response.message if document is not None else f"not an API server answer: {preview(response)}"
        proxy = "" if document is not None else f"; {proxies_in_force(self.api)}"
        seconds = retry_after_seconds(response.retry_after)
        wait = "" if seconds is None else f" (Retry-After {seconds:g} s)"
        return (
            f"{response.reason or 'unavailable'} from server {self.server}{wait}: {said}{proxy}; the API server (or a "
            "proxy or load balancer in front of it) cannot answer now: wait and run the command again"
        )

    def _unreachable(self, reason: str, fix: str | None = None) -> str:
        return f"cannot reach the Kubernetes API ({self.where}): {reason}; {fix or self.hints.unreachable}"

    def get(self, path: str, *, what: str = "", **query: str | int | bool) -> dict[str, Any]:
        """One object (or a list object) as JSON."""
        found: dict[str, Any] = self.request("GET", path, query=query, what=what)
        return found

    def get_or_none(self, path: str, *, what: str = "", **query: str | int | bool) -> dict[str, Any] | None:
        """One object (or a list object), or None when it does not exist or is not served (404)."""
        try:
            return self.get(path, what=what, **query)
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    def pages(self, path: str, *, what: str = "", **query: str | int | bool) -> Iterator[list[dict[str, Any]]] | None:
        """A list's items a page of `LIST_PAGE` at a time (limit/continue); None when the list is not served (404).

        A list that stops being served part-way is a KubeApiError: half a list is no answer. A caller's own
        `limit` is one page, as asked. A next page answered 410 Gone (the continue token is older than the server
        keeps: the cluster changed faster than the list was read) restarts the list once from its first page,
        skipping the objects already given (by uid), as client-go's pager falls back to a fresh list; a second 410
        is a KubeApiError that says to list again.
        """
        one_page = "limit" in query
        limit: dict[str, str | int | bool] = {} if one_page else {"limit": LIST_PAGE}
        first = self.get_or_none(path, what=what, **limit, **query)
        if first is None:
            return None

        def following(document: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
            given: set[str] = set()
            restarted = False
            while True:
                page = [item for item in document.get("items") or [] if _uid(item) not in given]
                given.update(_uid(item) for item in page)
                yield page
                token = str((document.get("metadata") or {}).get("continue") or "")
                if one_page or not token:
                    return
                try:
                    document = self.get(path, what=what, **limit, **query, **{"continue": token})
                except KubeApiError as error:
                    if error.status != GONE:
                        raise
                    if restarted:
                        raise self._expired_twice(error, path, what) from None
                    restarted = True
                    document = self.get(path, what=what, **limit, **query)

        return following(first)

    def _expired_twice(self, error: KubeApiError, path: str, what: str) -> KubeApiError:
        message = (
            f"the list of {what or path} expired twice while it was read {LIST_PAGE} at a time (410 Gone: "
            f"{error.message or 'the continue token is too old'}); the cluster changes faster than the list is read: "
            "list again (run the command again)"
        )
        return KubeApiError(GONE, message, what, self.where, error.request)

    def items(self, path: str, *, what: str = "", **query: str | int | bool) -> list[dict[str, Any]]:
        """The items of a list, read a page at a time (`pages`); a 404 (API or namespace absent) is an empty list."""
        return [item for page in self.pages(path, what=what, **query) or () for item in page]

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
            raise KubeUnreachable(self._unreachable(str(error)), f"WATCH {path}") from None
        except NotEvent as error:
            msg = (
                f"not an API server answer to WATCH {path} ({self.where}): {error}; {proxies_in_force(self.api)}; a "
                f"proxy or another server answered: check the kubeconfig's server URL and the proxy variables, and "
                f"{self.hints.unreachable}"
            )
            raise KubeNotAnswer(msg, 200, f"WATCH {path}") from None

    def text(self, path: str, **query: str | int | bool) -> str:
        """A plain-text subresource such as a pod log."""
        found: str = self.request("GET", path, query=query, raw=True)
        return found


def _about_the_object(document: dict[str, Any] | None) -> bool:
    """A Status naming causes (the Eviction API's 429 for a PodDisruptionBudget): an answer, not throttling."""
    details = (document or {}).get("details")
    return isinstance(details, dict) and bool(details.get("causes"))


def _uid(item: object) -> str:
    """An object's uid (else namespace/name): how a restarted list skips what it already gave."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(metadata, dict):
        return f"#{id(item)}"
    return str(metadata.get("uid") or f"{metadata.get('namespace')}/{metadata.get('name')}")


def open_cluster(
    source: Source, timeout_seconds: float | None = REQUEST_TIMEOUT[1], slow: Callable[[str], None] | None = None
) -> Kube:
    """A client for the source's kubeconfig and context; an unusable kubeconfig is a KubeAccessError.

    Each request waits `timeout_seconds` for its answer, its body included (None: as long as it takes, kubectl's
    `--request-timeout=0`); `slow` is told, every few seconds, of requests still unanswered (`slowness`).
    """
    api, context = open_client(source)
    api = transport(api)
    where = os.pathsep.join(source.files)
    timeout = request_timeout(timeout_seconds)
    server = str(api.configuration.host)
    notices = None if slow is None else SlowNotices(slow, server)
    return Kube(api, where, context, server, source, timeout, notices)


def segment(value: str) -> str:
    """A name as one URL path segment; NameRefused for anything that is not a Kubernetes object name.

    Every name in a path is a DNS-1123 subdomain (nodes, pods, ConfigMaps, DaemonSets, slices) or label
    (namespaces), so nothing else may become a segment: `a/b`, `..`, `.` and the empty string are refused here,
    whichever caller forgot to check first.
    """
    return quote(names.object_name(value, "the name"), safe="")
