"""asv results across commits: one series per (machine, benchmark, parameter set), in commit order,
and the steps in them that stand out of the series' own noise.

A point of a series is asv's value for one commit (the median of the benchmark's samples) with the
interquartile range asv recorded beside it (its stats q_25..q_75; a result without them is the point
alone). The quartiles, not asv's 99 % interval of the median: on 10 samples that interval spans nearly all
of them, and one block slowed by a neighbour's job made a +67 % step look like noise.
A series is cut into levels: the fewest that explain its runs (each level must explain more than
THRESHOLD of the runs' relative distance from it; asv's own step detection estimates its penalty from
the series' noise, which a short history does not tell: on 6 commits it cut between runs of identical
code and missed a 20 % step). The step from one level to the next is a regression, named, when all hold:

- it goes to a worse level (up for a time, down for a rate: a unit per second) and the newest commit
  is still worse than the level before it by more than THRESHOLD;
- the two levels (before: the level right before the step; after: the level right after) differ by
  more than THRESHOLD;
- and by more than twice the series' own run-to-run spread (on a log scale: 1 + change > (1 + spread)^2),
  the spread being the largest change between neighbouring commits on one level, up to WINDOW commits
  either side of the step (what identical code does between runs); where each side is a single run with
  asv's interval, the largest change between any neighbours in that window but the step itself (without
  intervals, results from before the benchmarks gave samples: too noisy to judge);
- the runs either side do not overlap: every interval before lies below every interval after (WINDOW
  commits either side).

A worse step beyond THRESHOLD that fails the last two is too noisy to judge: said, not named. So is a
series whose runs on one level differ by more than THRESHOLD between neighbours (the median): a step of
THRESHOLD would not show in it. Two commits are judged the same way, by their intervals alone (no spread
between runs is known yet). Regressions are ranked by how far they stand out: their change over the
spread (THRESHOLD where it is not known yet).

Pure: it takes the asv results records loaded (records.Result of kind 'asv', one per commit and
machine) and the benchmarks' units from asv's benchmarks.json.
"""
from __future__ import annotations

import heapq
import math
import statistics
from dataclasses import dataclass, field

THRESHOLD = 0.05  # asv's regressions_thresholds default: steps under 5 % are not named
WINDOW = 5  # commits either side of a step whose runs judge it
NOISE_FLOOR = 0.001  # no series is steadier than this, whatever its few runs say
JUDGED = 60  # the newest commits of a series that are judged (the fit is quadratic in their number)


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
    intervals: list = field(default_factory=list)  # (q25, q75) per commit from asv's stats, or None

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
    before: float  # the level right before the step, in the series' unit
    after: float  # the level right after it
    spread: float | None  # the series' run-to-run spread near the step (relative); None: two commits only
    stands_out: float  # the worse change over the spread (THRESHOLD where none is known yet)

    @property
    def change(self) -> float:
        """after / before - 1 of the value itself (negative for a rate that fell)."""
        return self.after / self.before - 1


@dataclass(frozen=True)
class Noisy:
    machine: str
    benchmark: str
    params: str
    why: str


@dataclass
class History:
    commits: dict[str, list[Commit]] = field(default_factory=dict)  # machine -> its commits, in order
    series: list[Series] = field(default_factory=list)
    regressions: list[Regression] = field(default_factory=list)  # the most certain first
    noisy: list[Noisy] = field(default_factory=list)

    def benchmarks(self, machine: str) -> list[str]:
        return sorted({s.benchmark for s in self.series if s.machine == machine})

    def of(self, machine: str, benchmark: str) -> list[Series]:
        return [s for s in self.series if s.machine == machine and s.benchmark == benchmark]


