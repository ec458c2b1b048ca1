"""Ctrl-C during a `pulumi up` a command runs: the engine stops cleanly, then the command exits 130 in one line.

Python's own SIGINT handling raises KeyboardInterrupt wherever the main thread is: inside the Automation API, that
abandons the `pulumi` process mid-update (its output pipes closed under it, the program's language server stopped)
and prints a reader thread's traceback. The engine itself handles SIGINT well: on the first it finishes the steps in
flight, records them in the state and releases the stack's lock, so the same command run again goes on from there.

So while an engine command runs, the first SIGINT is only noted: a Ctrl-C on the terminal reached the engine too (it
is in the command's foreground process group); a SIGINT sent to this process alone (`kill -INT PID`, no terminal) is
passed on to the engine's process once. When the engine has stopped, `EngineInterrupted` (a KeyboardInterrupt)
carries what was interrupted to `cli.main`, which prints the line to run again and exits 130. A second Ctrl-C reaches
the engine, which then stops at once, as `pulumi up` documents; a third stops this process where it is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final, TypeVar

Result = TypeVar("Result")
STOP_AT_ONCE_AFTER: Final = 2
"""SIGINTs after which this process stops where it is (the engine stops at once on its second)."""


class EngineInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped an engine command; `what` names it (`pulumi up of stack local`), for the line to run again."""

    def __init__(self, what: str, *, changes: bool = True) -> None:
        super().__init__(what)
        self.what = what
        self.changes = changes
        """False for a preview: it changes nothing, so there is nothing for the engine to record."""


def _terminal_reached_the_group() -> bool:
    """Whether this process is in the foreground of its terminal: a Ctrl-C there signals its whole group."""
    for stream in (sys.stdin, sys.stderr, sys.stdout):
        try:
            if stream is not None and stream.isatty():
                return os.tcgetpgrp(stream.fileno()) == os.getpgrp()
        except (OSError, ValueError):
            continue
    return False


def _children_in_group() -> list[int]:
    """The children of this process in its own process group: the engine, not the detached local cluster."""
    try:
        found = subprocess.run(  # noqa: S603
            ["pgrep", "-P", str(os.getpid())],  # noqa: S607
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    children = []
    for word in found.stdout.split():
        try:
            if os.getpgid(int(word)) == os.getpgrp():
                children.append(int(word))
        except (ValueError, ProcessLookupError, PermissionError):
            continue
    return children


@contextmanager
def _noted_sigint() -> Iterator[list[int]]:
    """While inside: SIGINT is counted (and passed on when no terminal sent it) instead of raised."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def noted(signum: int, _: FrameType | None) -> None:
        received.append(signum)
        if len(received) >= STOP_AT_ONCE_AFTER:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        if not _terminal_reached_the_group():
            for child in _children_in_group():
                try:
                    os.kill(child, signal.SIGINT)
                except ProcessLookupError:
                    continue

    previous = signal.signal(signal.SIGINT, noted)
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


def interruptible(what: str, run: Callable[[], Result], *, changes: bool = True) -> Result:
    """`run()` (an engine command), letting the engine stop cleanly on Ctrl-C; then EngineInterrupted naming `what`.

    The engine's own failure after a Ctrl-C (`pulumi up` exits non-zero when cancelled) is the interruption, not an
    error to report.
    """
    with _noted_sigint() as received:
        try:
            result = run()
        except Exception:
            if received:
                raise EngineInterrupted(what, changes=changes) from None
            raise
    if received:
        raise EngineInterrupted(what, changes=changes)
    return result
