"""One wait for the integration tests: poll what the cluster reports until it holds, or fail naming what."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(read: Callable[[], T | None], what: str, timeout: float = 90.0, interval: float = 0.25) -> T:
    """The first truthy value `read` returns; an AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if value:
            return value
        time.sleep(interval)
    message = f"timed out after {timeout:.0f} s waiting for {what}"
    raise AssertionError(message)