def build(results, units: dict[str, str | None]) -> History:
    """History of asv results (records.Result, kind 'asv'); `units`: benchmark -> unit."""
    by_machine: dict[str, dict[str, object]] = {}
    for r in results:
        # one result per commit and machine; of two (another environment), the later run counts
        by_machine.setdefault(r.machine, {})[r.meta["commit"]] = r
    h = History()
    for machine, by_commit in sorted(by_machine.items()):
        ordered = sorted(by_commit.values(), key=lambda r: r.meta.get("date") or 0)
        h.commits[machine] = [Commit(r.meta["commit"], r.meta.get("date") or 0, r.meta.get("versions") or {})
                              for r in ordered]
        keys: dict[tuple[str, str], Series] = {}
        for i, r in enumerate(ordered):
            for row in r.rows:
                s = keys.setdefault((row["benchmark"], row["params"]), Series(
                    machine, row["benchmark"], row["params"], units.get(row["benchmark"]),
                    [None] * len(ordered), [None] * len(ordered)))
                s.values[i] = row["value"]
                s.intervals[i] = interval(row)
        for _, s in sorted(keys.items()):
            if any(v is not None for v in s.values):
                h.series.append(s)
                found, noisy = judge(s, h.commits[machine])
                h.regressions += found
                h.noisy += [noisy] if noisy else []
    h.regressions.sort(key=lambda r: -r.stands_out)
    return h


def interval(row: dict) -> tuple | None:
    """A result row's interquartile range (asv's stats), or None where asv recorded none."""
    if row.get("q25") is None or row.get("q75") is None:
        return None
    return row["q25"], row["q75"]


# --- the judge, in a space where worse is always up ---------------------------------------------
@dataclass(frozen=True)
class _Level:
    start: int  # first point (inclusive)
    end: int  # last point (exclusive)
    value: float


def _worse_up(s: Series):
    """(commit index, value, (lo, hi)) per point with a number, mapped so that worse is up."""
    out = []
    for i, v in enumerate(s.values):
        if v is None or v <= 0:
            continue
        lo, hi = s.intervals[i] if i < len(s.intervals) and s.intervals[i] else (v, v)
        lo, hi = min(lo, v), max(hi, v)
        if s.higher_is_better:  # a rate: its reciprocal (a time per unit), the interval turned over
            v, lo, hi = 1 / v, (1 / hi if hi > 0 else v), (1 / lo if lo > 0 else float("inf"))
        out.append((i, v, (lo, hi)))
    return out


def _levels(y: list[float], threshold: float) -> list[_Level]:
    """The fewest levels that explain `y`: the piecewise-constant fit that minimises the runs' relative
    distance from their level's median (L1 in log space) plus `threshold` per level, so that a level of
    its own must explain more than the threshold does; neighbours within `threshold` joined after."""
    logs = [math.log(v) for v in y]
    best, cut = [0.0] + [math.inf] * len(y), [0] * (len(y) + 1)
    costs = [_distances_from_median(logs[a:]) for a in range(len(y))]  # costs[a][b - a - 1]: logs[a:b]
    for b in range(1, len(y) + 1):
        for a in range(b):
            if (c := best[a] + (costs[a][b - a - 1] + threshold)) < best[b]:
                best[b], cut[b] = c, a
    bounds, b = [], len(y)
    while b > 0:
        bounds.append((cut[b], b))
        b = cut[b]
    levels: list[_Level] = []
    for a, b in reversed(bounds):
        if levels and abs(statistics.median(y[a:b]) / levels[-1].value - 1) <= threshold:
            a = levels.pop().start
        levels.append(_Level(a, b, statistics.median(y[a:b])))
    return levels


def _distances_from_median(xs: list[float]) -> list[float]:
    """sum(|x - median|) of every prefix xs[:k], k = 1..len(xs), in O(n log n) rather than a median and a sum
    per prefix (which made the fit cubic in the commits: docs/validation.md): two heaps hold the lower and upper
    halves and their sums; any value between the two middle ones is as near as the median."""
    lower, upper, lo_sum, up_sum, out = [], [], 0.0, 0.0, []  # lower: negated, a max-heap; len >= len(upper)
    for x in xs:
        if lower and x > -lower[0]:
            heapq.heappush(upper, x)
            up_sum += x
        else:
            heapq.heappush(lower, -x)
            lo_sum += x
        if len(lower) > len(upper) + 1:
            v = -heapq.heappop(lower)
            lo_sum -= v
            heapq.heappush(upper, v)
            up_sum += v
        elif len(upper) > len(lower):
            v = heapq.heappop(upper)
            up_sum -= v
            heapq.heappush(lower, -v)
            lo_sum += v
        mid = -lower[0]
        out.append(max(up_sum - lo_sum + mid * (len(lower) - len(upper)), 0.0))
    return out


