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
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from nccl_bench.errors import UsageError

Launch = Callable[[int], None]  # launch(iteration index)


@dataclass(frozen=True)
class TimingPlan:
    iters: int = 20  # timed launches (-n)
    warmup: int = 5  # untimed launches right before the timed ones (-w); at least 1 is always run
    blocking: bool = False  # -z: wait for each operation before launching the next
    graph_replays: int = 0  # -G: 0 = eager; N = capture `iters` launches, replay the graph N times

    def __post_init__(self):
        if self.iters < 1:
            raise UsageError(f"-n/--iters must be >= 1, got {self.iters}")
        if self.warmup < 0:
            raise UsageError(f"-w/--warmup-iters must be >= 0, got {self.warmup}")
        if self.graph_replays < 0:
            raise UsageError(f"-G/--cudagraph must be >= 0, got {self.graph_replays}")


def seconds_per_op(make_launch: Callable[[object], Launch], plan: TimingPlan, wait: Callable[[], None],
                   stream=None) -> float:
    """Time one collective. `make_launch(stream)` returns the launcher; `wait()` blocks until done.

    `stream` is a torch.cuda.Stream for GPU backends (it must be the current stream), None on CPU.
    """
    if stream is None:
        return _cpu(make_launch(None), plan, wait)
    if plan.graph_replays:
        return _graph(make_launch(stream), plan, wait, stream)
    return _eager(make_launch(stream), plan, wait, stream)


def _cpu(launch: Launch, plan: TimingPlan, wait) -> float:
    for i in range(max(plan.warmup, 1)):
        launch(i)
    wait()
    t0 = time.perf_counter()
    for i in range(plan.iters):
        launch(i)
        if plan.blocking:
            wait()
    wait()
    return (time.perf_counter() - t0) / plan.iters


def _eager(launch: Launch, plan: TimingPlan, wait, stream) -> float:
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(max(plan.warmup, 1)):
        launch(i)
    wait()
    start.record(stream)
    if plan.blocking:
        for i in range(plan.iters):
            launch(i)
            stream.synchronize()
    else:
        for i in range(plan.iters):
            launch(i)
    end.record(stream)
    wait()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / plan.iters


def _graph(launch: Launch, plan: TimingPlan, wait, stream) -> float:
    import torch
    for i in range(max(plan.warmup, 1)):  # eager first: NCCL connects before capture
        launch(i)
    wait()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(plan.iters):
            launch(i)
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
        return start.elapsed_time(end) / 1e3 / (plan.iters * plan.graph_replays)
    finally:
        graph.reset()
