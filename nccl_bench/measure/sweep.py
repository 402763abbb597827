"""The engine: for one collective on one communicator, sweep sizes, time, check, aggregate.

First, as nccl-tests' (2.19.6) TimeTest, the warm-up: -w launches at every size from the smallest
to the largest by factors of 2, each followed by a wait (so no point, the first included, pays for
connections NCCL sets up lazily per protocol and channel count, lazily loaded kernels or ranks
that arrive apart). Then per size, out-of-place then in-place:
time the launch loop (nccl_bench.measure.timing; the ranks lined up before it by a one-element
all_reduce, as nccl-tests' Barrier), then run `check` separate iterations on freshly
filled inputs and count the elements that differ from the exactly predictable result. After
the sweep the ranks' times, host times per launch and wrong counts are gathered through the
job store and aggregated (rank0 / avg / min / max of the times, sum of #wrong); bandwidths
follow nccl-tests: algbw = size / time, busbw = algbw * factor. With -C the placement's time
key is "cpu_time" and holds the host time per launch, as nccl-tests' -C 1 (bandwidths stay
those of the device time). With -I every rank's per-iteration times travel along: the row
keeps one list per process and, per iteration, the max over processes (nccl-tests'
per_process_max_times_us and times_us).
Given a recorder (comm.algorecorder.recording), each size's untimed out-of-place sync launch is recorded, and
the row carries the algorithm the group's first rank saw NCCL choose there.
The engine never asks which collective it runs: the record says everything.
"""
from __future__ import annotations

import contextlib
import sys
import time

from nccl_bench.core import markers, stats
from nccl_bench.measure.collectives import Collective, Layout
from nccl_bench.measure.datacheck import count_wrong, fill
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.startmarks import mark
from nccl_bench.records.bench import PLACES, BenchRow, Placement
from nccl_bench.measure import tail
from nccl_bench.measure.sweepplan import SweepPlan
from nccl_bench.measure.timing import seconds_per_op
from nccl_bench.measure.vocabulary import ELEMENT_BYTES


def aggregate(values: list[float], how: str) -> float:
    if how == "rank0":
        return values[0]
    if how == "min":
        return min(values)
    if how == "max":
        return max(values)
    return sum(values) / len(values)


def _views(send_buf, recv_buf, lay: Layout, in_place: bool, shift: int = 0):
    """(send, recv) tensors for one size, `shift` elements into both buffers; in place they share
    the larger buffer, as in nccl-tests."""
    send_buf, recv_buf = send_buf[shift:], recv_buf[shift:]
    if not in_place:
        return send_buf[:lay.send], recv_buf[:lay.recv]
    if lay.recv >= lay.send:
        buf = recv_buf[:lay.recv]
        at = lay.send_inplace
        send = buf if lay.send == lay.recv and at == 0 else buf[at:at + lay.send]
        return send, buf
    buf = send_buf[:lay.send]
    return buf, buf[lay.recv_inplace:lay.recv_inplace + lay.recv]


