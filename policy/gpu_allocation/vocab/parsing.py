"""Reading what a stack carries without letting one hostile value crash a policy.

A stack policy judges every object of a stack in one call: if one object's value crashes it (deeply nested
JSON in a ledger or annotation, a ConfigMap whose data is deep YAML, a self-referencing YAML anchor), every
other violation of that policy is lost. So text is parsed here, bounded in depth and checked for cycles, and
a value that cannot be read is "cannot tell" for that object alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final

import yaml

MAX_DEPTH: Final = 64
"""Deeper than any Kubernetes manifest, chart value or device-plugin config the rules read."""
TOO_DEEP: Final = f"nests deeper than {MAX_DEPTH} levels or refers to itself, so it cannot be read"


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.values()
    elif isinstance(value, list):
        yield from value


def bounded(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Tell whether plain data nests at most ``limit`` containers deep and has no cycle (walked without recursion).

    Shared sub-trees (YAML aliases) are measured once, so a "billion laughs" document costs its size, not its
    expansion.
    """
    heights: dict[int, int] = {}
    active: set[int] = set()
    if not isinstance(value, dict | list):
        return True
    stack: list[tuple[Any, Iterator[Any], int]] = [(value, _children(value), 1)]
    active.add(id(value))
    while stack:
        node, children, height = stack[-1]
        child = next(children, _DONE)
        if child is _DONE:
            stack.pop()
            active.discard(id(node))
            heights[id(node)] = height
            if height > limit:
                return False
            if stack:
                parent, parent_children, parent_height = stack[-1]
                stack[-1] = (parent, parent_children, max(parent_height, height + 1))
            continue
        if not isinstance(child, dict | list):
            continue
        if id(child) in active:
            return False
        known = heights.get(id(child))
        if known is not None:
            stack[-1] = (node, children, max(height, known + 1))
            continue
        if len(stack) > limit:
            return False
        active.add(id(child))
        stack.append((child, _children(child), 1))
    return True


_DONE: Final = object()


def load_json(text: str) -> tuple[Any, str | None]:
    """Parse JSON: (value, None), or (None, why it cannot be read)."""
    try:
        value = json.loads(text)
    except RecursionError:
        return None, TOO_DEEP
    except ValueError as error:
        return None, f"is not valid JSON ({error})"
    return (value, None) if bounded(value) else (None, TOO_DEEP)


def load_yaml(text: str) -> tuple[Any, str | None]:
    """Parse one YAML document safely: (value, None), or (None, why it cannot be read)."""
    try:
        value = yaml.safe_load(text)
    except RecursionError:
        return None, TOO_DEEP
    except yaml.YAMLError as error:
        return None, f"is not valid YAML ({error})"
    return (value, None) if bounded(value) else (None, TOO_DEEP)


def contained(check: Callable[[], None]) -> bool:
    """Run one independent check of a policy; a value too deep to walk stops that check alone.

    Returns False when the check could not finish (the caller may say so), True otherwise.
    """
    try:
        check()
    except RecursionError:
        return False
    return True
