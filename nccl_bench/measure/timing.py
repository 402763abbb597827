"""The only place that times: seconds per operation of a launch loop and its host cost (seconds_per_op),
and the seconds of each call of a sequence (time_each: a GPU's copies; replay times its passes itself,
nccl_bench.replay.passes.PassTimer).

GPU: CUDA events around the whole loop of `iters` launches on one stream, as nccl-tests times its loop
(not each call), recorded by the loop itself right before its first and after its last launch
(nccl_bench.comm.launchloop: from C in the compiled loop). Before it, as nccl-tests' BenchTime: one untimed
"sync" launch, a wait and, as its Barrier, `line_up()`, so the GPU starts the loop idle (the time includes
the host's launch cost, as nccl-tests' does) and the ranks start it together. The sync launch alone does
not line them up: a rank that only sends (a root's peers in gather or reduce) can finish it before the
root has launched, and would then time the root's lateness. In the eager loop a rank leaves the barrier
from the loop's first call (a gate the compiled loop spins on in C), so its first launch follows at once.
The warm-up proper (-w launches at every size, doubling) is the sweep's. `-z` waits after each launch.
With graph replays (-G) the `iters` launches are captured into one CUDA graph and replayed; time per
operation = elapsed / (iters * replays). Iteration i runs on the loop's step i % steps, so the caller can
move the buffers between iterations as nccl-tests' startColl does. Host time (-C): the seconds the host
spent making the launches, per operation.

CPU (gloo): the wall clock around the same loop, waiting for completion at the end.

-m/--agg_iters: each iteration launches that many operations back to back; time per operation
= elapsed / (iters * agg). -I/--per_iter_timing: also each iteration's time per operation: on GPU an
event after each iteration on the same stream (the loop is not slowed) and the host's clock stamped
beside it, so a slow iteration is classed as the host's or the device's (measure.tail); on CPU the wall
clock around each iteration, waiting for it. Measurements behind these choices: docs/validation.md.
"""
from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

from nccl_bench.comm.launchloop import Late
from nccl_bench.core.errors import UsageError, at_least


@dataclass(frozen=True)
class TimingPlan:
    iters: int = 20  # timed launches (-n)
    warmup: int = 5  # launches at every size (doubling) when a sweep starts (-w)
    blocking: bool = False  # -z: wait for each operation before launching the next
    graph_replays: int = 0  # -G: 0 = eager; N = capture `iters` launches, replay the graph N times
    agg: int = 1  # -m: operations per iteration
    per_iter: bool = False  # -I: keep every iteration's time
    warmup_ms: float = 20.0  # --warmup_ms: with -w > 0, the warm-up lasts at least this long

    def __post_init__(self):
        at_least("-n/--iters", self.iters, 1)
        at_least("-w/--warmup_iters", self.warmup, 0)
        if not 0 <= self.warmup_ms <= 60_000:
            raise UsageError(f"--warmup_ms must be 0..60000, got {self.warmup_ms:g}")
        at_least("-G/--cudagraph", self.graph_replays, 0)
        at_least("-m/--agg_iters", self.agg, 1)
        if self.per_iter and self.graph_replays:
            raise UsageError("-I/--per_iter_timing cannot time iterations inside a CUDA graph; drop -G/--cudagraph")

    @property
    def ops(self) -> int:
        return self.iters * self.agg


class Timing(NamedTuple):
    seconds: float  # per operation: CUDA events (GPU) or wall clock (CPU) around the loop
    host_seconds: float  # per operation: the host's time making the launches (graph: the replays)
    per_iter: list[float] | None = None  # -I: seconds per operation of each iteration, else None
    # -I on GPU: the host's seconds per operation over each iteration (its launches and its mark),
    # to class a slow iteration as the host's (its launch came late) or the device's
    host_per_iter: list[float] | None = None


def seconds_per_op(make_loop: Callable[[object], object], plan: TimingPlan, wait: Callable[[], None],
                   stream=None, line_up: Callable[[], None] = lambda: None,
                   arrive: Callable[[object], None] | None = None, new_event: Callable[..., object] | None = None,
                   around_sync: Callable[[], object] = contextlib.nullcontext) -> Timing:
    """Time one collective. `make_loop(stream)` returns its launch loop (run(first, n) -> host
    seconds, one operation per step); `wait()` blocks until done; `line_up()` returns on every rank
    at once (a barrier). `arrive(event)`, where given, is the barrier's first half on GPU: it launches
    the barrier and records `event` after it; the eager loop then leaves the barrier itself, from its
    first call (a gate on `event`), so that nothing of the interpreter's lies between a rank's exit
    and its first launch.

    `stream` is a torch.cuda.Stream for GPU backends (it must be the current stream), None on CPU;
    `new_event(enable_timing)` makes the events (default torch.cuda.Event; the communicator's, which for a
    rank without torch are the CUDA driver's own). `around_sync()` is a context entered around the untimed
    sync launch (bench records there which algorithm NCCL runs: comm.algorecorder).
    """
    loop = make_loop(stream)
    eager = stream is not None and not plan.graph_replays
    gated = eager and arrive is not None and not plan.blocking
    # The events (and their hooks) are made before the sync launch: the GPU and the host come out of the
    # wait straight into the loop, as nccl-tests' do (made after it, they slowed -I's first iteration)
    events = _Events(loop, plan, stream, gated, new_event) if eager else None
    with around_sync():
        loop.run(0, 1)  # nccl-tests' sync launch
    wait()
    if gated:
        arrive(events.gate)
    else:
        line_up()
    collecting = gc.isenabled()
    gc.disable()  # no collection pause lands inside a timed loop (pyperf does the same)
    try:
        if stream is None:
            return _cpu(loop, plan, wait)
        if plan.graph_replays:
            return _graph(loop, plan, wait, stream, line_up)
        return _eager(loop, plan, wait, stream, events)
    finally:
        if collecting:
            gc.enable()


