"""A pass of the replay's sequence on the GPU, timed as bench times a call (PassTimer), and the profiled passes that
give each call's kernels (kernel_spans), measured as the job's profiler trace measured the job's."""
from __future__ import annotations

import bisect
import time

from nccl_bench.core import private
from nccl_bench.core.deadline import Deadline


class PassTimer:
    """One pass of the sequence, each launch timed as bench times one: on GPU the whole pass is enqueued before the
    GPU starts it, so no launch waits on the host between calls (bench's loop keeps the GPU ahead the same way).
    The ranks line up on the GPU (a one-element all_reduce over the world), then the stream is held by a GPU sleep
    long enough for the host to enqueue the pass (the same length on every rank, agreed after the warm-up), then
    one CUDA event between calls, and around a run of one call made back to back (its time shared equally, as
    bench times its loop of one call). On CPU: the wall clock around each call and its wait (gloo has no other end)."""

    HOLD_MARGIN = 2.0  # the hold is this many times the slowest rank's enqueue of a pass
    HOLD_MIN_S = 200e-6

    def __init__(self, world, calls: list, stream):
        self.world, self.calls, self.stream = world, calls, stream
        # where each run of one call made back to back ends (its index): a run is timed as one stretch and its time
        # shared equally, as bench times `iters` launches of one call; a call unlike the one before starts a run
        same = [k > 0 and c.same_as(calls[k - 1]) for k, c in enumerate(calls)]
        self.run_ends = [k for k in range(len(calls)) if k + 1 == len(calls) or not same[k + 1]]
        self.enqueue_s, self.hold_cycles, self.clock_hz = 0.0, 0, None
        if stream is not None:
            import torch
            self.torch = torch
            one = world.alloc(1, torch.float32)
            self.line_up = world.prepare("all_reduce", one, one, op="max", stream=stream)
            self._one = one

    def agree_hold(self, deadline: Deadline) -> None:
        """The hold every rank uses: the slowest rank's enqueue time of a pass, with margin, in GPU clock cycles."""
        if self.stream is None:
            return
        torch = self.torch
        if not self.enqueue_s:
            self.run(deadline, timed=False)
        self._one.fill_(self.enqueue_s)
        self.line_up()
        self.world.wait(deadline, "replay")
        slowest = float(self._one.item())
        self.clock_hz = self.clock_hz or _cycles_per_s(torch, self.stream)
        self.hold_cycles = int(max(slowest * self.HOLD_MARGIN, self.HOLD_MIN_S) * self.clock_hz)

    def run(self, deadline: Deadline, timed: bool, ranges=None) -> list[float]:
        """One pass; `ranges` (profiled passes): a context per call, each launch inside its own."""
        if self.stream is None:
            return self._run_cpu(deadline, timed)
        torch, stream = self.torch, self.stream
        ends = self.run_ends  # an event after each run of the same call, as bench's loop has one after its iterations
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(ends) + 1)] if timed else []
        self.line_up()
        if self.hold_cycles:
            private.gpu_sleep(self.hold_cycles)
        t0 = time.perf_counter()
        if timed:
            events[0].record(stream)
        e = 1
        for k, c in enumerate(self.calls):
            if ranges:
                self.arrive(c)
                with ranges[k]:
                    c.launcher()
            else:
                c.launcher()
            if timed and k == ends[e - 1]:
                events[e].record(stream)
                e += 1
        self.enqueue_s = max(self.enqueue_s, time.perf_counter() - t0)
        for comm in {id(c.comm): c.comm for c in self.calls}.values():
            comm.wait(deadline, "replay")
        self.world.wait(deadline, "replay")
        stream.synchronize()
        if not timed:
            return []
        out, first = [], 0
        for a, b, last in zip(events, events[1:], ends):
            out += [a.elapsed_time(b) / 1e3 / (last - first + 1)] * (last - first + 1)
            first = last + 1
        return out

    def arrive(self, c) -> None:
        """In a profiled pass (whose kernels are judged against the job's), a call's ranks line up and each holds
        back by how much later it came in the job, outside the call's range, so its kernels start in the job's
        order. Timed passes keep the replay's own order."""
        if c.lineup is None:
            return
        c.lineup()
        if c.hold_us:
            self.clock_hz = self.clock_hz or _cycles_per_s(self.torch, self.stream)
            private.gpu_sleep(int(c.hold_us * 1e-6 * self.clock_hz))

    def _run_cpu(self, deadline: Deadline, timed: bool) -> list[float]:
        out = []
        for c in self.calls:
            t0 = time.perf_counter()
            c.launcher()
            c.comm.wait(deadline, c.ops[0].collective)
            out.append(time.perf_counter() - t0)
        return out if timed else []


