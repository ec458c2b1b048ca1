"""A finding against the stack config: where it is (a config path) and what to do, as one line.

The config's own validation (`components.validation`) and the cluster layer's judgments of the live cluster
(`cluster.judge`) report the same kind of thing — this setting, against this cluster, cannot be applied; do this —
so they share one record and one way to quote a value, and `components.refusals` turns them into the refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from policy.gpu_allocation.vocab.labels import PROJECT

SHOWN_MAX: Final = 64


def show(value: object) -> str:
    """A value as a refusal quotes it: one line, control and non-ASCII characters escaped, long text cut.

    A hostile value must not break the message's one-problem-per-line shape or flood it.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int) and abs(value) >= 10**SHOWN_MAX:
        return "a number too long to show"  # str() of a huge int is slow, or refused past 4300 digits
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if not isinstance(value, str):
        return f"a {type(value).__name__}"
    if len(value) <= SHOWN_MAX:
        return _quoted(value)
    # Head and tail: a stray character at the end (a newline after a digest) stays visible.
    return f"{_quoted(value[:40])}...{_quoted(value[-20:])} ({len(value)} characters)"


def _quoted(text: str) -> str:
    return f"'{text}'" if text.isascii() and text.isprintable() and "'" not in text else ascii(text)


@dataclass(frozen=True)
class Problem:
    """One invalid setting: where it is and what to do about it."""

    path: str
    message: str
    kind: str = field(default="", compare=False)
    """Problems of the same kind are capped together; empty: derived from the path and the message's words."""

    def __str__(self) -> str:
        return f"{PROJECT}:{self.path}: {self.message}"

    def kind_key(self) -> str:
        """What makes two problems 'of the same kind'."""
        if self.kind:
            return self.kind
        words = re.sub(r"'[^']*'|\{[^}]*\}|\[[0-9]+\]|[0-9]+", "_", self.message)
        return re.sub(r"\[[0-9]+\]", "[]", self.path) + "|" + words
