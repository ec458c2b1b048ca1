"""A table that fits the terminal it is printed on; `-o wide` and a pipe get every column in full, as kubectl's.

Kept apart from `tables` (the one layout, standard library only, shipped to GPU hosts with the host check): this is
the commands' part, which asks the terminal how wide it is.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from typing import Final

from eks_hybrid_gpu.tables import table_lines

ELLIPSIS: Final = "…"
MIN_CELL: Final = 12
"""A column is cut down to this many characters (ellipsis included) before any column is dropped."""
GAP: Final = 2
"""The spaces between two columns (`table_lines`)."""


def terminal_width(output: str = "table") -> int | None:
    """The columns the default table must fit: the terminal's (or $COLUMNS), None for `-o wide` or a pipe."""
    if output == "wide":
        return None
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + ELLIPSIS


def fitted(rows: Sequence[Sequence[str]], width: int | None, indent: int = 0) -> list[str]:
    """`table_lines(rows)` at most `width` characters wide (with `indent` spaces before each line); None: as is.

    The widest column but the first (it names the row) is cut with an ellipsis, down to MIN_CELL, until the table
    fits; when every column is that narrow, columns are dropped from the right. The first is always kept.
    """
    if width is None or not rows:
        return table_lines(rows)
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    kept = list(range(len(widths)))
    total = indent + sum(widths) + GAP * (len(widths) - 1)
    while total > width:
        cuttable = [column for column in kept[1:] if widths[column] > MIN_CELL]
        if cuttable:
            column = max(cuttable, key=lambda c: widths[c])
            cut = min(total - width, widths[column] - MIN_CELL)
            widths[column] -= cut
            total -= cut
        elif len(kept) > 1:
            total -= widths[kept.pop()] + GAP
        else:
            break
    return table_lines([[_cut(row[column], widths[column]) for column in kept] for row in rows])
