"""The value grammars the program's config validation and the pack's rules both apply: one home for each.

Every pattern is matched whole (`fullmatch`) and ASCII only, so a trailing newline or a non-ASCII digit is
never a valid name, version or quantity.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

DIGEST_IMAGE: Final = re.compile(r"[a-z0-9][a-z0-9._\-/:]*@sha256:[0-9a-f]{64}", re.ASCII)
"""An image reference pinned by digest."""
EXACT_VERSION: Final = re.compile(r"v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.\-]+)?", re.ASCII)
"""An exact chart version: no range, no wildcard."""
LABEL_KEY: Final = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
LABEL_VALUE: Final = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?", re.ASCII)
DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
SIMPLE_QUANTITY: Final = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?", re.ASCII)
"""The quantity shape the stack config accepts (no exponent, no sign, no milli)."""

_QUANTITY: Final = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE](?P<exp>[+-]?[0-9]+))?"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?",
    re.ASCII,
)
_SUFFIXES: Final[Mapping[str, Fraction]] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


def parse_quantity(value: Any) -> Fraction | None:
    """Parse a Kubernetes quantity (number or string); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in {float("inf"), float("-inf")}:
            return None
        return Fraction(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        return None
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > 30:
            return None
        number *= Fraction(10) ** exponent
    return number * _SUFFIXES[match["suffix"] or ""]