def per_iter_block(per_process: list[list[float]], skip: int, host: list[list[float] | None] | None = None) -> dict:
    """nccl-tests' -I object from every process's per-iteration seconds: statistics (µs) of the
    per-iteration max over processes, after the first `skip` iterations; the process rows with
    more than one process. With every process's host seconds per iteration (`host`), ours too:
    the outliers classed as the host's or the device's (measure.tail), and each process's host times."""
    rows = [[t * 1e6 for t in times[skip:]] for times in per_process]
    times_us = [max(col) for col in zip(*rows)]
    block = {**stats.per_iter_summary(times_us), "times_us": times_us}
    hosts = [[t * 1e6 for t in h[skip:]] for h in host] if host and all(h is not None for h in host) else None
    if hosts:
        p50 = sorted(times_us)[len(times_us) // 2]
        slow = [i for i, t in enumerate(times_us) if t > 2 * p50]
        block.update(tail.classify(rows, hosts, slow))
    if len(rows) > 1:
        block["per_process_max_times_us"] = rows
        if hosts:  # which rank's launches came late, iteration by iteration
            block["per_process_host_times_us"] = hosts
    return block


def with_spread(rows: list[BenchRow]) -> list[BenchRow]:
    """-N > 1: each point's rows get its spread across cycles per placement (%) and `unstable` when
    it is over stats.UNSTABLE_PCT; a number comes with its spread."""
    by_size: dict[int, list[BenchRow]] = {}
    for r in rows:
        by_size.setdefault(r.size, []).append(r)
    for same in by_size.values():
        if len(same) < 2:
            continue
        spread = {p: stats.spread_pct(r.place(p).time for r in same) for p in PLACES}
        for r in same:
            r.spread_pct = spread
            r.unstable = any(v is not None and v > stats.UNSTABLE_PCT for v in spread.values())
    return rows


def warm_up_sizes(sizes: list[int]) -> list[int]:
    """nccl-tests' warm-up sizes: from the sweep's smallest to its largest, doubling."""
    out, size = [], min(sizes, default=0)
    while sizes and size <= max(sizes):
        out.append(size)
        size = max(size * 2, size + 1)
    return out


class Sweep:
    """Runs one collective's sweep on one communicator; `rows()` are this job's aggregated rows."""

    def __init__(self, job, comm, coll: Collective, plan: SweepPlan, tag: str, progress: bool = False,
                 census=None, recorder=None):
        self.job, self.comm, self.coll, self.plan, self.tag = job, comm, coll, plan, tag
        self.recorder = recorder  # a context yielding the NCCL calls started inside it, or None
        self.census = census  # a core.threads.Census: what else ran while the loops were timed (-I)
        self.progress = progress and job.rank == 0
        self.stream = comm.new_stream()  # None on CPU
        self.token = None  # _line_up's tensor
        self.dtype = plan.dtype  # torch's name: the communicator allocates (a tensor, or the driver's array)
        elt = ELEMENT_BYTES[plan.dtype]
        layouts = [coll.layout(s, elt, job.nranks, job.rank) for s in plan.sizes]
        self.layouts = [lay for lay in layouts if lay.send and lay.recv]  # nothing to move: no row
        warm = [coll.layout(s, elt, job.nranks, job.rank) for s in warm_up_sizes(plan.sizes)]
        self.warm_layouts = [lay for lay in warm if lay.send and lay.recv]

    def _args(self, lay: Layout) -> dict:
        return self.coll.call_args(self.plan.op, self.plan.root, self.job.rank, self.job.nranks, lay)

    def _wait(self):
        self.comm.wait(Deadline(self.plan.timeout), self.coll.name)

    def _line_up(self):
        """nccl-tests' Barrier before a timed loop: a one-element all_reduce, which no rank leaves
        before every rank has made it, then the wait, whose spin lets the ranks out within microseconds."""
        self._arrive()
        self._wait()

    def _arrive(self, gate=None):
        """The line-up's first half: its all_reduce launched and, on GPU, `gate` (a CUDA event) recorded
        after it, for the timed loop to leave on from its own first call (timing.seconds_per_op)."""
        if self.token is None:
            self.token = self.comm.alloc(1, "float32")
        self.comm.all_reduce(self.token, self.token, "sum")
        if gate is not None:
            gate.record(self.stream)

    def _launcher(self, send_buf, recv_buf, lay: Layout, in_place: bool):
        """make_loop(stream) for the timing loop. Iteration i runs on buffers moved by
        (i % steps) x the size, as nccl-tests' startColl does "to avoid cache effects": steps is
        how many sizes fit in the buffers (each as large as the sweep's largest)."""
        span, skew = max(lay.send, lay.recv), self.plan.unalign
        steps = min((send_buf.numel() - skew) // span, max(self.plan.timing.ops, self.plan.timing.warmup, 1))
        views = [_views(send_buf, recv_buf, lay, in_place, k * span + skew) for k in range(steps)]
        args = self._args(lay)
        return lambda stream: self.comm.launch_loop(self.coll.method, views, stream=stream, **args)

    def _warm_up(self, send_buf, recv_buf) -> None:
        """nccl-tests' (2.19.6) warm-up: -w launches at every size from the smallest to the largest
        by factors of 2, each size waited for: every protocol and channel count the sweep will use
        has set up its connections (NCCL connects lazily) before anything is timed."""
        if self.plan.check:  # as nccl-tests' initData: the check's kernels load (lazily) before anything is timed
            lay = self.layouts[0]
            self._check(*_views(send_buf, recv_buf, lay, False, self.plan.unalign), lay)
            mark("checked")
        # Then the line-up, after the check: its first call sets up NCCL's connections for it, and it takes up
        # the check's skew between a root and its peers, so neither lands in a timed loop (docs/validation.md)
        self._line_up()
        mark("lined-up")
        n = self.plan.timing.warmup
        if not n:
            return
        started = time.perf_counter()
        for lay in self.warm_layouts:
            self._launcher(send_buf, recv_buf, lay, False)(self.stream).run(0, n)
            self._wait()
        if self.plan.timing.warmup_ms > 0:
            self._warm_for(self._launcher(send_buf, recv_buf, self.layouts[0], False)(self.stream), n, started)

    def _warm_for(self, loop, n: int, started: float) -> None:
        """More warm-up at the first size until --warmup_ms have passed since the warm-up began: a GPU that
        was idle pays once, a few milliseconds into its work, and that launch must not be a timed one
        (docs/validation.md). Every rank runs as many rounds as the slowest wants, agreed by an all_reduce of
        "done" votes: a rank alone in an extra round would hang."""
        vote = self.comm.alloc(1, "float32")
        while True:
            vote.fill_(float(time.perf_counter() - started >= self.plan.timing.warmup_ms / 1e3))
            self.comm.all_reduce(vote, vote, "sum")
            self._wait()
            if vote.item() >= self.job.nranks:
                return
            loop.run(0, n)
            self._wait()

    def _check(self, send, recv, lay: Layout) -> int:
        segments = self.coll.segments(lay, self.job.rank, self.job.nranks, self.plan.root)
        wrong = 0
        for _ in range(self.plan.check):
            recv.zero_()  # inputs are >= 1: a result never written shows up as wrong
            fill(send, self.job.rank, self.plan.op, self.job.nranks)
            mark("filled")
            self.comm.prepare(self.coll.method, send, recv, stream=self.stream, **self._args(lay))()
            mark("launched")
            self._wait()
            mark("collective")
            wrong += count_wrong(recv, segments, self.plan.op, self.job.nranks)
        return wrong

    def _size(self, send_buf, recv_buf, lay: Layout) -> dict:
        """This rank's measurements of one size, per placement (out-of-place, in-place): seconds
        per operation, host seconds per launch, #wrong (None: not checked), per-iteration seconds
        (None without -I); and the local time the size began."""
        p, dev = self.plan, self.comm.device
        mine = {"time": [], "host": [], "wrong": [], "per_iter": [], "host_iter": [], "algo": None,
                "start": time.strftime("%Y-%m-%d %H:%M:%S")}
        for in_place in (False, True):
            send, recv = _views(send_buf, recv_buf, lay, in_place, p.unalign)
            around = contextlib.nullcontext if in_place or self.recorder is None else self._recording(mine)
            with self.census.span() if self.census is not None else contextlib.nullcontext():
                t = seconds_per_op(self._launcher(send_buf, recv_buf, lay, in_place), p.timing, self._wait, self.stream,
                                   self._line_up, self._arrive, self.comm.new_event, around)
            mine["time"].append(t.seconds)
            mine["host"].append(t.host_seconds)
            mine["per_iter"].append(t.per_iter)
            mine["host_iter"].append(t.host_per_iter)
            checked = p.check and (not in_place or self.coll.in_place_checked or dev.type == "cpu")
            mine["wrong"].append(self._check(send, recv, lay) if checked else None)
        return mine

    def _recording(self, mine: dict):
        """A context for the sync launch that leaves in mine["algo"] the algorithm NCCL chose for its last call."""
        @contextlib.contextmanager
        def around():
            with self.recorder() as calls:
                yield
            if calls:
                mine["algo"] = calls[-1].algo
        return around

    def _measure(self, emit) -> None:
        """This rank's _size() per cycle and size, cycle by cycle, each handed to `emit(cycle, i, layout, it)`
        as soon as it is measured."""
        p = self.plan
        # both buffers as large as the largest size's larger buffer, as nccl-tests allocates them
        numel = max(max(lay.send, lay.recv) for lay in self.layouts) + p.unalign
        send_buf, recv_buf = self.comm.alloc(numel, self.dtype), self.comm.alloc(numel, self.dtype)
        handles = self.comm.register([send_buf, recv_buf], p.register) if p.register else []
        mark("buffers")  # the first row's way, in steps (tests/gpu/startup.py timeline)
        try:
            self._warm_up(send_buf, recv_buf)
            mark("warmed")
            for cycle in range(p.cycles):
                for i, lay in enumerate(self.layouts):
                    self._show(i, lay, cycle)
                    with markers.span("size", bytes=lay.bytes, collective=self.coll.name, cycle=cycle):
                        mine = self._size(send_buf, recv_buf, lay)
                    mark("measured")
                    emit(cycle, i, lay, mine)
            self._show(None, None)
        finally:
            for h in reversed(handles):  # before the buffers go (a window's deregistration is collective)
                h.close()
        del send_buf, recv_buf

    def rows(self, on_row=None) -> list[BenchRow]:
        """Measure on every rank; each point aggregated across ranks as soon as every rank measured it (the
        ranks' measurements meet in the job store, outside the timed loops) and handed to `on_row` at once,
        as nccl-tests prints a row when it is measured. Every rank returns the same rows; with -N, a point's
        spread is known at its last cycle."""
        if not self.layouts:
            return []
        done: list[BenchRow] = []

        def emit(cycle: int, i: int, lay: Layout, mine: dict) -> None:
            everyone = self.job.store.all_gather_obj(f"bench/{self.tag}/{self.coll.name}/{cycle}/{i}", mine,
                                                     timeout=self.plan.timeout + 60)
            row = self._row(cycle, lay, everyone)
            done.append(row)
            if cycle == self.plan.cycles - 1:
                with_spread([r for r in done if r.size == row.size])
            if on_row is not None:
                on_row(row)

        with markers.span("collective", collective=self.coll.name, run=self.tag):
            with self.comm.on_stream(self.stream):
                self._measure(emit)
        return done

    def _row(self, cycle: int, lay: Layout, per_rank: list[dict]) -> BenchRow:
        p, coll = self.plan, self.coll
        places, per_iter, host_us = {}, {}, {}
        for k, place in enumerate(PLACES):
            t = aggregate([r["time"][k] for r in per_rank], p.aggregate)
            host_us[place] = aggregate([r["host"][k] for r in per_rank], p.aggregate) * 1e6
            wrongs = [r["wrong"][k] for r in per_rank]
            algbw = lay.alg_bytes / t / 1e9 if t > 0 else 0.0
            shown = host_us[place] if p.report_cputime else t * 1e6  # -C: the host's time, as nccl-tests' -C 1
            places[place] = Placement(shown, algbw, algbw * coll.factor(self.job.nranks),
                                      None if wrongs[0] is None else sum(wrongs), cpu_time=p.report_cputime)
            if p.timing.per_iter:
                per_iter[place + "_per_iter"] = per_iter_block([r["per_iter"][k] for r in per_rank], p.per_iter_skip,
                                                               [r["host_iter"][k] for r in per_rank])
        return BenchRow(coll.name, lay.bytes, lay.count, p.type_name, p.op if coll.reduces else "none",
                        p.root if coll.rooted else -1, places["out_of_place"], places["in_place"], cycle=cycle,
                        algo_confirmed=per_rank[0]["algo"],
                        actual_iterations=p.timing.iters, host_us=host_us,
                        timestamp=per_rank[0]["start"] if p.timestamps else None, **per_iter)

    def _show(self, i, lay, cycle: int = 0) -> None:
        """A progress line on stderr, only when it is a terminal."""
        if not self.progress or not sys.stderr.isatty():
            return
        if lay is None:
            sys.stderr.write("\r\033[K")
        else:
            of = f", cycle {cycle + 1}/{self.plan.cycles}" if self.plan.cycles > 1 else ""
            sys.stderr.write(f"\r\033[K{self.tag} {self.coll.name}: {lay.bytes} B ({i + 1}/{len(self.layouts)}{of})")
        sys.stderr.flush()
