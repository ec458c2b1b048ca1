"""A strict checker for the CEL fragment a stack may AND into a DRA DeviceClass (`dra.extraSelector`).

The program renders `<class expression> && (<fragment>)`. That only narrows the class if the fragment is one
complete expression on its own: `true) || (true` would close the parenthesis and widen the class to every
device. So the fragment must parse, by itself, in this small subset of CEL: device attribute, capacity and
driver comparisons and predicates joined by `&&`, `||` and `!`, with balanced parentheses. No comments, no
macros, no arbitrary functions, ASCII only.

And it is type-checked as the API server's CEL compiler checks it, against the types the NVIDIA DRA driver
publishes: a condition must be boolean (a bare string attribute, `device.driver` or a capacity is refused), `==`
compares values of one type, `<`/`>` order numbers or strings only (versions and quantities compare through
`compareTo`/`isGreaterThan`/`isLessThan`), and a method fits its receiver.
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
_ORDERED: Final = frozenset({"<", "<=", ">", ">="})

BOOL: Final = "bool"
INT: Final = "int"
DOUBLE: Final = "double"
STRING: Final = "string"
VERSION: Final = "version"
QUANTITY: Final = "quantity"
DYN: Final = "dyn"
"""CEL types of the fragment's values; ``dyn``: an attribute whose type the driver's table does not name."""

DRIVER_ATTRIBUTES: Final[dict[str, dict[str, str]]] = {
    "gpu.nvidia.com": {
        "type": STRING,
        "uuid": STRING,
        "parentUUID": STRING,
        "productName": STRING,
        "brand": STRING,
        "architecture": STRING,
        "profile": STRING,
        "pcieBusID": STRING,
        "addressingMode": STRING,
        "index": INT,
        "minor": INT,
        "parentIndex": INT,
        "parentMinor": INT,
        "migEnabled": BOOL,
        "cudaComputeCapability": VERSION,
        "driverVersion": VERSION,
        "cudaDriverVersion": VERSION,
    },
    "resource.kubernetes.io": {"pcieRoot": STRING, "pciBusID": STRING, "numaNode": INT},
}
"""Attribute types of the devices the NVIDIA DRA driver publishes (its deviceinfo: StringValue, IntValue,
BoolValue, VersionValue); every capacity is a quantity."""

_METHOD_TYPES: Final[dict[str, tuple[frozenset[str], str]]] = {
    "isGreaterThan": (frozenset({VERSION, QUANTITY}), BOOL),
    "isLessThan": (frozenset({VERSION, QUANTITY}), BOOL),
    "compareTo": (frozenset({VERSION, QUANTITY}), INT),
    "startsWith": (frozenset({STRING}), BOOL),
    "endsWith": (frozenset({STRING}), BOOL),
    "contains": (frozenset({STRING}), BOOL),
}
"""Receiver types and result type of each allowed method (the argument has the receiver's type)."""


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
        left = self.value()
        token = self.peek()
        if token is not None and token.text in _RELATIONS:
            self.pos += 1
            right_start = self.peek()
            right = self.value()
            self.relation(token, left, right, right_start)
            return
        if left not in {BOOL, DYN} and start is not None:
            msg = (
                f"'{start.text}' at position {start.at} is {_a(left)}, not a condition: the API server refuses a "
                "selector that is not boolean; compare it with ==, <, >, ... or a method"
            )
            raise CelFragmentError(msg)

    @staticmethod
    def relation(token: _Token, left: str, right: str, right_start: _Token | None) -> None:
        """Refuse a comparison the CEL compiler has no overload for."""
        numbers = {INT, DOUBLE}
        if DYN in {left, right}:
            return
        if token.text in _ORDERED:
            if left in {VERSION, QUANTITY} or right in {VERSION, QUANTITY}:
                kind = left if left in {VERSION, QUANTITY} else right
                msg = (
                    f"'{token.text}' at position {token.at} orders {_a(kind)}: CEL has no such overload; use "
                    f"compareTo(...) {token.text} 0, isGreaterThan(...) or isLessThan(...)"
                )
                raise CelFragmentError(msg)
            if not ((left in numbers and right in numbers) or left == right == STRING):
                msg = (
                    f"'{token.text}' at position {token.at} compares {_a(left)} with {_a(right)}: order two numbers or "
                    "two strings"
                )
                raise CelFragmentError(msg)
            return
        if left != right and not (left in numbers and right in numbers):
            where = f" ('{right_start.text}' at position {right_start.at})" if right_start is not None else ""
            msg = (
                f"'{token.text}' at position {token.at} compares {_a(left)} with {_a(right)}{where}: compare values of "
                "one type"
            )
            raise CelFragmentError(msg)

    def value(self) -> str:
        """One operand; returns its CEL type."""
        token = self.take()
        if token.kind == "string":
            return STRING
        if token.kind == "number":
            return DOUBLE if "." in token.text else INT
        if token.kind != "ident":
            msg = f"expected a device attribute, capacity or literal at position {token.at}, found '{token.text}'"
            raise CelFragmentError(msg)
        if token.text in {"true", "false"}:
            return BOOL
        if token.text in _CONSTRUCTORS:
            self.take("(")
            self.take(kind="string")
            self.take(")")
            return QUANTITY if token.text == "quantity" else VERSION
        if token.text != "device":
            msg = (
                f"'{token.text}' at position {token.at} is not allowed: use device.driver, "
                'device.attributes["<domain>"].<name>, device.capacity["<domain>"].<name>, quantity("...") or '
                'semver("...")'
            )
            raise CelFragmentError(msg)
        self.take(".")
        field = self.take(kind="ident")
        kind = STRING
        if field.text in {"attributes", "capacity"}:
            self.take("[")
            domain = self.take(kind="string").text.strip('"')
            self.take("]")
            self.take(".")
            name = self.take(kind="ident").text
            if field.text == "capacity":
                kind = QUANTITY
            else:
                kind = DRIVER_ATTRIBUTES.get(domain, {}).get(name, DYN)
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
            receivers, result = _METHOD_TYPES[method.text]
            if kind not in receivers and kind != DYN:
                msg = (
                    f"method {method.text} at position {method.at} is called on {_a(kind)}: it takes a "
                    f"{' or '.join(sorted(receivers))}"
                )
                raise CelFragmentError(msg)
            self.take("(")
            argument = self.value()
            if kind != DYN and argument not in {kind, DYN}:
                msg = f"method {method.text} at position {method.at} compares {_a(kind)} with {_a(argument)}"
                raise CelFragmentError(msg)
            self.take(")")
            return result
        return kind


def _a(kind: str) -> str:
    """``an int``, ``a string``: the type named in a message."""
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


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
