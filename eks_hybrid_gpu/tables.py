"""The one plain-text table layout of every command: left-aligned columns, two spaces apart. Standard library only."""

from typing import TYPE_CHECKING, List, Mapping, Sequence

if TYPE_CHECKING:
    from typing import Final

OPERAND_STANDING: "Final[Mapping[str, str]]" = {
    "cohort": "cohort",
    "opted-out": "opted out",
    "would-start": "would start",
    "no-discovery": "-",
}
"""The `GPU Operator operands` cell of `local up`'s and `inspect`'s node tables, per `BoundaryNode.operands` standing:
the Operator's cohort, opted out by nvidia.com/gpu.deploy.operands=false, operands would start, not discovered."""


def table_lines(rows: Sequence[Sequence[str]]) -> List[str]:
    """Each row as one line, every column as wide as its widest cell, trailing spaces removed."""
    if not rows:
        return []
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
