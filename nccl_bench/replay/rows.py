"""A replay's rows: every rank's call times folded into one row per distinct call, judged against the
job's own times where the trace has them. Pure: no torch, no job.

A row is one (collective, bytes, dtype, group): `bytes` is nccl-tests' size column for the collective
(the larger buffer), `group_ranks` the group's global ranks (a transfer's: its two ends), `calls` how
many times the group ran it in one pass of the trace. A call's time is the average over the group's
ranks (nccl-tests' default); `time_us` is the median over every call and timed pass, with its
quartiles; busbw follows nccl-tests' formula for the collective (a transfer: 1). `trace_time_us` is
the same median over the trace's own durations. A row is slower here when its lower quartile is above
the trace's upper one (beyond the spread of both) and its median more than a practical margin above the
job's (`--slower-margin`, 10 %), and fails `--max-slowdown X` when it is also more than X times the
trace's median. Where a profiler trace gives each call's time once its last rank had
started it (`trace_ready_us`), that is the job's time the row is judged against; `trace_overlap_pct`
says how much of the job's call ran beside other kernels (the job's compute).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from nccl_bench.core import stats
from nccl_bench.measure import collectives
from nccl_bench.replay import readytimes
from nccl_bench.replay.workload import P2P, Op, Workload


def row_key(op: Op, wl: Workload, rank: int) -> tuple:
    g = wl.groups[op.group]
    if op.collective in P2P:
        me, peer = rank, g.ranks[op.peer]
        ends = (me, peer) if op.collective == "send" else (peer, me)
        return (op.row_collective(), op.nbytes, op.dtype, op.group, ends)
    return (op.collective, op.nbytes, op.dtype, op.group, tuple(g.ranks))


def _q(values: list[float], q: float) -> float | None:
    return stats.percentile(values, q) if values else None


@dataclass
class ReplayRow:
    """One distinct call of the job, replayed: its times here and in the trace, its wrong values, its verdict."""

    collective: str
    bytes: int
    dtype: str
    group: str
    group_ranks: list[int]
    calls: int  # how many times the group ran it in one pass
    time_us: float | None  # median over every call and timed pass (each call: the average over its ranks)
    time_p25_us: float | None
    time_p75_us: float | None
    alg_bw: float | None
    busbw: float | None
    nwrong: int
    trace_time_us: float | None  # the job's own durations: median and quartiles
    trace_p25_us: float | None
    trace_p75_us: float | None
    samples: int
    trace_ready_us: float | None = None  # the job's time once its last rank had started the call
    trace_ready_p25_us: float | None = None
    trace_ready_p75_us: float | None = None
    trace_overlap_pct: float | None = None  # the share of the call that other kernels ran beside it
    # the replay's own kernels (profiled passes on GPU), measured as the job's ready time is (replay_ready)
    ready_us: float | None = None
    ready_p25_us: float | None = None
    ready_p75_us: float | None = None
    crossed_network: bool = False  # its group spanned nodes in the job: no ratio against the job's times
    ratio_of: str | None = None  # "trace_ready" or "trace": what the ratio is taken against
    ratio: float | None = None
    slower: bool = False  # its lower quartile above the trace's upper one, and its ratio above 1 + the margin

    def judge(self, margin: float) -> None:
        """Like against like: where the job's trace has its ready time and the replay its kernels, the replay's ready
        time over the job's; else the per-call time against the job's ready time, else against its whole
        durations (which include waiting for a late peer)."""
        if self.trace_ready_us is not None and self.ready_us is not None:
            here, low, base, upper, self.ratio_of = (self.ready_us, self.ready_p25_us, self.trace_ready_us,
                                                     self.trace_ready_p75_us, "ready")
        elif self.trace_ready_us is not None:
            here, low, base, upper, self.ratio_of = (self.time_us, self.time_p25_us, self.trace_ready_us,
                                                     self.trace_ready_p75_us, "trace_ready")
        else:
            here, low, base, upper, self.ratio_of = (self.time_us, self.time_p25_us, self.trace_time_us,
                                                     self.trace_p75_us, "trace")
        if not base or self.crossed_network:
            base, self.ratio_of = None, None
        self.ratio = here / base if here and base else None
        self.slower = bool(self.ratio and low > upper and self.ratio > 1 + margin)

    def to_json(self) -> dict:
        return asdict(self)


def fold(wl: Workload, outs: list[dict], margin: float) -> tuple[list[ReplayRow], dict]:
    """(rows, sequence) from every rank's {"rank", "times": [pass][call], "wrong": [call]}; `margin`: how much
    slower than the job a row must be, beyond both spreads, to be SLOWER."""
    by_rank = {o["rank"]: o for o in outs}
    occurrences: dict[tuple, dict[int, list[int]]] = {}  # key -> rank -> indices of its calls with that key
    for r, ops in wl.ranks.items():
        for i, op in enumerate(ops):
            occurrences.setdefault(row_key(op, wl, r), {}).setdefault(r, []).append(i)
    ready = replay_ready(wl, by_rank)
    made = {key: _row(wl, by_rank, ready, key, per_rank, margin) for key, per_rank in occurrences.items()}
    rows = sorted(made.values(), key=lambda r: (-(r.time_us or 0) * r.calls))
    return rows, sequence(wl, by_rank, {r: [made[row_key(op, wl, r)] for op in ops] for r, ops in wl.ranks.items()})


def _row(wl: Workload, by_rank: dict, ready_here: dict, key: tuple, per_rank: dict[int, list[int]],
         margin: float) -> ReplayRow:
    collective, nbytes, dtype, group, ranks = key
    calls = max(len(ix) for ix in per_rank.values())
    here, trace, ready, overlap, kernels = [], [], [], [], []
    for j in range(calls):
        at = [(r, ix[j]) for r, ix in per_rank.items() if j < len(ix)]
        kernels += ready_here.get(at[0], [])
        for p in range(min(len(by_rank[r]["times"]) for r, _ in at)):
            here.append(sum(by_rank[r]["times"][p][i] for r, i in at) / len(at))
        for into, field in ((trace, "duration_us"), (ready, "ready_us"), (overlap, "overlap")):
            got = [getattr(wl.ranks[r][i], field) for r, i in at]
            if all(v is not None for v in got):
                into.append(sum(got) / len(got))
    t = _q(here, 0.5)
    factor = 1.0 if collective not in collectives.REGISTRY else collectives.get(collective).factor(len(ranks))
    algbw = nbytes / t / 1e9 if t else None
    row = ReplayRow(collective, nbytes, dtype, group, list(ranks), calls, _us(t), _us(_q(here, 0.25)),
                    _us(_q(here, 0.75)), algbw, None if algbw is None else algbw * factor,
                    sum(by_rank[r]["wrong"][i] or 0 for r, ix in per_rank.items() for i in ix),
                    _q(trace, 0.5), _q(trace, 0.25), _q(trace, 0.75), len(here),
                    _q(ready, 0.5), _q(ready, 0.25), _q(ready, 0.75), None if not overlap else 100 * _q(overlap, 0.5),
                    _q(kernels, 0.5), _q(kernels, 0.25), _q(kernels, 0.75))
    row.crossed_network = group in wl.crossed
    row.judge(margin)
    return row


def replay_ready(wl: Workload, by_rank: dict) -> dict[tuple[int, int], list[float]]:
    """Each call's ready time in the replay, per profiled pass, from its own kernels, measured as the job's is
    (readytimes.ready_of: a collective's last end less its latest start over its ranks, a transfer's its batch's
    slowest receiver, an uneven all_to_all's share the whole call's), where every rank saw its kernels."""
    kernels = {r: by_rank.get(r, {}).get("kernels") for r, ops in wl.ranks.items() if ops}
    if not kernels or not all(kernels.values()):
        return {}
    passes = min(len(per_call) for ks in kernels.values() for per_call in ks)
    nth = readytimes.call_instances(wl)
    out: dict[tuple[int, int], list[float]] = {}
    for p in range(passes):  # spans reach rank 0 through the job store as lists
        spans = {r: [None if k[p] is None else tuple(k[p]) for k in ks] for r, ks in kernels.items()}
        for at, ready in readytimes.ready_of(wl, spans, nth).items():
            out.setdefault(at, []).append(ready)
    return out


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e6


def sequence(wl: Workload, by_rank: dict, rows_of: dict[int, list[ReplayRow]] | None = None) -> dict:
    """The whole sequence per pass: the slowest rank's sum of its call times, here and in the trace (the job's
    compute between calls is not replayed, so neither side counts it). Where the trace has ready times and the
    replay its kernels, the ratio is of ready times on both sides, over the calls that have both, each call at its
    row's median on each side (a profiled step's first calls read many times their kernels in the job)."""
    passes = min((len(o["times"]) for o in by_rank.values()), default=0)
    here = [max(sum(o["times"][p]) for o in by_rank.values()) * 1e6 for p in range(passes)]
    trace, of, ready_here, left = None, None, None, 0
    both = {r: [row for row in rows if row.ready_us is not None and row.trace_ready_us is not None]
            for r, rows in (rows_of or {}).items()}
    if any(both.values()):
        ready_here = max(sum(row.ready_us for row in rows) for rows in both.values())
        trace, of = max(sum(row.trace_ready_us for row in rows) for rows in both.values()), "ready_us"
        left = sum(len(rows_of[r]) - len(rows) for r, rows in both.items())
    else:
        for field in ("ready_us", "duration_us"):  # the job's time once each call's ranks were all in, else whole
            if wl.ranks and all(getattr(op, field) is not None for ops in wl.ranks.values() for op in ops):
                trace, of = max(sum(getattr(op, field) for op in ops) for ops in wl.ranks.values()), field
                break
    base = ready_here if ready_here else _q(here, 0.5)
    whole = of == "duration_us"  # the job's whole durations hold every wait for a late peer: no ratio of those
    if wl.crossed:  # part of the job's sequence crossed a network: the whole does not compare with this node's
        trace, of = None, "not compared: groups of the job crossed a network"
    return {"here_us": here, "here_median_us": _q(here, 0.5), "here_p25_us": _q(here, 0.25),
            "here_p75_us": _q(here, 0.75), "here_ready_us": ready_here, "trace_us": trace, "trace_of": of,
            "calls_without_ready": left, "ratio_of": "ready" if ready_here else "time",
            "ratio": base / trace if trace and base and not whole else None}


def verdict(rows: list[ReplayRow], max_slowdown: float | None) -> list[ReplayRow]:
    """Rows that fail: wrong values, or slower beyond the spread and above --max-slowdown."""
    bad = [r for r in rows if r.nwrong]
    if max_slowdown is not None:
        bad += [r for r in rows if r.slower and r.ratio > max_slowdown and r not in bad]
    return bad
