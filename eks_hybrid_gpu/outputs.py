"""`-o json|yaml` for every reporting command: the option, the apiVersion/kind envelope, and a YAML writer.

The one home of these, in the standard library alone and in Python 3.6's syntax, because the host check imports it
too: its artifact runs on a GPU host's bare python3 (RHEL 8's 3.6), which has no PyYAML. `yaml_text` writes the
plain data a report holds (dicts with string keys, lists, strings, numbers, booleans, None) as block YAML that any
YAML 1.1 or 1.2 reader reads back as that same data: strings that could read as anything else are double-quoted.
eks_hybrid_gpu.options re-exports these for the commands that run where the project's environment is.
"""

import argparse
import json
import math
import re
from typing import Any, Dict, List, Mapping, Tuple

OUTPUTS = ("table", "wide", "json", "yaml")
API_VERSION = "eks-hybrid-gpu/v1alpha1"
"""The `apiVersion` of every document `-o json|yaml` prints; each report has its `kind` (InspectReport, ...)."""

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
_SPECIAL_WORDS = frozenset(
    ("y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf")
)  # YAML 1.1 booleans and null; `.nan`/`.inf` start with a dot, which is never plain here
_INDENT = "  "


def add_output_option(
    parser: argparse.ArgumentParser, formats: Tuple[str, ...] = OUTPUTS, default: str = "table"
) -> None:
    """-o/--output FORMAT and --json (= -o json, kept for the scripts written before -o)."""
    parser.add_argument(
        "-o",
        "--output",
        choices=formats,
        default=default,
        help="output format: {} (default {})".format("|".join(formats), default),
    )
    parser.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")


def typed(kind: str, body: Mapping[str, Any]) -> Dict[str, Any]:
    """A report as `-o json|yaml` prints it: `apiVersion` and `kind` first, as a Kubernetes object's, then its fields.

    A script tells the reports (and their versions) apart by these two, as `kubectl get -o json` output is told.
    """
    document = {"apiVersion": API_VERSION, "kind": kind}
    document.update(body)
    return document


def _escaped(char: str) -> str:
    code = ord(char)
    if char in '"\\':
        return "\\" + char
    printable = (
        0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000
    ) and code not in (0xFEFF, 0x2028, 0x2029)  # a byte-order mark, and the line breaks YAML 1.1 folds
    if printable:
        return char
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _string(text: str) -> str:
    """The string plain when no reader can take it for another type, else double-quoted with YAML's escapes."""
    if _PLAIN.match(text) and text.lower() not in _SPECIAL_WORDS:
        return text
    return '"' + "".join(_escaped(char) for char in text) + '"'


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:  # YAML 1.1 reads a float only with a dot: 1e-05 is 1.0e-05
            mantissa += ".0"
        return mantissa + ("e" + exponent if exponent else "")
    if isinstance(value, str):
        return _string(value)
    msg = f"{value!r} is not plain data (a dict, list, string, number, boolean or None)"
    raise TypeError(msg)


def _block(value: Any, depth: int) -> List[str]:
    """The lines of a non-empty dict or list at `depth`."""
    pad = _INDENT * depth
    lines = []  # type: List[str]
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                msg = f"the key {key!r} is not a string"
                raise TypeError(msg)
            if isinstance(item, (dict, list, tuple)) and item:
                lines.append(f"{pad}{_string(key)}:")
                lines.extend(_block(item, depth + 1))
            else:
                lines.append(f"{pad}{_string(key)}: {_inline(item)}")
        return lines
    for item in value:
        if isinstance(item, (dict, list, tuple)) and item:
            inner = _block(item, depth + 1)
            lines.append(pad + "- " + inner[0][len(_INDENT) * (depth + 1) :])
            lines.extend(inner[1:])
        else:
            lines.append(f"{pad}- {_inline(item)}")
    return lines


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return _scalar(value)


def yaml_text(document: Any) -> str:
    """`document` (plain data) as block YAML, without the final newline."""
    if isinstance(document, (dict, list, tuple)) and document:
        return "\n".join(_block(document, 0))
    return _inline(document)


def document_text(document: Mapping[str, Any], output: str) -> str:
    """A typed document as `-o json` (indented, as before) or `-o yaml` prints it."""
    if output == "yaml":
        return yaml_text(dict(document))
    return json.dumps(document, indent=2)
