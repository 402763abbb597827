"""A benchmark's samples as asv records them: a `track_*` method that returns {"samples": [...], "number": 1}
gets asv's own statistics (asv_runner.statistics.compute_stats): the median as its value, the 99 %
confidence interval of that median and the quartiles as its `stats`, which `asv compare`, the dashboard
and `nccl-bench report` read. A plain number would carry no spread at all.
"""
from __future__ import annotations


class Samples(dict):
    """{"samples": values, "number": 1}: every value one measurement of the same quantity."""

    def __init__(self, values):
        values = [float(v) for v in values if v is not None]
        if not values:
            raise ValueError("no samples")
        super().__init__(samples=values, number=1)

    @property
    def values(self) -> list[float]:
        return self["samples"]

    def __rtruediv__(self, k: float) -> "Samples":
        # benchmarks/stress.py's `1.0 / rate`: the reciprocal of each sample, so that the benchmark's
        # source (and with it asv's version of its history) stays as it was
        return Samples(k / v for v in self.values)


def per_block(values: list[float], size: int) -> list[float]:
    """The mean of each whole block of `size` consecutive values: a churn's rounds differ by design (their
    skews), blocks of them do not, run after run with the same seed."""
    return [sum(values[i:i + size]) / size for i in range(0, len(values) - size + 1, size)]
