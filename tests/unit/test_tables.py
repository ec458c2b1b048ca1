from __future__ import annotations

import pytest

from eks_hybrid_gpu.tables import table_lines

pytestmark = pytest.mark.unit


def test_columns_are_as_wide_as_their_widest_cell_and_lines_have_no_trailing_space() -> None:
    assert table_lines([("node", "owner"), ("sim-dra-h100-0", "dra"), ("n", "")]) == [
        "node            owner",
        "sim-dra-h100-0  dra",
        "n",
    ]


def test_no_rows_is_no_lines() -> None:
    assert table_lines([]) == []
