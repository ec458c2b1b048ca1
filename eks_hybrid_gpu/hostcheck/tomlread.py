"""A TOML 1.0 reader for containerd's config files, on every python3 a GPU host has (3.6 and newer).

`tomllib` arrived in Python 3.11; RHEL 8, Ubuntu 20.04/22.04, Amazon Linux 2023 and RHEL 9 ship older python3s, and
the host check runs there with the standard library alone. This reader is used on every interpreter, so a config
gets the same verdict everywhere; tests/unit/test_hostcheck_toml.py holds its answers equal to `tomllib`'s on the
same inputs (the recorded host trees, the TOML spec's own examples and generated documents), errors included.

Unlike `tomllib` it is bounded: nesting (dotted keys, table headers, inline tables and arrays) deeper than
`MAX_DEPTH` is refused with a `TomlError` rather than a RecursionError, so a hostile file is a finding.
Values are what `tomllib` returns: str, int, float, bool, datetime/date/time, list and dict.
"""

import datetime
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

if TYPE_CHECKING:
    from typing import Final

MAX_DEPTH: "Final" = 100
"""Nesting refused beyond this; containerd's deepest tables are about 8 levels down."""

Key = Tuple[str, ...]

_BARE_KEY: "Final" = re.compile(r"[A-Za-z0-9_-]+")
_WS: "Final" = " \t"
_TIME: "Final" = r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])(?:\.([0-9]+))?"
_DATETIME: "Final" = re.compile(
    r"([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"(?:[Tt ]" + _TIME + r"(?:([Zz])|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))?)?"
)
_LOCAL_TIME: "Final" = re.compile(_TIME)
_DIGITS: "Final" = r"[0-9](?:_?[0-9])*"
_NUMBER: "Final" = re.compile(
    r"0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|0o[0-7](?:_?[0-7])*|0b[01](?:_?[01])*"
    r"|[+-]?(?:inf|nan)"
    r"|[+-]?(?:0|[1-9](?:_?[0-9])*)(?:\.(?:" + _DIGITS + r"))?(?:[eE][+-]?(?:" + _DIGITS + r"))?"
)
_ESCAPES: "Final" = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class TomlError(ValueError):
    """The text is not TOML this reader accepts; the message names the line and column."""