def _cycles_per_s(torch, stream) -> float:
    """The GPU's clock as private.gpu_sleep counts it, measured once (clocks boost: the spec figure is not it)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 20_000_000
    start.record(stream)
    private.gpu_sleep(cycles)
    end.record(stream)
    end.synchronize()
    return cycles / (start.elapsed_time(end) / 1e3)


def kernel_spans(passes: PassTimer, calls: list, deadline: Deadline, n: int, line_up) -> list[list]:
    """Per profiled pass, each call's kernels as (first start, last end) in microseconds on the node's one clock
    (CUPTI's, as the job's profiler trace has them), or None where none was seen: what the job's `ready` time is
    made of, measured the same way. Each launch runs inside a profiler range of its own; the profiler draws the
    range again on the GPU over the kernels it launched (gpu_user_annotation), or where it draws none (the torch
    backend) each kernel goes to the range its launch was made in. One profiler session for every profiled pass:
    starting one costs seconds."""
    import json
    import tempfile
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        # the profiler slows the host's launches: one pass under it first, then a hold agreed for that pace, so that
        # a call of several kernels (the rounds of an uneven all_to_all) is not stretched by the host
        line_up(-1)
        passes.run(deadline, timed=False, ranges=[record_function("replay warm-up") for _ in calls])
        passes.agree_hold(deadline)
        for k in range(n):
            line_up(k)
            with record_function(f"replay pass {k}"):
                ranges = [record_function(f"replay#{k}#{i}") for i in range(len(calls))]
                passes.run(deadline, timed=False, ranges=ranges)
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/trace.json"
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = [e for e in json.load(f).get("traceEvents", []) if isinstance(e, dict)]
    out: list[list] = [[None] * len(calls) for _ in range(n)]

    def widen(name: str, e: dict) -> None:
        k, i = (int(x) for x in name.split("#")[1:3])
        a, b = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
        got = out[k][i]
        out[k][i] = (a, b) if got is None else (min(got[0], a), max(got[1], b))
    drawn = [e for e in events
             if e.get("cat") == "gpu_user_annotation" and str(e.get("name", "")).startswith("replay#")]
    for e in drawn:
        widen(e["name"], e)
    if not drawn:  # no range drawn on the GPU (torch's ProcessGroupNCCL launches on its own stream, inside its own
        for name, e in _launched_in(events):  # ranges): each kernel by the range its launch call was made in
            widen(name, e)
    return out


def _launched_in(events: list[dict], prefix: str = "replay#"):
    """(range name, GPU activity) for each kernel or copy whose launch (the CUDA runtime or driver call with the same
    correlation id) was made inside one of the host's ranges named `prefix`... (the replay's "replay#k#i")."""
    ranges = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"]) for e in events
                    if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix))
    starts = [a for a, _, _ in ranges]
    launched = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and isinstance(e.get("args"), dict) and "correlation" in e["args"]}
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy"):
            continue
        t = launched.get((e.get("args") or {}).get("correlation"))
        k = bisect.bisect_right(starts, t) - 1 if t is not None else -1
        if k >= 0 and t <= ranges[k][1]:
            yield ranges[k][2], e
