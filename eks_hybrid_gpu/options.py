"""The command-line conventions every command shares, as kubectl and pulumi users expect them.

Durations read as Go's `time.ParseDuration` reads them (`90s`, `10m`, `1h30m`; a bare number is seconds, as the
flags always took), and output formats as kubectl's `-o json|yaml|wide` (`--json` stays as the short form of
`-o json`). One home, so that no command grows its own reading of `10m`; the output option and the apiVersion/kind
envelope live in eks_hybrid_gpu.outputs, which the host check's standard-library artifact imports too.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import yaml

from cluster.findings import show
from eks_hybrid_gpu.outputs import API_VERSION, OUTPUTS, add_output_option, typed

__all__ = ["API_VERSION", "OUTPUTS", "add_output_option", "typed"]

_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION: Final = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+", re.ASCII)
_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)", re.ASCII)
_BARE_SECONDS: Final = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
MAX_DURATION_SECONDS: Final = 7 * 24 * 3600.0
"""A week: a wait longer than that is a typo, not a plan."""

USAGE_EXIT_CODE: Final = 2
"""What a command exits with when an argument cannot be used, as argparse exits on one it cannot parse."""
_REASONS: Final = {
    errno.ENOENT: "no such file",
    errno.EISDIR: "is a folder, not a file",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "too many levels of links",
    errno.ENAMETOOLONG: "the name is too long",
}
Request = TypeVar("Request")


class UsageError(Exception):
    """An argument that cannot be used (a file that is not there, not a file, not UTF-8): one line, exit 2."""


def os_reason(error: OSError) -> str:
    """Why a file could not be read, in words: `no such file`, never `[Errno 2] No such file or directory: 'x'`."""
    if error.errno in _REASONS:
        return _REASONS[error.errno]
    return os.strerror(error.errno).lower() if error.errno else "it cannot be read"


def read_text_argument(path: str, option: str, what: str) -> str:
    """The UTF-8 text of the file an option names; UsageError with one line (the option, the path, why, the fix)."""
    named = f"{option} {show(path)}"
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        msg = f"{named}: {os_reason(error)}; pass the path of {what}"
        raise UsageError(msg) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        msg = (
            f"{named} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); save it as UTF-8 "
            f"and pass the path of {what}"
        )
        raise UsageError(msg) from None


def request_of(kind: type[Request], args: argparse.Namespace) -> Request:
    """A command's frozen request dataclass from its parsed options: each field from the option of its name.

    A field whose option this parser does not define (destroy's `--chart-mirror`, `--project` before `cli.main` sets
    it) keeps the request's default.
    """
    fields = dataclasses.fields(kind)  # type: ignore[arg-type]
    return kind(**{f.name: getattr(args, f.name) for f in fields if hasattr(args, f.name)})


def duration(text: str) -> float:
    """Seconds of `90`, `90s`, `10m`, `1h30m` or `500ms`; argparse shows the error with the flag's name."""
    value = text.strip()
    if len(value) > 32 or not (_DURATION.fullmatch(value) or _BARE_SECONDS.fullmatch(value)):
        msg = f"{text[:40]!r} is not a duration: write it as 90s, 10m or 1h30m (a bare number is seconds)"
        raise argparse.ArgumentTypeError(msg)
    if _BARE_SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(value))
    if not 0 < seconds <= MAX_DURATION_SECONDS:
        msg = f"{text!r} is {seconds:g} s: give a duration above 0 and at most 168h"
        raise argparse.ArgumentTypeError(msg)
    return seconds


def add_timeout_option(parser: argparse.ArgumentParser, default_seconds: float, what: str) -> None:
    """--timeout DURATION, the same grammar on every command that waits."""
    parser.add_argument(
        "--timeout",
        type=duration,
        default=default_seconds,
        help=f"{what}, as 90s, 10m or 1h30m (default {default_seconds:g}s)",
    )


def serialized(kind: str, body: Mapping[str, Any], output: str) -> str:
    """The report of `kind` as `-o json` or `-o yaml` prints it."""
    document = typed(kind, body)
    if output == "yaml":
        return yaml.safe_dump(document, sort_keys=False, default_flow_style=False).rstrip("\n")
    return json.dumps(document, indent=2)


def emit(kind: str, body: Mapping[str, Any], output: str, table: Callable[[], str]) -> str:
    """The text a command prints: the report as JSON or YAML, else the table (the caller renders wide itself)."""
    return serialized(kind, body, output) if output in ("json", "yaml") else table()
