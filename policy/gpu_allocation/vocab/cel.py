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

Every attribute and capacity it names must be one the driver publishes on a full GPU (the class selects
`type == "gpu"`): on a real node a missing attribute is a CEL error and the device is never selected, so
`device.attributes["gpu.nvidia.com"].index == 0` would quietly select nothing. The table is
:mod:`.dra_attributes`, held equal to the ResourceSlice the real driver published. `semver("...")` and
`quantity("...")` literals must parse as the API server parses them (`semver("580.159.04")` does not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from . import versioning
from .dra_attributes import (
    BOOL,
    DRIVER_DOMAIN,
    FULL_GPU_ATTRIBUTES,
    FULL_GPU_CAPACITY,
    INT,
    MIG_ATTRIBUTES,
    STRING,
    VERSION,
    cel_reference,
)
from .grammar import is_quantity

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

DOUBLE: Final = "double"
QUANTITY: Final = "quantity"
"""CEL types of the fragment's values beside the attribute types (bool, int, string, version)."""

DRIVER_ATTRIBUTES: Final[dict[str, dict[str, str]]] = FULL_GPU_ATTRIBUTES
"""Attribute types of a full GPU as the NVIDIA DRA driver publishes it, by domain (its deviceinfo: StringValue,
VersionValue); every capacity is a quantity."""

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


class CelAttributeError(CelFragmentError):
    """The fragment parses but names an attribute, capacity or literal no real node would match."""


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
        if left != BOOL and start is not None:
            msg = (
                f"'{start.text}' at position {start.at} is {_a(left)}, not a condition: the API server refuses a "
                "selector that is not boolean; compare it with ==, <, >, ... or a method"
            )
            raise CelFragmentError(msg)

    @staticmethod
    def relation(token: _Token, left: str, right: str, right_start: _Token | None) -> None:
        """Refuse a comparison the CEL compiler has no overload for."""
        numbers = {INT, DOUBLE}
        if token.text in _ORDERED:
            if left in {VERSION, QUANTITY} or right in {VERSION, QUANTITY}:
                kind = left if left in {VERSION, QUANTITY} else right
                literal = 'semver("MAJOR.MINOR.PATCH")' if kind == VERSION else 'quantity("40Gi")'
                msg = (
                    f"'{token.text}' at position {token.at} orders {_a(kind)}: CEL has no such overload; use "
                    f"compareTo({literal}) {token.text} 0, isGreaterThan(...) or isLessThan(...)"
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
            fix = "compare values of one type"
            if VERSION in {left, right}:
                fix = 'a version compares through compareTo(semver("MAJOR.MINOR.PATCH")) == 0'
            msg = f"'{token.text}' at position {token.at} compares {_a(left)} with {_a(right)}{where}: {fix}"
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
            literal = self.take(kind="string")
            self.take(")")
            _check_literal(token, literal.text.strip('"'))
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
                _check_capacity(token, domain, name)
                kind = QUANTITY
            else:
                kind = _attribute_type(token, domain, name)
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
            if kind not in receivers:
                msg = (
                    f"method {method.text} at position {method.at} is called on {_a(kind)}: it takes a "
                    f"{' or '.join(sorted(receivers))}"
                )
                raise CelFragmentError(msg)
            self.take("(")
            argument = self.value()
            if argument != kind:
                msg = f"method {method.text} at position {method.at} compares {_a(kind)} with {_a(argument)}"
                raise CelFragmentError(msg)
            self.take(")")
            return result
        return kind


def _known_attributes() -> str:
    """Every attribute a full GPU carries, as a selector names it."""
    return ", ".join(
        cel_reference(domain, name) for domain, names in DRIVER_ATTRIBUTES.items() for name in sorted(names)
    )


def _attribute_type(at: _Token, domain: str, name: str) -> str:
    """The type of a published attribute; refuse one the driver does not publish on a full GPU, naming the real."""
    kind = DRIVER_ATTRIBUTES.get(domain, {}).get(name)
    if kind is not None:
        return kind
    shown = cel_reference(domain, name)
    hint = ""
    elsewhere = [d for d, names in DRIVER_ATTRIBUTES.items() if name in names and d != domain]
    if elsewhere:
        hint = f" (it is {cel_reference(elsewhere[0], name)})"
    elif name in MIG_ATTRIBUTES.get(domain, {}):
        hint = ' (only MIG devices carry it, and hybrid-large-gpu selects type == "gpu")'
    msg = (
        f"{shown} at position {at.at} is not an attribute the NVIDIA DRA driver publishes on a full GPU{hint}; a "
        "missing attribute is a CEL error on a real node and the device is never selected. It publishes "
        f"{_known_attributes()}"
    )
    raise CelAttributeError(msg)


def _check_capacity(at: _Token, domain: str, name: str) -> None:
    """Refuse a capacity the driver does not publish on a full GPU."""
    if domain == DRIVER_DOMAIN and name in FULL_GPU_CAPACITY:
        return
    known = ", ".join(f'device.capacity["{DRIVER_DOMAIN}"].{c}' for c in FULL_GPU_CAPACITY)
    msg = (
        f'device.capacity["{domain}"].{name} at position {at.at} is not a capacity the NVIDIA DRA driver publishes on '
        f"a full GPU; it publishes {known}"
    )
    raise CelAttributeError(msg)


def _check_literal(constructor: _Token, text: str) -> None:
    """A semver()/quantity() literal the API server cannot parse fails at scheduling time: refuse it now."""
    # Kubernetes' CEL semver() is blang/semver's strict Parse (k8s.io/apiserver/pkg/cel/library/semverlib.go):
    # versioning.parse_cel_semver reads what it reads, pre-releases included.
    if constructor.text == "semver" and versioning.parse_cel_semver(text) is None:
        msg = (
            f'semver("{text}") at position {constructor.at} is not a version Kubernetes\' CEL parses: write '
            "MAJOR.MINOR.PATCH without leading zeros or a v (a -PRERELEASE and +BUILD may follow), as the driver "
            "publishes versions (NVML's driver 580.159.04 is "
            'semver("580.159.4"), compute capability 9.0 is semver("9.0.0"))'
        )
        raise CelAttributeError(msg)
    if constructor.text == "quantity" and not is_quantity(text):
        msg = f'quantity("{text}") at position {constructor.at} is not a Kubernetes quantity; write it like 40Gi'
        raise CelAttributeError(msg)


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


# --------------------------------------------------------------------------- reading a MIG profile out of a selector

_QUOTED: Final = r"""(?:"[^"\\]*"|'[^'\\]*')"""
_PROFILE_ATTRIBUTE: Final = (
    r"device\s*\.\s*attributes\s*\[\s*(?:\"" + re.escape(DRIVER_DOMAIN) + r"\"|'" + re.escape(DRIVER_DOMAIN) + r"')"
    r"\s*\]\s*\.\s*profile\b"
)
_PROFILE_EQUALS: Final = re.compile(
    rf"{_PROFILE_ATTRIBUTE}\s*==\s*(?P<right>{_QUOTED})|(?P<left>{_QUOTED})\s*==\s*{_PROFILE_ATTRIBUTE}", re.ASCII
)
_PROFILE_WORD: Final = re.compile(r"\bprofile\b", re.ASCII)
_MIG_TYPE: Final = re.compile(
    r"device\s*\.\s*attributes\s*\[\s*(?:\"" + re.escape(DRIVER_DOMAIN) + r"\"|'" + re.escape(DRIVER_DOMAIN) + r"')"
    r"\s*\]\s*\.\s*type\s*==\s*(?:\"mig\"|'mig')",
    re.ASCII,
)


def selects_mig(expression: str) -> bool:
    """The selector requires the driver's ``type`` attribute to be ``mig`` (a MIG instance, ``mig.go``)."""
    return _MIG_TYPE.search(expression) is not None


def profile_literals(expression: str) -> tuple[frozenset[str], bool] | None:
    """The MIG profiles a CEL selector names literally, read as written: None when it does not mention ``profile``.

    Returns ``(profiles, readable)``: every ``device.attributes["gpu.nvidia.com"].profile == "<profile>"`` (either
    quote, either side) gives one profile; ``readable`` is false when ``profile`` appears in any other form (``!=``,
    ``in``, a method, a variable), which this reader does not evaluate, so the caller cannot judge (fail closed).
    """
    mentions = len(_PROFILE_WORD.findall(expression))
    if mentions == 0:
        return None
    found = [(m.group("right") or m.group("left"))[1:-1] for m in _PROFILE_EQUALS.finditer(expression)]
    return frozenset(found), len(found) == mentions
