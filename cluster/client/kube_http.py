"""One JSON request to a Kubernetes API server through the official client's transport, and its one-line failures.

The preflight (`cluster.judge.live`) and the day-2 commands (`cluster.client.kubeclient`) read objects as plain JSON
(the shape `kubectl get -o json` prints), so both send requests through here; each turns the outcome into its own
refusal wording.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import urlparse, urlsplit

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import should_bypass_proxies
from urllib3.util.retry import Retry

from cluster.client.names import shown

CONNECT_SECONDS = 5.0
"""How long a connection to the API server may take to open (within the request timeout)."""
DEFAULT_REQUEST_SECONDS = 30.0
"""How long one request may wait for its answer unless the caller says otherwise (`--request-timeout`)."""
REQUEST_TIMEOUT: tuple[float, float | None] = (CONNECT_SECONDS, DEFAULT_REQUEST_SECONDS)
"""Connect and read timeouts: an unreachable server fails in seconds, not minutes."""


def request_timeout(seconds: float | None) -> tuple[float, float | None]:
    """Connect and read timeouts of a request that may take `seconds` (None: wait for its answer however long)."""
    if seconds is None:
        return (CONNECT_SECONDS, None)
    return (min(CONNECT_SECONDS, seconds), seconds)


class Unreachable(Exception):
    """No HTTP answer at all (connection refused, DNS, TLS); the message is the innermost cause, on one line."""


class TimedOut(Unreachable):
    """The connection did not open, or the server did not answer, within the request's timeout."""


class _NoSecondWait(Retry):
    """urllib3's default retries, less the retry of a timeout.

    A server that took the connection and never answered is waited for once, not four times (urllib3's default
    turned a 30 s read timeout into 122 s of silence).
    """

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        """Stop at a timeout (MaxRetryError, as urllib3 does when retries run out); else urllib3's count."""
        if error is not None and timed_out(error):
            raise urllib3.exceptions.MaxRetryError(_pool, str(url or ""), error)
        return super().increment(method, url, response, error, _pool, _stacktrace)


