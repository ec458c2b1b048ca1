"""Asking before a command changes a cluster through `pulumi up`, as `pulumi up` itself asks.

The plan is printed first; then one question on the terminal. `--yes` answers it beforehand, `--dry-run` never
reaches it. With no terminal to ask on (a script, CI, a pipe into stdin) and no `--yes`, the command refuses in one
line before it reads anything, exit 2 as a usage error: a run nobody can answer must not wait, and must not go on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Final, TextIO

NO_TERMINAL_EXIT_CODE: Final = 2
"""Exit code when the command must ask and cannot: a usage error, like argparse's own."""
DECLINED_EXIT_CODE: Final = 1
"""Exit code when the person at the terminal answers no: nothing was changed."""

Confirm = Callable[[str], bool]
"""Asks the question (what is about to change); True to go on."""


def add_yes_option(parser: argparse.ArgumentParser, what: str) -> None:
    """-y/--yes: the same on every command that asks before it changes a cluster."""
    parser.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help=f"{what} without asking first (needed when stdin is not a terminal)",
    )


def refusal(
    command: str,
    *,
    yes: bool,
    dry_run: bool,
    stdin: TextIO | None = None,
    plan_only: str = "--dry-run to print the plan and change nothing",
) -> str | None:
    """The one line a command that must ask prints when nobody can answer (stdin no terminal), else None.

    `plan_only`: how to see the plan without changing anything, for the line's alternative.
    """
    if yes or dry_run:
        return None
    stream = stdin if stdin is not None else sys.stdin
    if stream is not None and stream.isatty():
        return None
    return (
        f"{command}: this run changes the cluster and asks first, but stdin is not a terminal: pass --yes to run it "
        f"without asking (or {plan_only})"
    )


def asker(stdin: TextIO | None = None, out: TextIO | None = None) -> Confirm:
    """A question on the terminal: `yes`/`y` goes on; anything else, or end of input, does not.

    The question goes to stderr, so a document on stdout (`-o json`) stays one document.
    """

    def confirm(question: str) -> bool:
        stream = out if out is not None else sys.stderr
        print(f"{question} [y/N] ", end="", file=stream, flush=True)
        answer = (stdin if stdin is not None else sys.stdin).readline()
        if not answer:
            print(file=stream)
        return answer.strip().lower() in ("y", "yes")

    return confirm
