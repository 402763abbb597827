"""Leak verdicts from resource samples taken every N inits: a slope per 1,000 inits, judged.

Each (rank, resource) gets a least-squares line through its samples after a warm-up (allocators,
caches and NCCL's first-init set-up grow at first and then level off). A resource LEAKs when the
lower end of the slope's 99 % interval (widened for autocorrelated samples) lies above the
resource's floor, and the fitted growth across the window is larger than work in flight comes and
goes by: clearly above zero, and large enough to matter. The floors are data, each with its reason; a slope
under its floor is reported, never called a leak. The judge is the same for a stress run and for `init
--leak-check`'s bare init/destroy loop, so the two can be set side by side (ours or NCCL's).
"""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.core.resources import RESOURCES, Trends

PER = 1000  # slopes are reported per this many inits (rounds)
MIN_SAMPLES = 5  # after the warm-up; fewer and no verdict is given
MiB = 1 << 20


@dataclass(frozen=True)
class Floor:
    """Below either number a slope is reported, never called a leak."""

    per_1000: float  # the slope per 1,000 inits
    rise: float  # the fitted growth across the measured window: more than work in flight comes and goes by
    unit: str
    why: str


FLOORS = {
    "rss_bytes": Floor(100_000, MiB, "B", "0.1 KB per init: the harness's own bound for a soak (issue #31)"),
    "gpu_bytes": Floor(MiB, 64 * MiB, "B", "under half of CUDA's 2 MiB allocation granule per 1,000 inits; "
                       "communicators in flight hold tens of MiB each"),
    "shm_bytes": Floor(MiB, 4 * MiB, "B", "a fraction of one NCCL shm segment per 1,000 inits"),
    "fds": Floor(1, 16, "", "one descriptor per 1,000 inits; teardowns in flight hold a few each"),
    "threads": Floor(1, 16, "", "one thread per 1,000 inits; teardowns in flight hold one or more each"),
    "shm_segments": Floor(1, 2, "", "one segment per 1,000 inits"),
    "store_keys": Floor(10, 50, "", "ten keys per 1,000 inits: a round's keys are deleted once every rank is done"),
}
assert set(FLOORS) == set(RESOURCES)
# (backend, resource) -> a floor that replaces the one above, where the library itself is known to grow
BACKEND_FLOORS = {
    ("nccl", "rss_bytes"): Floor(8_000_000, 4 * MiB, "B", "8 KB per init: a plain nccl4py loop (init, one "
                                 "all_reduce, destroy; no code of ours) grew 7.1 KB per init over 8,000 inits on "
                                 "NCCL 2.28.9, 99% interval -1.7 .. 15.8 (results/h100x1/soak/churn); ours grew "
                                 "5.1 over 8,299 stress rounds; a leak of ours shows above it"),
    ("gloo", "rss_bytes"): Floor(1_000_000, MiB, "B", "1 KB per init: torch 2.13 keeps about 0.15 KB per "
                                 "ProcessGroupGloo for good (c10d's RankLocal map gains an entry for every thread "
                                 "that ran a collective), a bare loop grew 0.16-0.19 KB per init and 15 clean "
                                 "300-round stress runs up to 0.38, 99% lower ends up to 0.33 (results/cpu/soak); "
                                 "a leak of ours shows above it"),
}
# PyTorch's ProcessGroupNCCL runs NCCL underneath: NCCL's own growth, the recorded floor above, applies
BACKEND_FLOORS[("torch", "rss_bytes")] = BACKEND_FLOORS[("nccl", "rss_bytes")]


def floor_of(resource: str, backend: str | None) -> Floor:
    return BACKEND_FLOORS.get((backend, resource), FLOORS[resource])


def human(v: float, unit: str) -> str:
    if unit != "B":
        return f"{v:.2f}"
    for scale, name in ((1 << 30, "GiB"), (MiB, "MiB"), (1 << 10, "KiB")):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {name}"
    return f"{v:.0f} B"


class LeakWatch(Trends):
    """Samples in (core.resources.Trends), verdicts out; O(resources x ranks) whatever the run's length."""

    def __init__(self, warmup: int, backend: str | None = None):
        super().__init__(warmup)
        self.backend = backend

    def findings(self) -> list[dict]:
        """One row per (rank, resource): slope per 1,000 inits, its interval, the verdict."""
        out = []
        for (rank, res), t in sorted(self.trends.items()):
            floor = floor_of(res, self.backend)
            row = {"rank": rank, "resource": res, "samples": t.n, "from_round": t.first_x,
                   "to_round": t.last_x, "last": t.last_y, "floor_per_1000": floor.per_1000,
                   "floor_rise": floor.rise, "floor_source": floor.why,
                   "segments": self.segments.get((rank, res), 1)}  # > 1: resumed; the longest is judged
            span = t.interval() if t.n >= MIN_SAMPLES else None
            if span is None:
                out.append({**row, "verdict": "too few samples", "slope_per_1000": None, "interval_per_1000": None})
                continue
            lo, hi = span[0] * PER, span[1] * PER
            slope = t.slope() * PER
            rise = t.slope() * (t.last_x - t.first_x)
            out.append({**row, "slope_per_1000": slope, "interval_per_1000": [lo, hi], "per_init": slope / PER,
                        "rise": rise, "autocorrelation": t.autocorrelation(),
                        "verdict": "LEAK" if lo > floor.per_1000 and rise > floor.rise else "ok"})
        return out

    @staticmethod
    def leak_lines(findings: list[dict]) -> list[str]:
        out = []
        for f in findings:
            if f["verdict"] != "LEAK":
                continue
            unit = FLOORS[f["resource"]].unit
            lo, hi = f["interval_per_1000"]
            out.append(f"LEAK: {f['resource']} on rank {f['rank']} grows {human(f['per_init'], unit)} per init "
                       f"(99% interval {human(lo / PER, unit)} .. {human(hi / PER, unit)}) over rounds "
                       f"{f['from_round']:.0f}..{f['to_round']:.0f} ({f['samples']} samples)")
        return out

    def summary_line(self, findings: list[dict]) -> str:
        judged = [f for f in findings if f["slope_per_1000"] is not None]
        if not judged:
            return (f"leak watch: too few samples after the {self.warmup}-round warm-up "
                    f"(a verdict needs {MIN_SAMPLES} per rank)")
        leaks = sum(f["verdict"] == "LEAK" for f in judged)
        ranks = sorted({f["rank"] for f in judged})
        rss = max((f for f in judged if f["resource"] == "rss_bytes"), key=lambda f: f["slope_per_1000"],
                  default=None)
        worst = (f"; rss slope at most {human(rss['slope_per_1000'], 'B')} per 1,000 inits (rank {rss['rank']})"
                 if rss else "")
        n = min(f["samples"] for f in judged)
        parts = max(f.get("segments", 1) for f in judged)
        of = f" (the longest of {parts} processes' stretches: resumed)" if parts > 1 else ""
        who = f"{len(ranks)} rank{'s' if len(ranks) > 1 else ''}"
        return (f"leak watch: {who}, >= {n} samples each after a {self.warmup}-round warm-up{of}: "
                + (f"{leaks} LEAK" if leaks else "no LEAK") + worst)