def _neighbour_changes(y: list[float], levels: list[_Level], lo: int = 0, hi: int | None = None) -> list[float]:
    """|y[k+1] / y[k] - 1| for neighbours on one level, both within [lo, hi)."""
    hi = len(y) if hi is None else hi
    return [abs(y[k + 1] / y[k] - 1) for lv in levels for k in range(max(lv.start, lo), min(lv.end, hi) - 1)]


def _stands_out(change: float, spread: float | None) -> bool:
    """The step is more than twice the spread, on a log scale (noise between runs multiplies)."""
    return math.log1p(change) > 2 * math.log1p(spread or 0.0)


def judge(s: Series, commits: list[Commit], threshold: float = THRESHOLD) -> tuple[list[Regression], Noisy | None]:
    """The regressions this series names, and why it is too noisy to judge where it is."""
    pts = _worse_up(s)[-JUDGED:]
    if len(pts) < 2:
        return [], None
    y = [v for _, v, _ in pts]
    levels = _levels(y, threshold)
    back = (lambda v: 1 / v) if s.higher_is_better else (lambda v: v)
    found, unsure = [], []
    for before, after in zip(levels, levels[1:]):
        change = after.value / before.value - 1
        if change <= threshold or levels[-1].value / before.value - 1 <= threshold:
            continue  # not worse enough, or no longer worse at the newest commit
        lo, hi = max(before.start, before.end - WINDOW), min(after.end, after.start + WINDOW)
        changes = _neighbour_changes(y, levels, lo, hi)
        measured = all(pts[k][0] < len(s.intervals) and s.intervals[pts[k][0]] for k in (before.end - 1, after.start))
        if not changes and measured:  # a run alone on each side: the other neighbours near the step tell the noise
            changes = [abs(y[k + 1] / y[k] - 1) for k in range(max(0, after.start - WINDOW),
                                                               min(len(y), after.start + WINDOW) - 1)
                       if k + 1 != after.start]
        spread = max(changes) if changes else None
        if spread is None and len(pts) > 2:
            unsure.append(f"{change:+.0%} at {commits[pts[after.start][0]].short}: a single run either side"
                          + ("" if measured else " without asv's interval"))
            continue
        apart = max(pts[k][2][1] for k in range(lo, before.end)) < min(pts[k][2][0] for k in range(after.start, hi))
        if apart and (spread is not None or len(pts) == 2) and _stands_out(change, spread):
            found.append(Regression(s.machine, s.benchmark, s.params, commits[pts[before.end - 1][0]],
                                    commits[pts[after.start][0]], back(before.value), back(after.value), spread,
                                    change / max(spread if spread is not None else threshold, NOISE_FLOOR)))
        else:
            why = (f"within twice its runs' spread ({spread:.0%})" if spread is not None and not
                   _stands_out(change, spread) else
                   "the runs' intervals overlap")
            unsure.append(f"{change:+.0%} at {commits[pts[after.start][0]].short}: {why}")
    if unsure:
        return found, Noisy(s.machine, s.benchmark, s.params, "; ".join(unsure))
    changes = _neighbour_changes(y, levels)
    if not found and changes and (typical := statistics.median(changes)) > threshold:
        return found, Noisy(s.machine, s.benchmark, s.params,
                            f"runs of one level differ by {typical:.0%} between neighbours: a "
                            f"{threshold:.0%} step would not show")
    return found, None


def two_runs(new: tuple[float, tuple | None], old: tuple[float, tuple | None], higher_is_better: bool,
             threshold: float = THRESHOLD) -> str:
    """Two commits as the history judges them: 'regression' or 'improvement' beyond THRESHOLD with their
    intervals apart; 'within noise' beyond it with the intervals overlapping; else 'no change'."""
    s = Series("", "", "", "x/s" if higher_is_better else "s", [old[0], new[0]], [old[1], new[1]])
    pts = _worse_up(s)
    if len(pts) < 2:
        return "n/a"
    (_, a, (alo, ahi)), (_, b, (blo, bhi)) = pts
    if abs(b / a - 1) <= threshold:
        return "no change"
    if b > a:
        return "regression" if ahi < blo else "within noise"
    return "improvement" if bhi < alo else "within noise"
