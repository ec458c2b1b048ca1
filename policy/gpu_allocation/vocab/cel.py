"""A strict checker for the CEL fragment a stack may AND into a DRA DeviceClass (`dra.extraSelector`).

The program renders `<class expression> && (<fragment>)`. That only narrows the class if the fragment is one
complete expression on its own: `true) || (true` would close the parenthesis and widen the class to every
device. So the fragment must parse, by itself, in this small subset of CEL: device attribute, capacity and
driver comparisons and predicates joined by `&&`, `||` and `!`, with balanced parentheses. No comments, no
macros, no arbitrary functions, ASCII only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_LENGTH: Final = 1024
MAX_DEPTH: Final = 32

_TOKEN: Final = re.compile(
    r"""(?P<space>[ \t\n]+)
      |(?P<string>"[A-Za-z0-9 ._/:+=-]{0,256}")
      |(?P<number>[0-9]{1,19}(?:\.[0-9]{1,19})?)
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]{0,63})
      |(?P<op>&&|\|\||==|!=|<=|>=|<|>|!|\(|\)|\[|\]|\.|,)""",
    re.ASCII | re.VERBOSE,
)
_METHODS: Final = frozenset({"isGreaterThan", "isLessThan", "compareTo", "startsWith", "endsWith", "contains"})
_CONSTRUCTORS: Final = frozenset({"quantity", "semver"})
_RELATIONS: Final = frozenset({"==", "!=", "<", "<=", ">", ">="})


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


class CelFragmentError(ValueError):
    """The fragment is not one expression of the allowed subset; the message says why."""


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None and text[at] == '"':
            msg = (
                f"the string at position {at + 1} is not closed, or holds more than 256 characters or characters "
                "other than letters, digits, spaces and ._/:+=-"
            )
            raise CelFragmentError(msg)
        if match is None:
            char = text[at]
            shown = repr(char) if char.isprintable() and char.isascii() else f"U+{ord(char):04X}"
            msg = f"character {shown} at position {at + 1} is not allowed in the fragment"
            raise CelFragmentError(msg)
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(_Token(kind, match.group(), at + 1))
        at = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, text: str | None = None, kind: str | None = None) -> _Token:
        token = self.peek()
        if token is None:
            wanted = f"'{text}'" if text else (kind or "more")
            msg = f"ends early: expected {wanted}"
            raise CelFragmentError(msg)
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            wanted = f"'{text}'" if text else f"a {kind}"
            msg = f"expected {wanted} at position {token.at}, found '{token.text}'"
            raise CelFragmentError(msg)
        self.pos += 1
        return token

    def expression(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            msg = f"nests deeper than {MAX_DEPTH} levels"
            raise CelFragmentError(msg)
        self.conjunction()
        while (token := self.peek()) is not None and token.text == "||":
            self.pos += 1
            self.conjunction()
        self.depth -= 1

    def conjunction(self) -> None:
        self.unary()
        while (token := self.peek()) is not None and token.text == "&&":
            self.pos += 1
            self.unary()

    def unary(self) -> None:
        token = self.peek()
        if token is not None and token.text == "!":
            self.pos += 1
            self.unary()
            return
        if token is not None and token.text == "(":
            self.pos += 1
            self.expression()
            self.take(")")
            return
        self.predicate()

    def predicate(self) -> None:
        start = self.peek()
        boolean = self.value()
        token = self.peek()
        if token is not None and token.text in _RELATIONS:
            self.pos += 1
            self.value()
            return
        if not boolean and start is not None:
            msg = f"'{start.text}' at position {start.at} is a value, not a condition: compare it with ==, <, >, ..."
            raise CelFragmentError(msg)

    def value(self) -> bool:
        """One operand; True when it can stand alone as a condition (a device path or true/false)."""
        token = self.take()
        if token.kind in {"string", "number"}:
            return False
        if token.kind != "ident":
            msg = f"expected a device attribute, capacity or literal at position {token.at}, found '{token.text}'"
            raise CelFragmentError(msg)
        if token.text in {"true", "false"}:
            return True
        if token.text in _CONSTRUCTORS:
            self.take("(")
            self.take(kind="string")
            self.take(")")
            return False
        if token.text != "device":
            msg = (
                f"'{token.text}' at position {token.at} is not allowed: use device.driver, "
                'device.attributes["<domain>"].<name>, device.capacity["<domain>"].<name>, quantity("...") or '
                'semver("...")'
            )
            raise CelFragmentError(msg)
        self.take(".")
        field = self.take(kind="ident")
        if field.text in {"attributes", "capacity"}:
            self.take("[")
            self.take(kind="string")
            self.take("]")
            self.take(".")
            self.take(kind="ident")
        elif field.text != "driver":
            msg = (
                f"device.{field.text} at position {field.at} is not a device field: use driver, attributes or capacity"
            )
            raise CelFragmentError(msg)
        token_after = self.peek()
        if token_after is not None and token_after.text == ".":
            self.pos += 1
            method = self.take(kind="ident")
            if method.text not in _METHODS:
                allowed = ", ".join(sorted(_METHODS))
                msg = f"method {method.text} at position {method.at} is not allowed: use one of {allowed}"
                raise CelFragmentError(msg)
            self.take("(")
            self.value()
            self.take(")")
        return True


def check_fragment(text: str) -> None:
    """Raise CelFragmentError unless `text` is one complete expression of the allowed subset."""
    if not text.strip():
        msg = "is empty: remove it or write a condition"
        raise CelFragmentError(msg)
    if len(text) > MAX_LENGTH:
        msg = f"is {len(text)} characters long; the limit is {MAX_LENGTH}"
        raise CelFragmentError(msg)
    parser = _Parser(_tokens(text))
    parser.expression()
    rest = parser.peek()
    if rest is not None:
        if rest.text == ")":
            msg = (
                f"the ')' at position {rest.at} closes a parenthesis the fragment did not open, so it would "
                "escape the class's own condition"
            )
        else:
            msg = f"'{rest.text}' at position {rest.at} follows a complete expression"
        raise CelFragmentError(msg)


def fragment_problem(text: str) -> str | None:
    """Why `text` is refused, or None when it is one allowed expression."""
    try:
        check_fragment(text)
    except CelFragmentError as error:
        return str(error)
    return None
