"""Property plumbing: turn the SDK's proxies into plain data, with unknown values made explicit.

Policies receive resource inputs as pulumi-policy proxies: ``Mapping``/``Sequence`` wrappers that raise
``UnknownValueError`` when a value is not known during preview. Every rule first turns the proxy into plain data
with :func:`plain`, which replaces unknown values by the :data:`UNKNOWN` marker, so that a rule can decide
explicitly what an unknown value means (usually: skip that check) and never crashes. Then it reads that data with
the small accessors here (``dig``, ``as_dict``, ``show``) and the policy config with ``config_*``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
)

from ..vocab.parsing import MAX_DEPTH, TOO_DEEP
from .sdk_internals import PROXY_TYPES, once_per_request, proxy_target

# --------------------------------------------------------------------------- unknowns


class _Unknown:
    """The type of :data:`UNKNOWN`: a value not known during preview."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        """Return the one instance."""
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        """Render as in violation messages."""
        return "<unknown during preview>"


UNKNOWN: Final[_Unknown] = _Unknown()
"""Marker for a value that is not known during preview."""

_SENTINELS: Final = frozenset(
    {
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_STRING_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_OBJECT_VALUE,
    }
)


class TooDeep(RecursionError):
    """Props nest deeper than :data:`parsing.MAX_DEPTH`: the object cannot be read."""


def plain(value: Any, depth: int = 0) -> Any:
    """Copy policy props into plain dicts/lists, replacing unknowns by UNKNOWN.

    Raises :class:`TooDeep` past :data:`parsing.MAX_DEPTH` levels (deeper than any manifest or CRD schema).
    """
    if depth > MAX_DEPTH:
        raise TooDeep(TOO_DEEP)
    if type(value) in PROXY_TYPES:  # an exact type check: isinstance would take the slow ABC path for every value
        # The SDK's unknown-checking proxies wrap plain containers in which an unknown is its sentinel
        # string. Copying the wrapped container gives what the item-by-item reads below give (a read of a
        # sentinel raises UnknownValueError there, and becomes UNKNOWN), at a fraction of the cost: this
        # copy runs once per resource per policy and dominated the pack's own time (bench/README.md).
        value = proxy_target(value)
    if isinstance(value, str):
        return UNKNOWN if value in _SENTINELS else value
    if isinstance(value, dict):
        return {str(key): plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item, depth + 1) for item in value]
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key in list(value):
            try:
                item = value[key]
            except UnknownValueError:
                result[str(key)] = UNKNOWN
                continue
            result[str(key)] = plain(item, depth + 1)
        return result
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                items.append(UNKNOWN)
                continue
            items.append(plain(item, depth + 1))
        return items
    return value


@once_per_request
def readable(props: Any) -> tuple[dict[str, Any], str | None]:
    """Plain props of one object and None; ``({}, why)`` when they nest too deeply to walk (cannot tell).

    Copied once per object for all the policies of one analyzer request (the SDK hands each policy the same props
    there: :func:`.sdk_internals.share_deserialization_per_request`), so the copy is read-only: no rule writes into
    props (``tests/policy/test_real_props.py`` replays every capture with the copies frozen).
    """
    try:
        return as_dict(plain(props)), None
    except RecursionError:
        return {}, TOO_DEEP


def contains_unknown(value: Any) -> bool:
    """Tell whether plain data holds an unknown value anywhere."""
    if value is UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


# --------------------------------------------------------------------------- access


def as_dict(value: Any) -> dict[str, Any]:
    """Return ``value`` if it is a dict, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """Return ``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def dig(value: Any, *path: str | int) -> Any:
    """Follow ``path`` through dicts and lists: None if absent, UNKNOWN if unknown."""
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(key, int):
            if not isinstance(value, list) or not -len(value) <= key < len(value):
                return None
            value = value[key]
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def as_bool(value: Any) -> bool | _Unknown | None:
    """Read a Helm-style boolean: True/False, "true"/"false", None, or UNKNOWN."""
    if isinstance(value, _Unknown):
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    return None


def one_of(value: Any, options: Iterable[str]) -> bool:
    """Tell whether ``value`` is one of the strings (never hashes a non-string)."""
    return isinstance(value, str) and value in set(options)


def string_map(value: Any) -> dict[str, str] | None:
    """Return a dict of string keys and values, or None if it is not one."""
    if not isinstance(value, dict):
        return None
    if not all(isinstance(v, str) for v in value.values()):
        return None
    return dict(value)


def _integral(value: Any) -> Any:
    """Turn integral floats back into ints (the engine sends every number as a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    """Render a value as the program does: compact JSON with sorted keys."""
    return json.dumps(_integral(value), sort_keys=True, separators=(",", ":"), default=repr)


def show(value: Any) -> str:
    """Render an offending value for a message."""
    if value is UNKNOWN:
        return repr(UNKNOWN)
    if isinstance(value, str):
        return f"'{value}'"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return compact_json(value)


# --------------------------------------------------------------------------- config


def config_int(config: Mapping[str, Any], key: str, default: int) -> int:
    """Read an integer policy-config value (JSON numbers arrive as floats)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


def config_bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """Read a boolean policy-config value."""
    value = config.get(key, default)
    return value if isinstance(value, bool) else default


def string_list(default: Sequence[str], description: str) -> dict[str, Any]:
    """The config-schema property of a list of strings, read back with :func:`config_strings`."""
    return {"type": "array", "items": {"type": "string"}, "default": list(default), "description": description}


def config_strings(config: Mapping[str, Any], key: str, default: Sequence[str]) -> tuple[str, ...]:
    """Read a list-of-strings policy-config value."""
    value = config.get(key)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(str(v) for v in value)
    return tuple(default)


def config_mapping(config: Mapping[str, Any], key: str) -> dict[str, str]:
    """Read a string-to-string policy-config value."""
    value = config.get(key)
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {}
