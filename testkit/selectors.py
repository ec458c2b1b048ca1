"""Field and label selectors as the API server filters a list: equality terms only, what the program sends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def selected(obj: Mapping[str, Any], field_selector: str, label_selector: str) -> bool:
    """Whether the object passes both selectors, as the API server filters a list."""
    for term in filter(None, field_selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field(obj, key) == value:
                return False
        else:
            key, value = term.split("=", 1)
            if _field(obj, key) != value:
                return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, label_selector.split(",")):
        key, value = term.split("=", 1)
        if labels.get(key) != value:
            return False
    return True