class _Flags:
    """Which key paths a header declared and which are frozen (inline tables and arrays, values), as TOML rules."""

    def __init__(self) -> None:
        self.declared: Set[Key] = set()
        self.frozen: Set[Key] = set()
        self.pending: List[Key] = []

    def is_frozen(self, key: Key) -> bool:
        return any(key[:n] in self.frozen for n in range(1, len(key) + 1))

    def settle(self) -> None:
        """A header ends a section: tables its dotted keys made can no longer be declared or extended."""
        self.declared.update(self.pending)
        self.pending = []

    def forget_below(self, key: Key) -> None:
        """A new `[[key]]` element: what the previous element declared no longer binds."""
        size = len(key)
        self.declared = {path for path in self.declared if path[:size] != key}
        self.frozen = {path for path in self.frozen if path[:size] != key}


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.data: Dict[str, Any] = {}
        self.flags = _Flags()

    # -- positions and errors
    def fail(self, message: str, pos: Optional[int] = None) -> TomlError:
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return TomlError(f"line {line}, column {column}: {message}")

    def peek(self, size: int = 1) -> str:
        return self.text[self.pos : self.pos + size]

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def skip_comment(self) -> None:
        if self.peek() != "#":
            return
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        comment = self.text[self.pos : end]
        for offset, char in enumerate(comment):
            if _is_control(char):
                raise self.fail(f"control character {char!r} in a comment", self.pos + offset)
        self.pos = self.pos + len(comment)

    def end_of_line(self) -> None:
        """After a statement: spaces, a comment, then a newline or the end."""
        self.skip_ws()
        self.skip_comment()
        if self.pos >= len(self.text):
            return
        if self.peek() == "\n":
            self.pos += 1
        else:
            raise self.fail(f"expected the end of the line, found {self.peek()!r}")

    def skip_blank(self) -> None:
        """Spaces, comments and newlines inside an array."""
        while True:
            self.skip_ws()
            self.skip_comment()
            if self.peek() != "\n":
                return
            self.pos += 1

    # -- the document
    def document(self) -> Dict[str, Any]:
        header: Key = ()
        while True:
            self.skip_blank()
            if self.pos >= len(self.text):
                return self.data
            if self.peek(2) == "[[":
                header = self.array_table()
            elif self.peek() == "[":
                header = self.table()
            else:
                self.key_value(header)
            self.end_of_line()

    def header_key(self, closing: str) -> Key:
        self.skip_ws()
        key = self.key()
        self.skip_ws()
        if self.peek(len(closing)) != closing:
            raise self.fail(f"expected {closing!r} to close the table header")
        self.pos += len(closing)
        return key

    def table(self) -> Key:
        start = self.pos
        self.pos += 1
        key = self.header_key("]")
        self.flags.settle()
        if key in self.flags.declared or self.flags.is_frozen(key):
            raise self.fail("table [{}] is defined twice".format(".".join(key)), start)
        table = self.nest(key, start)
        if not isinstance(table, dict):
            raise self.fail("[{}] names a value that is not a table".format(".".join(key)), start)
        self.flags.declared.add(key)
        return key

    def array_table(self) -> Key:
        start = self.pos
        self.pos += 2
        key = self.header_key("]]")
        self.flags.settle()
        if self.flags.is_frozen(key):
            raise self.fail("[[{}]] extends an array that is already complete".format(".".join(key)), start)
        self.flags.forget_below(key)
        self.flags.declared.add(key)
        parent = self.nest(key[:-1], start)
        existing = parent.get(key[-1])
        if existing is None:
            parent[key[-1]] = [{}]
        elif isinstance(existing, list):
            existing.append({})
        else:
            raise self.fail("[[{}]] names a value that is not an array of tables".format(".".join(key)), start)
        return key

    def nest(self, key: Key, start: int) -> Dict[str, Any]:
        """The table at `key`, created where missing; the last table of an array of tables."""
        node: Any = self.data
        for part in key:
            if part not in node:
                node[part] = {}
            node = node[part]
            if isinstance(node, list):
                node = node[-1] if node else None
            if not isinstance(node, dict):
                raise self.fail("[{}] crosses a value that is not a table".format(".".join(key)), start)
        result: Dict[str, Any] = node
        return result

    def key_value(self, header: Key) -> None:
        start = self.pos
        key, value = self.pair(len(header))
        for size in range(1, len(key)):
            path = header + key[:size]
            if path in self.flags.declared:
                raise self.fail("dotted key {} redefines table [{}]".format(".".join(key), ".".join(path)), start)
            self.flags.pending.append(path)
        parent_key = header + key[:-1]
        if self.flags.is_frozen(parent_key):
            raise self.fail("{} adds to a table that is already complete".format(".".join(key)), start)
        try:
            parent = self.nest(parent_key, start)
        except TomlError:
            raise self.fail("{} overwrites a value".format(".".join(key)), start) from None
        if key[-1] in parent:
            raise self.fail("{} is defined twice".format(".".join(key)), start)
        if isinstance(value, (dict, list)):
            self.flags.frozen.add(header + key)
        parent[key[-1]] = value

    def pair(self, depth: int) -> Tuple[Key, Any]:
        key = self.key()
        if depth + len(key) > MAX_DEPTH:
            raise self.fail(f"a key nests deeper than {MAX_DEPTH} levels")
        self.skip_ws()
        if self.peek() != "=":
            raise self.fail("expected '=' after the key {}".format(".".join(key)))
        self.pos += 1
        self.skip_ws()
        return key, self.value(depth + len(key))

    def key(self) -> Key:
        parts = [self.simple_key()]
        while True:
            self.skip_ws()
            if self.peek() != ".":
                break
            self.pos += 1
            self.skip_ws()
            parts.append(self.simple_key())
            if len(parts) > MAX_DEPTH:
                raise self.fail(f"a key nests deeper than {MAX_DEPTH} levels")
        return tuple(parts)

    def simple_key(self) -> str:
        char = self.peek()
        if char == '"':
            if self.peek(3) == '"""':
                raise self.fail("a multi-line string cannot be a key")
            return self.basic_string()
        if char == "'":
            if self.peek(3) == "'''":
                raise self.fail("a multi-line string cannot be a key")
            return self.literal_string()
        found = _BARE_KEY.match(self.text, self.pos)
        if found is None:
            raise self.fail("expected a key, found {!r}".format(char or "the end of the file"))
        self.pos = found.end()
        return found.group(0)

    # -- values
    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(f"values nest deeper than {MAX_DEPTH} levels")
        char = self.peek()
        if char == '"':
            return self.multiline_basic() if self.peek(3) == '"""' else self.basic_string()
        if char == "'":
            return self.multiline_literal() if self.peek(3) == "'''" else self.literal_string()
        if char == "[":
            return self.array(depth + 1)
        if char == "{":
            return self.inline_table(depth + 1)
        for word, meaning in (("true", True), ("false", False)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return meaning
        found = _DATETIME.match(self.text, self.pos)
        if found:
            self.pos = found.end()
            return self.datetime_value(found)
        found = _LOCAL_TIME.match(self.text, self.pos)
        if found:
            self.pos = found.end()
            return _time(found.groups())
        found = _NUMBER.match(self.text, self.pos)
        if found and found.group(0):
            self.pos = found.end()
            return _number(found.group(0))
        raise self.fail("expected a value, found {!r}".format(char or "the end of the file"))

    def datetime_value(self, found: "re.Match[str]") -> Any:
        year, month, day = int(found.group(1)), int(found.group(2)), int(found.group(3))
        try:
            date = datetime.date(year, month, day)
        except ValueError as error:
            raise self.fail(f"not a date: {error}", found.start()) from None
        if found.group(4) is None:
            return date
        clock = _time(found.groups()[3:7])
        zone: Optional[datetime.tzinfo] = None
        if found.group(8):
            zone = datetime.timezone.utc
        elif found.group(9):
            offset = datetime.timedelta(hours=int(found.group(10)), minutes=int(found.group(11)))
            zone = datetime.timezone(-offset if found.group(9) == "-" else offset)
        return datetime.datetime.combine(date, clock).replace(tzinfo=zone)

    def array(self, depth: int) -> List[Any]:
        self.pos += 1
        items: List[Any] = []
        while True:
            self.skip_blank()
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value(depth))
            self.skip_blank()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() == "]":
                self.pos += 1
                return items
            else:
                raise self.fail("expected ',' or ']' in an array, found {!r}".format(self.peek() or "the end"))

    def inline_table(self, depth: int) -> Dict[str, Any]:
        self.pos += 1
        table: Dict[str, Any] = {}
        frozen: Set[Key] = set()
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            return table
        while True:
            start = self.pos
            key, value = self.pair(depth)
            node = table
            for size, part in enumerate(key[:-1], start=1):
                if key[:size] in frozen:
                    raise self.fail("{} adds to a value that is already complete".format(".".join(key)), start)
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    raise self.fail("{} overwrites a value".format(".".join(key)), start)
                node = child
            if key[-1] in node:
                raise self.fail("{} is defined twice".format(".".join(key)), start)
            node[key[-1]] = value
            if isinstance(value, (dict, list)):
                frozen.add(key)
            self.skip_ws()
            if self.peek() == "}":
                self.pos += 1
                return table
            if self.peek() != ",":
                raise self.fail("expected ',' or '}}' in an inline table, found {!r}".format(self.peek() or "the end"))
            self.pos += 1
            self.skip_ws()

    # -- strings
    def basic_string(self) -> str:
        self.pos += 1
        out: List[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise self.fail("unterminated string")
            if char == '"':
                self.pos += 1
                return "".join(out)
            if char == "\\":
                out.append(self.escape(multiline=False))
                continue
            if char == "\n" or _is_control(char):
                raise self.fail(f"{char!r} inside a string")
            out.append(char)
            self.pos += 1

    def multiline_basic(self) -> str:
        self.pos += 3
        self.skip_first_newline()
        out: List[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise self.fail("unterminated multi-line string")
            if self.peek(3) == '"""':
                out.append(self.close_multiline('"'))
                return "".join(out)
            if char == "\\":
                out.append(self.escape(multiline=True))
                continue
            if char != "\n" and _is_control(char):
                raise self.fail(f"{char!r} inside a string")
            out.append(char)
            self.pos += 1

    def close_multiline(self, quote: str) -> str:
        """Past a multi-line string's closing delimiter: up to two more quotes before it belong to the string."""
        quotes = 3
        while quotes < 5 and self.text.startswith(quote, self.pos + quotes):
            quotes += 1
        self.pos += quotes
        return quote * (quotes - 3)

    def escape(self, multiline: bool) -> str:
        start = self.pos
        self.pos += 1
        char = self.peek()
        if multiline and char in (" ", "\t", "\n"):
            self.skip_ws()
            if self.peek() not in ("\n", ""):
                raise self.fail("a line-ending backslash must end its line", start)
            while self.peek() in (" ", "\t", "\n"):
                self.pos += 1
            return ""
        if char in _ESCAPES:
            self.pos += 1
            return _ESCAPES[char]
        if char in ("u", "U"):
            size = 4 if char == "u" else 8
            digits = self.text[self.pos + 1 : self.pos + 1 + size]
            if len(digits) != size or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise self.fail(f"\\{char} needs {size} hexadecimal digits", start)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise self.fail(f"\\{char}{digits} is not a Unicode scalar value", start)
            self.pos += 1 + size
            return chr(code)
        raise self.fail(f"unknown escape \\{char}", start)

    def literal_string(self) -> str:
        self.pos += 1
        start = self.pos
        while True:
            char = self.peek()
            if char == "":
                raise self.fail("unterminated literal string")
            if char == "'":
                self.pos += 1
                return self.text[start : self.pos - 1]
            if char == "\n" or (_is_control(char) and char != "\t"):
                raise self.fail(f"{char!r} inside a literal string")
            self.pos += 1

    def multiline_literal(self) -> str:
        self.pos += 3
        self.skip_first_newline()
        out: List[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise self.fail("unterminated multi-line literal string")
            if self.peek(3) == "'''":
                out.append(self.close_multiline("'"))
                return "".join(out)
            if char not in ("\n", "\t") and _is_control(char):
                raise self.fail(f"{char!r} inside a literal string")
            out.append(char)
            self.pos += 1

    def skip_first_newline(self) -> None:
        if self.peek() == "\n":
            self.pos += 1


def _is_control(char: str) -> bool:
    """Characters TOML forbids in comments and strings: C0 controls but tab, and DEL."""
    return (char < " " and char != "\t") or char == "\x7f"


def _time(groups: "Tuple[Optional[str], ...]") -> datetime.time:
    hour, minute, second, fraction = groups[:4]
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    return datetime.time(int(hour or 0), int(minute or 0), int(second or 0), micro)


def _number(text: str) -> Any:
    plain = text.replace("_", "")
    if plain[:2] in ("0x", "0o", "0b"):
        return int(plain[2:], {"0x": 16, "0o": 8, "0b": 2}[plain[:2]])
    if plain.lstrip("+-") in ("inf", "nan"):
        return float(plain)
    if any(c in plain for c in ".eE"):
        return float(plain)
    return int(plain)


def loads(text: str) -> Dict[str, Any]:
    """Parse a TOML document; raises TomlError naming the line and column of the first problem."""
    if not isinstance(text, str):
        raise TypeError("loads() takes a str; decode the file's bytes first")
    return _Reader(text.replace("\r\n", "\n")).document()
