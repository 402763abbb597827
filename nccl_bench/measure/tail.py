"""Where -I's slow iterations come from: the host or the device.

An iteration is an outlier when its GPU time is above twice the p50 (core.stats.per_iter_summary).
The compiled loop stamps the host clock after each iteration's mark (measure.timing), so each
iteration's GPU time comes with the host's time over the same iteration. An outlier is the host's
when the host's time over it rose above its own p50 by at least HOST_SHARE of what the GPU time
rose by: the GPU waited for a launch that came late (the interpreter, a thread, the OS running
something else on that core). Otherwise the launches went out on time and the GPU was slow: the
device's (the kernel, the link, a clock). Comparing each rise with its own p50 holds for launch-bound
sizes, where GPU time tracks host time, as for large ones, where the host runs far ahead.
"""
from __future__ import annotations

import statistics

HOST_SHARE = 0.5


def classify(gpu_us: list[list[float]], host_us: list[list[float]], outliers: list[int]) -> dict:
    """`gpu_us`, `host_us`: per process, per iteration; `outliers`: the iterations to class. Each is
    judged on the process whose GPU time set it (the slowest that iteration). Returns the counts
    and, per iteration, the host time of that process (µs)."""
    p50g = [statistics.median(g) for g in gpu_us]
    p50h = [statistics.median(h) for h in host_us]
    slowest = [max(range(len(gpu_us)), key=lambda p: gpu_us[p][i]) for i in range(len(gpu_us[0]))]
    host_side = 0
    for i in outliers:
        p = slowest[i]
        if host_us[p][i] - p50h[p] >= HOST_SHARE * (gpu_us[p][i] - p50g[p]):
            host_side += 1
    return {"outliers_host": host_side, "outliers_device": len(outliers) - host_side,
            "host_times_us": [host_us[p][i] for i, p in enumerate(slowest)]}


def cell(block: dict) -> str:
    """The table's i_>2x cell: the count, then how many were the host's (h) and the device's (d)."""
    n = block.get("outliers")
    if n is None:
        return "-"
    if not n or "outliers_host" not in block:
        return str(n)
    return f"{n}={block['outliers_host']}h+{block['outliers_device']}d"
