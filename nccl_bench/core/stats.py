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


def per_iter_summary(times_us: list[float]) -> dict:
    """nccl-tests' -I statistics of per-iteration times (µs): min, max, avg, p50, p95, p99, population
    stdev and cv %, with its order statistics: p50 = s[n // 2], pXX = s[min(n - 1, ceil(n * XX / 100) - 1)];
    and ours, `outliers`: how many iterations took more than twice p50 (a tail seen without percentiles)."""
    s = sorted(times_us)
    n = len(s)
    if not n:
        return {**{k: 0.0 for k in ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us",
                                    "cv_pct")}, "outliers": 0}
    avg = sum(s) / n
    stdev = math.sqrt(sum((x - avg) ** 2 for x in s) / n)
    rank = lambda q: s[min(n - 1, (n * q + 99) // 100 - 1)]  # noqa: E731
    return {"min_us": s[0], "max_us": s[-1], "avg_us": avg, "p50_us": s[n // 2], "p95_us": rank(95),
            "p99_us": rank(99), "stdev_us": stdev, "cv_pct": stdev / avg * 100 if avg else 0.0,
            "outliers": sum(x > 2 * s[n // 2] for x in s)}


UNSTABLE_PCT = 10.0  # a point whose repeats differ by more than this is flagged unstable (as pyperf warns)


def spread_pct(values: Iterable[float]) -> float | None:
    """How far repeats of one measurement differ: (max - min) / median, in %; None under 2 values."""
    xs = [v for v in values if v is not None and not math.isnan(v)]
    med = percentile(xs, 0.5)
    if len(xs) < 2 or not med:
        return None
    return (max(xs) - min(xs)) / med * 100
