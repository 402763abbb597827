"""asv results across commits: one series per (machine, benchmark, parameter set), in commit order,
and the regressions asv's own step detection (asv.step_detect) finds in them.

Pure: it takes the asv results the readers loaded (readers.Result of kind 'asv', one per commit and
machine) and the benchmarks' units from asv's benchmarks.json. A regression is a step to a worse
level that the latest commit still has, as `asv publish` marks them: up for a time, down for a
rate (a unit per second: GB/s, rounds/s), beyond THRESHOLD of the value (asv's own default).
"""
from __future__ import annotations

from dataclasses import dataclass, field

THRESHOLD = 0.05  # asv.conf.json's regressions_thresholds default: steps under 5 % are not named


@dataclass(frozen=True)
class Commit:
    sha: str
    date: int  # asv's commit date, ms since the epoch (its x axis)
    versions: dict

    @property
    def short(self) -> str:
        return self.sha[:8]


@dataclass
class Series:
    machine: str
    benchmark: str
    params: str  # "all_reduce, ring, scoped, 1 MiB"; "" for a benchmark without parameters
    unit: str | None
    values: list  # one per commit of the machine, None where that commit has no number

    @property
    def higher_is_better(self) -> bool:
        return bool(self.unit) and self.unit.endswith("/s")


@dataclass(frozen=True)
class Regression:
    machine: str
    benchmark: str
    params: str
    last_good: Commit  # the last commit at the better level
    first_bad: Commit  # the first commit at the worse level
    before: float
    after: float

    @property
    def change(self) -> float:
        """after / before - 1 of the value itself (negative for a rate that fell)."""
        return self.after / self.before - 1


@dataclass
class History:
    commits: dict[str, list[Commit]] = field(default_factory=dict)  # machine -> its commits, in order
    series: list[Series] = field(default_factory=list)
    regressions: list[Regression] = field(default_factory=list)

    def benchmarks(self, machine: str) -> list[str]:
        return sorted({s.benchmark for s in self.series if s.machine == machine})

    def of(self, machine: str, benchmark: str) -> list[Series]:
        return [s for s in self.series if s.machine == machine and s.benchmark == benchmark]


def build(results, units: dict[str, str | None]) -> History:
    """History of asv results (readers.Result, kind 'asv'); `units`: benchmark -> unit."""
    by_machine: dict[str, dict[str, object]] = {}
    for r in results:
        # one result per commit and machine; of two (another environment), the later run counts
        by_machine.setdefault(r.machine, {})[r.meta["commit"]] = r
    h = History()
    for machine, by_commit in sorted(by_machine.items()):
        ordered = sorted(by_commit.values(), key=lambda r: r.meta.get("date") or 0)
        h.commits[machine] = [Commit(r.meta["commit"], r.meta.get("date") or 0, r.meta.get("versions") or {})
                              for r in ordered]
        keys: dict[tuple[str, str], list] = {}
        for i, r in enumerate(ordered):
            for row in r.rows:
                keys.setdefault((row["benchmark"], row["params"]), [None] * len(ordered))[i] = row["value"]
        for (bench, params), values in sorted(keys.items()):
            if any(v is not None for v in values):
                s = Series(machine, bench, params, units.get(bench), values)
                h.series.append(s)
                h.regressions += regressions(s, h.commits[machine])
    return h


def regressions(s: Series, commits: list[Commit], threshold: float = THRESHOLD) -> list[Regression]:
    """asv's step detection on one series (a rate is inverted first, so that worse is always up)."""
    from asv import step_detect
    at = [i for i, v in enumerate(s.values) if v is not None and v > 0]
    if len(at) < 3:
        return []  # a step needs a level on each side
    y = [1 / s.values[i] if s.higher_is_better else s.values[i] for i in at]
    steps = step_detect.detect_steps(y)
    _, _, found = step_detect.detect_regressions(steps, threshold=threshold)
    out = []
    back = (lambda v: 1 / v) if s.higher_is_better else (lambda v: v)
    for before, after, level_before, level_after in found or []:
        # the levels asv fitted on either side, not the two noisy points
        out.append(Regression(s.machine, s.benchmark, s.params, commits[at[before]], commits[at[after]],
                              back(level_before), back(level_after)))
    return out
