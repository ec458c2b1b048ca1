"""Evaluate the cohort label guard's CEL on an old and a new Node, for fast unit tests of its transitions.

A small evaluator of exactly the subset `components.node_guard` writes: `has()` of a field path, `"key" in map`,
`map["key"]`, `? :`, `||`, `&&`, `==`, `!=`, `!`, parentheses, double-quoted strings with short and long unicode
escapes, `''` and `true`/`false`. Anything else is a SyntaxError, so a guard that grows past the subset fails its
unit tests until this grows with it; the real API server's verdict is `tests/integration/test_in_transit.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

_TOKEN: Final = re.compile(
    r"""(?P<space>\s+)
      |(?P<string>"(?:[^"\\]|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8})*"|'')
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<op>&&|\|\||==|!=|!|\?|:|\(|\)|\[|\]|\.)""",
    re.VERBOSE,
)


class _Missing:
    """A field that is not there: only `has()` may see it; anything else reading it is a CEL error."""


MISSING: Final = _Missing()


class CelError:
    """A CEL runtime error as a value: `false && error` is false and `true || error` true, as in CEL; an error
    that reaches the verdict raises (the API server, with failurePolicy Fail, would refuse the update)."""

    def __init__(self, why: str) -> None:
        self.why = why


def _tokens(text: str) -> list[tuple[str, str]]:
    found, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            msg = f"not in the guard's CEL subset at {at}: {text[at : at + 20]!r}"
            raise SyntaxError(msg)
        kind = match.lastgroup or ""
        if kind != "space":
            found.append((kind, match.group()))
        at = match.end()
    return found


def _unquote(literal: str) -> str:
    escape = r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})"
    return re.sub(escape, lambda m: chr(int(m.group(1) or m.group(2), 16)), literal[1:-1])


class _Evaluator:
    def __init__(self, text: str, variables: Mapping[str, Any]) -> None:
        self.tokens, self.at, self.variables = _tokens(text), 0, variables

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            msg = "unexpected end of the expression"
            raise SyntaxError(msg)
        token = self.tokens[self.at]
        if expected is not None and token[1] != expected:
            msg = f"expected {expected!r}, found {token[1]!r}"
            raise SyntaxError(msg)
        self.at += 1
        return token

    def run(self) -> bool:
        value = self.ternary()
        if self.peek() is not None:
            msg = f"left over: {self.peek()!r}"
            raise SyntaxError(msg)
        if isinstance(value, CelError):
            msg = f"the expression fails: {value.why}"
            raise TypeError(msg)
        if not isinstance(value, bool):
            msg = f"the expression is {value!r}, not a bool"
            raise TypeError(msg)
        return value

    def ternary(self) -> Any:
        condition = self.disjunction()
        if self.peek() != "?":
            return condition
        self.take("?")
        yes = self.ternary()
        self.take(":")
        no = self.ternary()
        condition = _bool(condition)
        if isinstance(condition, CelError):
            return condition
        return yes if condition else no

    def disjunction(self) -> Any:
        value = self.conjunction()
        while self.peek() == "||":
            self.take()
            value = _logic(value, self.conjunction(), absorbing=True)
        return value

    def conjunction(self) -> Any:
        value = self.relation()
        while self.peek() == "&&":
            self.take()
            value = _logic(value, self.relation(), absorbing=False)
        return value

    def relation(self) -> Any:
        left = self.unary()
        op = self.peek()
        if op not in ("==", "!=", "in"):
            return left
        self.take()
        right = self.unary()
        for value in (left, right):
            if isinstance(value, CelError):
                return value
        if op == "in":
            return left in right if isinstance(right, Mapping) else CelError(f"`in` needs a map, got {right!r}")
        if type(left) is not type(right):
            return CelError(f"no such overload: {left!r} {op} {right!r}")
        return (left == right) is (op == "==")

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            value = _bool(self.unary())
            return value if isinstance(value, CelError) else not value
        return self.postfix(self.primary())

    def postfix(self, value: Any) -> Any:
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                value = _field(value, self.take()[1])
            else:
                key = self.ternary()
                self.take("]")
                if not isinstance(value, CelError):
                    value = (
                        value[key]
                        if isinstance(value, Mapping) and isinstance(key, str) and key in value
                        else CelError(f"no such key: {key!r}")
                    )
        return CelError("a field that is not there was read outside has()") if value is MISSING else value

    def primary(self) -> Any:
        kind, text = self.take()
        if text == "(":
            value = self.ternary()
            self.take(")")
            return value
        if kind == "string":
            return _unquote(text)
        if text in ("true", "false"):
            return text == "true"
        if text == "has":
            self.take("(")
            value = self.variables[self.take()[1]]
            while self.peek() == ".":
                self.take()
                value = _field(value, self.take()[1])
            self.take(")")
            return value if isinstance(value, CelError) else value is not MISSING
        if kind == "ident" and text in self.variables:
            return self.variables[text]
        msg = f"not in the guard's CEL subset: {text!r}"
        raise SyntaxError(msg)


def _field(value: Any, name: str) -> Any:
    if isinstance(value, CelError):
        return value
    if value is MISSING:
        return CelError(f"field {name} of a field that is not there")
    if not isinstance(value, Mapping):
        return CelError(f"no field {name} on {value!r}")
    return value.get(name, MISSING)


def _bool(value: Any) -> bool | CelError:
    if isinstance(value, bool | CelError):
        return value
    return CelError(f"{value!r} is not a bool")


def _logic(left: Any, right: Any, *, absorbing: bool) -> bool | CelError:
    """CEL's commutative `||` (absorbing True) and `&&` (absorbing False): the absorbing value wins over an error."""
    a, b = _bool(left), _bool(right)
    if a is absorbing or b is absorbing:
        return absorbing
    return a if isinstance(a, CelError) else b


def evaluate(expression: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The guard's verdict on an UPDATE from Node `old` to Node `new` (True: admitted)."""
    return _Evaluator(expression, {"oldObject": old, "object": new}).run()
