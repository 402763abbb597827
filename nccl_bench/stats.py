"""Order statistics for latency samples: median, p90, p99, max.

Percentiles interpolate linearly between order statistics (numpy's default), so a
handful of samples still gives a defined p99 (close to the max, as it should be).
"""
from __future__ import annotations

import math
from typing import Iterable

QUANTILES = (("median", 0.5), ("p90", 0.9), ("p99", 0.99))


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-quantile (0 <= q <= 1) of `values`; None when there are none."""
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return None
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: Iterable[float]) -> dict:
    """{n, median, p90, p99, max} of the samples (None values ignored; stats None if empty)."""
    xs = [v for v in values if v is not None and not math.isnan(v)]
    out = {"n": len(xs)}
    for name, q in QUANTILES:
        out[name] = percentile(xs, q)
    out["max"] = max(xs) if xs else None
    return out


def within(a: float, b: float, rel: float, abs_: float) -> bool:
    """|a - b| <= max(rel * b, abs_): 'within 2 % or 1 ms, whichever is larger'."""
    return abs(a - b) <= max(rel * abs(b), abs_)