def loopback(host_url: str) -> bool:
    """True for `localhost` and loopback addresses: hosts kubectl (Go's proxy rules) never reaches through a proxy."""
    host = (urlparse(host_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def transport(api: client.ApiClient) -> client.ApiClient:
    """The client with kubectl's routes and this project's retries, on a connection pool made for them.

    A proxy from `HTTPS_PROXY`/`HTTP_PROXY` (the client reads them, and `NO_PROXY`) is not used for a loopback
    server, as kubectl does not; a kubeconfig's `proxy-url` always is. A timed-out request is not retried.
    """
    configuration = api.configuration
    if getattr(configuration, "_proxy_from_env", False) and loopback(str(configuration.host)):
        configuration.loopback_skipped_proxy = configuration.proxy  # for `proxies_in_force`'s words
        configuration.proxy = None
    configuration.retries = _NoSecondWait(3)  # urllib3's default, Retry(3), but for timeouts
    return client.ApiClient(configuration=configuration)


def sent_once(api: client.ApiClient) -> client.ApiClient:
    """The same cluster and credentials (and their refreshes) on a pool of its own whose requests are sent once.

    urllib3 sends an idempotent request the server dropped unanswered up to three times more, each with the whole
    deadline; a caller that tries again itself with a fresh body (a Lease renewal and its renewTime) wants none.
    """
    configuration = copy.copy(api.configuration)
    configuration.retries = Retry(0)
    return client.ApiClient(configuration=configuration)


class TooLarge(Exception):
    """An answer whose body grew past MAX_ANSWER_BYTES: read no further (the message says its status and the cap)."""


MAX_ANSWER_BYTES: Final = 256 << 20
"""The most one answer's body may hold. A page of `LIST_PAGE` objects is a few MiB and one object at most etcd's
1.5 MiB; a body past this is no API server's answer, and reading it on would exhaust memory."""


@dataclass(frozen=True)
class Response:
    """An HTTP answer: status, reason phrase, body text and its content type."""

    status: int
    reason: str
    text: str
    content_type: str = ""
    """The `Content-Type` header as sent (empty when absent)."""
    retry_after: str = ""
    """The `Retry-After` header as sent (empty when absent): how long a 429 or 503 asks the client to wait."""

    @property
    def message(self) -> str:
        """The API server's `Status.message`, or the body on one line."""
        return status_message(self.text) or self.reason


WATCH_SECONDS = 60
"""How long a watcher asks the API server to keep one watch open (`timeoutSeconds`) before it reconnects."""
WATCH_READ_TIMEOUT = WATCH_SECONDS + 15.0
"""A watch asks the server to end it after `WATCH_SECONDS`; a stream silent for longer is a stalled one."""


def _call(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
    body: Any,
    timeout: tuple[float, float | None],
) -> Any:
    """One request with the kubeconfig's credentials, its body not yet read; no answer at all raises Unreachable."""
    serialized = api.param_serialize(
        method, path, query_params=list(query), header_params=dict(headers), body=body, auth_settings=["BearerToken"]
    )
    try:
        with warnings.catch_warnings():
            if not api.configuration.verify_ssl:
                # The kubeconfig itself opts out of verification (the loopback cluster's self-signed certificate);
                # urllib3 repeating that on every request would bury the output.
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            return api.call_api(*serialized, _request_timeout=timeout)
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise (TimedOut if timed_out(error) else Unreachable)(one_line(error)) from None
    except ApiException as error:  # TLS problems surface as status 0
        raise Unreachable(one_line(error.reason)) from None


class NotEvent(Exception):
    """A line of a watch stream that is no watch event (not JSON, or no object with a type and an object)."""


WATCH_GRACE_SECONDS = 15.0
"""A watch asked to end after `timeoutSeconds` that is still open this much later is a stalled (or trickled) one."""


def watch(api: client.ApiClient, path: str, query: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """The events of one watch request, one JSON object per line as the server streams them.

    A status other than 200 comes back as one `{"type": "ERROR", "status": N, "message": ...}` event; no answer, a
    broken or stalled stream raises Unreachable (TimedOut for a stream still open WATCH_GRACE_SECONDS past the
    `timeoutSeconds` it asked for). A line that is no watch event raises NotEvent: skipping it would hide a change
    the caller waits on (fail closed). The stream ends when the server ends the watch.
    """
    query_params = [*query.items(), ("watch", "true")]
    headers = {"Accept": "application/json"}
    timeout = (REQUEST_TIMEOUT[0], WATCH_READ_TIMEOUT)
    asked = query.get("timeoutSeconds")
    limit = float(asked) + WATCH_GRACE_SECONDS if asked and asked.isdigit() else None
    response = _call(api, "GET", path, query=query_params, headers=headers, body=None, timeout=timeout)
    started = time.monotonic()
    raw = response.response
    try:
        if response.status != 200:
            text = raw.read().decode(errors="replace")
            yield {"type": "ERROR", "status": response.status, "message": status_message(text) or response.reason}
            return
        pending = b""
        for chunk in _chunks(raw, started, limit, f"the watch stream (asked to end after {asked} s)"):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if len(pending) > MAX_ANSWER_BYTES:
                msg = f"a line of the watch stream grew past {MAX_ANSWER_BYTES} bytes without ending"
                raise NotEvent(msg)
            for line in lines:
                if line.strip():
                    yield watch_event(line)
        if pending.strip():
            yield watch_event(pending)
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise (TimedOut if timed_out(error) else Unreachable)(one_line(error)) from None
    finally:
        raw.close()  # a watch left part-read (a bad line, the caller stopped) is not reused
        raw.release_conn()


def watch_event(line: bytes) -> dict[str, Any]:
    """One line of a watch stream as its event; NotEvent, saying what the line is, for anything else."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if isinstance(event, dict) and isinstance(event.get("type"), str) and isinstance(event.get("object"), dict):
        return event
    words = " ".join(line[:200].decode(errors="replace").split())
    msg = f"a line of the watch stream is no watch event (line {shown(words[:60])})"
    raise NotEvent(msg)


def _chunks(raw: Any, started: float, limit: float | None, what: str) -> Iterator[bytes]:
    """A body as it arrives, one socket read at a time (each within the read timeout), for `limit` s from `started`.

    The read timeout bounds each read, not the body: a server that sends one byte per second holds a body of a few
    kilobytes for hours. `limit` (None: none) bounds the whole body from its headers; past it TimedOut says so.
    """
    got = 0
    while True:
        if limit is not None and time.monotonic() - started > limit:
            msg = f"{what} was still arriving {limit:g} s after its headers ({got} bytes so far: sent slowly)"
            raise TimedOut(msg)
        chunk = raw.read1(1 << 16)
        if not chunk:
            return
        got += len(chunk)
        yield chunk


def send(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    timeout: tuple[float, float | None] = REQUEST_TIMEOUT,
) -> Response:
    """Send one request with the kubeconfig's credentials; any status comes back, no answer raises Unreachable."""
    headers = dict(headers or {"Accept": "application/json"})
    response = _call(api, method, path, query=list((query or {}).items()), headers=headers, body=body, timeout=timeout)
    started = time.monotonic()  # the headers are in: the body has the request timeout, as a whole
    raw = response.response
    data = bytearray()
    limit = timeout[1]
    try:
        for chunk in _chunks(raw, started, limit, "the answer's body"):
            data += chunk
            if len(data) > MAX_ANSWER_BYTES:
                msg = f"{response.status} {response.reason or ''}: the body grew past {MAX_ANSWER_BYTES} bytes"
                raise TooLarge(msg)
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raw.close()
        raise (TimedOut if timed_out(error) else Unreachable)(one_line(error)) from None
    except (TimedOut, TooLarge):
        raw.close()  # the rest of the body is not read: the connection is not reused
        raise
    text = bytes(data).decode(errors="replace")
    content_type = str(response.getheader("Content-Type") or "")
    retry_after = str(response.getheader("Retry-After") or "")
    return Response(response.status, str(response.reason or ""), text, content_type, retry_after)


def timed_out(error: BaseException) -> bool:
    """Whether a transport error is a timeout (no connection, or no answer, in time)."""
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        return timed_out(error.reason)
    if isinstance(error, urllib3.exceptions.NewConnectionError):  # urllib3 files "refused" under connect timeouts
        return False
    return isinstance(error, urllib3.exceptions.TimeoutError | TimeoutError)


def one_line(reason: object) -> str:
    """The innermost readable cause: `connection refused`, not urllib3's whole retry chain."""
    if isinstance(reason, urllib3.exceptions.MaxRetryError) and reason.reason is not None:
        reason = reason.reason
    if isinstance(reason, BaseException) and timed_out(reason):
        seconds = re.search(r"timeout=([0-9.]+)", str(reason))
        within = f" within {float(seconds.group(1)):g} s" if seconds else " in time"
        connecting = isinstance(reason, urllib3.exceptions.ConnectTimeoutError)
        return f"no connection{within}" if connecting else f"no answer{within}"
    text = " ".join(str(reason).split())
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    return found.group(1).strip().lower() if found else text[:300]


MAX_MESSAGE: Final = 1200
"""The most of a Status message a refusal quotes: an admission policy's message (ours names `move-host` near its
end, ~330 characters) must reach the person whole; a longer one is no message, it is a dump."""


def status_message(text: str) -> str:
    """`message` of a Kubernetes Status body; empty for any other body (a proxy's HTML page is no message to quote)."""
    try:
        document = json.loads(text)
    except ValueError:
        return ""
    return " ".join(str(document.get("message") or "").split())[:MAX_MESSAGE] if isinstance(document, dict) else ""


JSON_MEDIA_TYPES: Final = ("application/json",)
"""What kube-apiserver sends for JSON (`application/json`, `;stream=watch` on a watch); `+json` suffixes count too."""
GO_NOT_FOUND: Final = "404 page not found"
"""The plain-text 404 of the Go mux under kube-apiserver's non-API paths: an answer of the API server, not a proxy."""


def is_json_type(content_type: str) -> bool:
    """`application/json; charset=utf-8`, `application/merge-patch+json`: a JSON media type."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media in JSON_MEDIA_TYPES or media.endswith("+json")


def json_object(response: Response) -> dict[str, Any] | None:
    """The body as the JSON object an API server sends, or None when it is no API server answer.

    kube-apiserver answers every request under /api and /apis with a JSON object (the object, the list, or a
    Status) labelled `application/json`: an HTML page, plain text, an empty body, a JSON array or a body that does
    not parse is what a proxy, a load balancer or another server on that port sends.
    """
    if not is_json_type(response.content_type):
        return None
    try:
        document = json.loads(response.text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def preview(response: Response) -> str:
    """What the body is, for a message: its content type and its HTML title or first words, escaped and short."""
    kind = response.content_type.split(";", 1)[0].strip() or "no content type"
    if not response.text.strip():
        return f"{kind}, empty body"
    title = re.search(r"<title[^>]*>(.*?)</title>", response.text[:4096], re.IGNORECASE | re.DOTALL)
    words = " ".join((title[1] if title else response.text[:200]).split())
    return f"{kind}, body {shown(words[:60])}"


def redacted(url: str) -> str:
    """A proxy URL without its credentials or query: `http://***@proxy:3128`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(a proxy URL that does not parse)"
    auth = "***@" if parts.username or parts.password else ""
    return f"{parts.scheme}://{auth}{host}{port}" if parts.scheme else shown(url)


def proxies_in_force(api: client.ApiClient) -> str:
    """Which proxy the client sends its requests through, as a message names it (credentials redacted).

    The kubernetes client takes it from HTTPS_PROXY/HTTP_PROXY/ALL_PROXY (by the server URL's scheme) unless the
    kubeconfig's `proxy-url` names one, and skips it for the hosts in NO_PROXY: what it resolved is what is told.
    """
    configuration = api.configuration
    proxy, no_proxy = configuration.proxy, configuration.no_proxy or ""
    skipped = f"; NO_PROXY={shown(no_proxy)}" if no_proxy else ""
    skipped_for_loopback = getattr(configuration, "loopback_skipped_proxy", None)
    if not proxy and skipped_for_loopback:
        if no_proxy and should_bypass_proxies(str(configuration.host), no_proxy):
            return f"proxy {redacted(skipped_for_loopback)} bypassed for this server by NO_PROXY={shown(no_proxy)}"
        return (
            f"proxy {redacted(skipped_for_loopback)} not used for this server: a loopback address, which kubectl never "
            "reaches through a proxy"
        )
    if not proxy:
        return f"no proxy in force (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and the kubeconfig's proxy-url unset{skipped})"
    if no_proxy and should_bypass_proxies(str(configuration.host), no_proxy):
        return f"proxy {redacted(proxy)} bypassed for this server by NO_PROXY={shown(no_proxy)}"
    return f"through proxy {redacted(proxy)} (HTTPS_PROXY/HTTP_PROXY/ALL_PROXY or the kubeconfig's proxy-url{skipped})"
