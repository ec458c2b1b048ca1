"""The cohort overlap check: the same answers as comparing every pair, in near-linear time and memory."""

from __future__ import annotations

import resource
import time
import tracemalloc
from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from components.validation import first_overlaps, selectors_disjoint
from tests.support.configs import PLUGIN_COHORT, _base_config, cohort
from tests.unit.test_config_messages import _refusal

KEYS = ("eks.amazonaws.com/compute-type", "workload.example.com/gpu-allocation", "rack", "zone")


def pairwise(selectors: list[dict[str, str]]) -> list[tuple[int, int]]:
    """The quadratic reference: for each j, the first i < j whose selector can select one of j's nodes."""
    found: dict[int, int] = {}
    for i, j in combinations(range(len(selectors)), 2):
        if j not in found and not selectors_disjoint(selectors[i], selectors[j]):
            found[j] = i
    return sorted(found.items())


@given(
    st.lists(
        st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["a", "b", "c"]), max_size=len(KEYS)),
        max_size=12,
    )
)
def test_first_overlaps_agrees_with_every_pair(selectors: list[dict[str, str]]) -> None:
    assert first_overlaps(selectors) == pairwise(selectors)


def test_ten_thousand_duplicate_cohorts_are_refused_quickly_with_the_capped_message() -> None:
    raw = _base_config(cohorts=[cohort(PLUGIN_COHORT) for _ in range(10_000)])
    started = time.perf_counter()
    error = _refusal(raw)
    elapsed = time.perf_counter() - started
    tracemalloc.start()  # a second run, traced: tracing slows Python several times, so it is not timed
    _refusal(raw)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"10,000 duplicate cohorts: {elapsed:.2f} s, {peak / 2**20:.0f} MiB traced peak, {rss} MiB max RSS")
    lines = str(error).splitlines()
    assert lines[0] == f"The stack config has {9_999 * 2} problem(s); nothing was changed:"
    assert "  - ...and 9989 more of the same kind" in lines
    assert len(str(error)) < 8_000
    # Loose bounds (shared CI machines): the budget is 5 s and 500 MB.
    assert elapsed < 20
    assert peak < 500 * 2**20


def test_ten_thousand_cohorts_told_apart_by_another_key_stay_linear() -> None:
    selectors = [{"eks.amazonaws.com/compute-type": "hybrid", "g": "x", "rack": f"r{i}"} for i in range(10_000)]
    started = time.perf_counter()
    assert first_overlaps(selectors) == []
    assert time.perf_counter() - started < 5