def _launch_all(loop, plan: TimingPlan, sync: Callable[[], None], mark: Callable[[], None] | None = None) -> float:
    """Host seconds to make the iters x agg launches (-z: each followed by `sync`, counted too);
    -I: `mark()` after each iteration, not counted."""
    if not plan.blocking and mark is None:
        return loop.run(0, plan.ops)
    host = 0.0
    for i in range(plan.iters):
        if plan.blocking:
            for j in range(plan.agg):
                t0 = time.perf_counter()
                loop.run(i * plan.agg + j, 1)
                sync()
                host += time.perf_counter() - t0
        else:
            host += loop.run(i * plan.agg, plan.agg)
        if mark is not None:
            mark()
    return host


def _cpu(loop, plan: TimingPlan, wait) -> Timing:
    marks = [time.perf_counter()]

    def mark():  # a gloo iteration has no other end to time than waiting for it
        wait()
        marks.append(time.perf_counter())
    host = _launch_all(loop, plan, wait, mark if plan.per_iter else None)
    wait()
    elapsed = time.perf_counter() - marks[0]
    per_iter = [(b - a) / plan.agg for a, b in zip(marks, marks[1:])] if plan.per_iter else None
    return Timing(elapsed / plan.ops, host / plan.ops, per_iter)


class _Events:
    """CUDA events around the loop (and after each iteration with -I), each made by a first record
    (torch makes the CUDA event then), with the loop's hooks that record them again from C."""

    def __init__(self, loop, plan: TimingPlan, stream, gated: bool = False, new_event=None):
        if new_event is None:
            import torch
            new_event = lambda enable_timing=False: torch.cuda.Event(enable_timing=enable_timing)  # noqa: E731
        self.start, self.end = (new_event(True) for _ in range(2))
        self.marks = [self.start] + ([new_event(True) for _ in range(plan.iters)] if plan.per_iter else [])
        self.gate = new_event() if gated else None  # the line-up's end: the loop leaves on it
        for e in (*self.marks, self.end, *([self.gate] if gated else [])):  # made now, whatever records them later
            e.record(stream)
        if not plan.blocking:
            from nccl_bench.comm.launchloop import stamps
            self.before, self.after = (loop.hook(loop.record(e, stream)) for e in (self.start, self.end))
            # gated: spin on the gate, then the start event, as one hook
            self.gated = loop.hook([loop.gate(self.gate), loop.record(self.start, stream)]) if gated else None
            self.hooks = loop.hooks([loop.record(m, stream) for m in self.marks[1:]])
            self.stamps = stamps(plan.iters) if plan.per_iter else None


def _eager(loop, plan: TimingPlan, wait, stream, ev: _Events) -> Timing:
    start, end, marks = ev.start, ev.end, ev.marks
    if plan.blocking:  # -z: each launch waited for, from here
        recorded = iter(marks[1:])
        start.record(stream)
        host = _launch_all(loop, plan, stream.synchronize,
                           (lambda: next(recorded).record(stream)) if plan.per_iter else None)
        end.record(stream)
    else:  # the loop records the events itself, right around its launches
        run = lambda before: loop.run(0, plan.ops, before=before, after=ev.after,  # noqa: E731
                                      marks=ev.hooks, mark_every=plan.agg, stamps=ev.stamps)
        try:
            host = run(ev.gated or ev.before)
        except Late:  # a rank more than a second late to the line-up: waited for here, deadline and all
            wait()
            host = run(ev.before)
    wait()
    end.synchronize()
    per_iter = [a.elapsed_time(b) / 1e3 / plan.agg for a, b in zip(marks, marks[1:])] if plan.per_iter else None
    host_iter = None
    if plan.per_iter and not plan.blocking:
        from nccl_bench.comm.launchloop import stamp_seconds
        host_iter = [h / plan.agg for h in stamp_seconds(ev.stamps)]
    return Timing(start.elapsed_time(end) / 1e3 / plan.ops, host / plan.ops, per_iter, host_iter)


def _graph(loop, plan: TimingPlan, wait, stream, line_up) -> Timing:
    import torch
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):  # the sync launch ran eagerly: NCCL connected before capture
        loop.run(0, plan.ops)
    try:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        graph.replay()  # warm replay, as the eager sync launch
        wait()
        line_up()
        start.record(stream)
        t0 = time.perf_counter()
        for _ in range(plan.graph_replays):
            graph.replay()
        host = time.perf_counter() - t0
        end.record(stream)
        wait()
        end.synchronize()
        ops = plan.ops * plan.graph_replays
        return Timing(start.elapsed_time(end) / 1e3 / ops, host / ops)
    finally:
        graph.reset()


def time_each(launches: list[Callable[[], None]], stream=None, wait_one: Callable[[int], None] = lambda k: None,
              wait_all: Callable[[], None] = lambda: None) -> list[float]:
    """Seconds of each call of a sequence, in order. GPU (`stream` given): a CUDA event before and after each
    call on the one stream, nothing waited for between calls (as the Flight Recorder times a job's calls),
    read once `wait_all()` has let the sequence finish. CPU: the wall clock around each call and its
    `wait_one(k)`, as a gloo call has no other end to time."""
    if stream is None:
        out = []
        for k, launch in enumerate(launches):
            t0 = time.perf_counter()
            launch()
            wait_one(k)
            out.append(time.perf_counter() - t0)
        return out
    import torch
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in launches]
    for (start, end), launch in zip(events, launches):
        start.record(stream)
        launch()
        end.record(stream)
    wait_all()
    stream.synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in events]
