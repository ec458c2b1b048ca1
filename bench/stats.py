"""Pure helpers: summaries of repeated measurements and the growth exponent."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    """Median, min and max of repeated runs of one figure."""

    median: float
    min: float
    max: float
    runs: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def summarize(values: Sequence[float]) -> Summary:
    """The median, min and max of `values` (at least one)."""
    if not values:
        msg = "no measurements to summarize"
        raise ValueError(msg)
    return Summary(statistics.median(values), min(values), max(values), len(values))


@dataclass(frozen=True)
class Fit:
    """y = a * x**exponent, fitted by least squares on log(x), log(y)."""

    exponent: float
    coefficient: float
    r_squared: float


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least-squares slope of log(y) over log(x): the growth exponent (1.0 is linear)."""
    if len(xs) != len(ys) or len(xs) < 2:
        msg = "need at least two (x, y) points of equal count"
        raise ValueError(msg)
    if any(v <= 0 for v in (*xs, *ys)):
        msg = "a log-log fit needs positive values"
        raise ValueError(msg)
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    if sxx == 0:
        msg = "all x values are equal; no slope"
        raise ValueError(msg)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(lx, ly, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ly)
    r_squared = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return Fit(slope, math.exp(intercept), r_squared)


def segment_exponents(xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    """The local exponent between neighbouring points: log(y2/y1) / log(x2/x1)."""
    return [
        math.log(y2 / y1) / math.log(x2 / x1)
        for (x1, y1), (x2, y2) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False)
    ]


def ratio(numerator: Summary, denominator: Summary) -> float:
    """Ratio of two medians."""
    return numerator.median / denominator.median
