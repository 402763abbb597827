"""The only place that times: seconds per operation of a launch loop.

GPU: CUDA events around the whole loop of `iters` launches on one stream, after the
warm-up launches (as nccl-tests times its loop, not each call). The host waits for the
warm-up before the start event, so the GPU starts the loop idle and the time includes
the host's launch cost, as nccl-tests' does (it waits for the warm-up, then starts its
timer); had the loop been queued behind busy warm-ups, small sizes would show the device's
rate, not the latency a caller sees. The last warm-up collective completes on
every rank together, so the ranks start the loop together without a store barrier.
`-z` synchronizes after each launch.
With graph replays, the `iters` launches are captured into one CUDA graph (on the same
stream) and the graph is replayed; time per operation = elapsed / (iters * replays).
A launch gets its iteration's index (warm-up and timed loop each count from 0, as nccl-tests'
startColl does), so the caller can move the buffers from one iteration to the next.

CPU (gloo): wall clock around the same loop, waiting for completion at the end.

-m/--agg_iters: each iteration launches that many operations back to back; time per operation
= elapsed / (iters * agg). -I/--per_iter_timing: also the time of every iteration (per
operation, i.e. divided by agg): on GPU an event after each iteration on the same stream (the
loop is not slowed), on CPU the wall clock around each iteration, waiting for it (a gloo
iteration has no other end to time).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

from nccl_bench.errors import UsageError

Launch = Callable[[int], None]  # launch(iteration index)


@dataclass(frozen=True)
class TimingPlan:
    iters: int = 20  # timed launches (-n)
    warmup: int = 5  # untimed launches right before the timed ones (-w); at least 1 is always run
    blocking: bool = False  # -z: wait for each operation before launching the next
    graph_replays: int = 0  # -G: 0 = eager; N = capture `iters` launches, replay the graph N times
    agg: int = 1  # -m: operations per iteration
    per_iter: bool = False  # -I: keep every iteration's time

    def __post_init__(self):
        if self.iters < 1:
            raise UsageError(f"-n/--iters must be >= 1, got {self.iters}")
        if self.warmup < 0:
            raise UsageError(f"-w/--warmup-iters must be >= 0, got {self.warmup}")
        if self.graph_replays < 0:
            raise UsageError(f"-G/--cudagraph must be >= 0, got {self.graph_replays}")
        if self.agg < 1:
            raise UsageError(f"-m/--agg_iters must be >= 1, got {self.agg}")
        if self.per_iter and self.graph_replays:
            raise UsageError("-I/--per_iter_timing cannot time iterations inside a CUDA graph; drop -G/--cudagraph")

    @property
    def ops(self) -> int:
        return self.iters * self.agg


class Timed(NamedTuple):
    seconds: float  # per operation, over the whole timed loop
    per_iter: list[float] | None  # -I: seconds per operation of each iteration, else None


def _iteration(launch: Launch, i: int, agg: int) -> None:
    for j in range(agg):
        launch(i * agg + j)


def time_op(make_launch: Callable[[object], Launch], plan: TimingPlan, wait: Callable[[], None],
            stream=None) -> Timed:
    """Time one collective. `make_launch(stream)` returns the launcher; `wait()` blocks until done.

    `stream` is a torch.cuda.Stream for GPU backends (it must be the current stream), None on CPU.
    """
    if stream is None:
        return _cpu(make_launch(None), plan, wait)
    if plan.graph_replays:
        return _graph(make_launch(stream), plan, wait, stream)
    return _eager(make_launch(stream), plan, wait, stream)


def _cpu(launch: Launch, plan: TimingPlan, wait) -> Timed:
    for i in range(max(plan.warmup, 1)):
        _iteration(launch, i, plan.agg)
    wait()
    marks = [time.perf_counter()]
    for i in range(plan.iters):
        for j in range(plan.agg):
            launch(i * plan.agg + j)
            if plan.blocking:
                wait()
        if plan.per_iter:
            wait()
            marks.append(time.perf_counter())
    wait()
    end = time.perf_counter()
    return Timed((end - marks[0]) / plan.ops, _steps(marks, plan.agg) if plan.per_iter else None)


def _steps(marks: list[float], agg: int) -> list[float]:
    """Seconds per operation of each iteration, from the marks taken between iterations."""
    return [(b - a) / agg for a, b in zip(marks, marks[1:])]


def _eager(launch: Launch, plan: TimingPlan, wait, stream) -> Timed:
    import torch
    event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    start, end = event(), event()
    marks = [start]
    for i in range(max(plan.warmup, 1)):
        _iteration(launch, i, plan.agg)
    wait()
    start.record(stream)
    for i in range(plan.iters):
        for j in range(plan.agg):
            launch(i * plan.agg + j)
            if plan.blocking:
                stream.synchronize()
        if plan.per_iter:
            marks.append(event())
            marks[-1].record(stream)
    end.record(stream)
    wait()
    end.synchronize()
    per_iter = [a.elapsed_time(b) / 1e3 / plan.agg for a, b in zip(marks, marks[1:])] if plan.per_iter else None
    return Timed(start.elapsed_time(end) / 1e3 / plan.ops, per_iter)


def _graph(launch: Launch, plan: TimingPlan, wait, stream) -> Timed:
    import torch
    for i in range(max(plan.warmup, 1)):  # eager first: NCCL connects before capture
        _iteration(launch, i, plan.agg)
    wait()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(plan.iters):
            _iteration(launch, i, plan.agg)
    try:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        graph.replay()  # warm replay; like the eager warm-up it lines the ranks up on the GPU
        wait()
        start.record(stream)
        for _ in range(plan.graph_replays):
            graph.replay()
        end.record(stream)
        wait()
        end.synchronize()
        return Timed(start.elapsed_time(end) / 1e3 / (plan.ops * plan.graph_replays), None)
    finally:
        graph.reset()
