"""The one error map of the cluster client: what happened to a request, as an exception the caller can tell apart.

Access problems (`KubeAccessError`: no usable kubeconfig, no answer, 401, 403, an answer that is no API server's)
stop a command or the preflight with one line that names the cluster and the fix; any other status is a
`KubeApiError` the caller may expect (404, 409) or report. `cannot_read` says which of them mean that the cluster
could not be read at all (the commands' "cannot read the cluster" exit code), as opposed to an answer about an
object.
"""

from __future__ import annotations

from typing import Final


class KubeAccessError(Exception):
    """The cluster could not be reached or refused the user; the message is one line that says what to do."""


class KubeUnreachable(KubeAccessError):
    """No answer at all (refused, reset, timed out): the one access problem that waiting may cure."""

    def __init__(self, message: str, request: str = "") -> None:
        super().__init__(message)
        self.request = request
        """`GET /api/v1/nodes/N`, `WATCH /api/v1/pods`: the request that got no answer; may be empty."""


class KubeNotAnswer(KubeAccessError):
    """A body that is no API server's answer (HTML, plain text, not a JSON object): a proxy or another server spoke.

    The message names the request, the server, what the body is and the proxy in force.
    """

    def __init__(self, message: str, status: int, request: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.request = request


class KubeApiError(Exception):
    """The API server answered with an error other than an access refusal (for example 404 or 409)."""

    def __init__(self, status: int, message: str, what: str = "", where: str = "", request: str = "") -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.request = request
        """`GET /api/v1/nodes/N`: the request the server refused (a retry line names it); may be empty."""
        self.what = what
        """The object or list asked for, as a refusal names it (`nodes`, `ConfigMap NS/NAME`); may be empty."""
        self.where = where
        """`kubeconfig PATH, context C, server S` of the cluster that answered."""
        self.retry_after: float | None = None
        """The seconds a 429 or 503's Retry-After asked the client to wait; None when it named none."""


UNAVAILABLE_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
"""Throttled, or the server (or the proxy or load balancer in front of it) is down, starting or overloaded."""
GONE: Final = 410
"""A list's continue token (or a watch's resourceVersion) is older than the server keeps."""


def cannot_read(error: Exception) -> bool:
    """Whether the error means the cluster could not be read at all, not that it answered about an object."""
    if isinstance(error, KubeAccessError):
        return True
    return isinstance(error, KubeApiError) and (error.status in UNAVAILABLE_STATUSES or error.status == GONE)
