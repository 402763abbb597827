"""Point-to-point between every ordered pair of ranks, scheduled as rounds of disjoint pairs (a
round-robin tournament, the circle method): n-1 rounds for even n, n for odd n (one rank sits
out each round), so each link is measured without the others' traffic. In its round a pair
measures one direction, then the other.

The time of a direction is the fastest of its iterations (scheduling noise only ever adds time),
as seen by the receiver; bandwidth is bytes over that time (a point-to-point busbw, factor 1).
"""
from __future__ import annotations

import time
from typing import Callable

from nccl_bench.core.deadline import Deadline
from nccl_bench.core.tournament import tournament
from nccl_bench.measure.collectives import Move
from nccl_bench.measure.timing import TimingPlan, seconds_per_op


def delayed(launch: Callable[[], None], seconds: float) -> Callable[[], None]:
    """A launch that waits first (test-only injection: a slow direction)."""
    def run():
        time.sleep(seconds)
        launch()
    return run


def time_launch(comm, collective: str, send, recv, stream, iters: int, timeout: float, delay: float = 0.0,
                **args) -> float:
    """Seconds of the fastest of `iters` iterations of one operation on fixed buffers."""
    from nccl_bench.comm.launchloop import PythonLoop

    def make_loop(s):
        if delay:
            return PythonLoop([delayed(comm.prepare(collective, send, recv, stream=s, **args), delay)])
        return comm.launch_loop(collective, [(send, recv)], stream=s, **args)
    t = seconds_per_op(make_loop, TimingPlan(iters=iters, warmup=0, per_iter=True),
                       lambda: comm.wait(Deadline(timeout), collective), stream)
    return min(t.per_iter) if t.per_iter else t.seconds


def measure(comm, job, nbytes: int, iters: int, timeout: float, stream,
            direction_delay: Callable[[int, int], float], one_at_a_time: bool = False,
            repeats: int = 1) -> list[dict]:
    """This rank's side of every ordered pair it is in, `repeats` times: {src, dst, side, bytes, seconds}.
    `direction_delay(src, dst)` is an injected delay (0 unless a test asks) before each launch on both sides
    of that direction: a receiver that reached its receive only after a delayed send would measure none.
    `one_at_a_time`: the pairs of a round one after another (a CPU model's pairs share its cores)."""
    import torch
    send, recv = comm.alloc(max(nbytes, 1), torch.uint8), comm.alloc(max(nbytes, 1), torch.uint8)
    me, out = job.rank, []
    for k, pairs in enumerate(tournament(job.nranks) * repeats):
        for p, (a, b) in enumerate(pairs):
            if one_at_a_time and p:
                job.store.barrier(f"locate/pairs/{nbytes}/{k}/{p}", timeout=timeout)
            if me not in (a, b):
                continue
            for src, dst in ((a, b), (b, a)):
                peer, side = (dst, "send") if me == src else (src, "recv")
                rounds = ((Move(side, peer, 0, nbytes),),)
                ctx = torch.cuda.stream(stream) if stream is not None else _nothing()
                with ctx:
                    seconds = time_launch(comm, "exchange", send, recv, stream, iters, timeout,
                                          delay=direction_delay(src, dst), rounds=rounds)
                out.append({"src": src, "dst": dst, "side": side, "bytes": nbytes, "seconds": seconds})
        job.store.barrier(f"locate/pairs/{nbytes}/{k}", timeout=timeout)
    return out


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def matrix(sides: list[dict]) -> dict[tuple[int, int], float]:
    """(src, dst) -> seconds: the receiver's view (the sender's where the receiver has none), the
    fastest over repeats."""
    out: dict[tuple[int, int], float] = {}
    for side in ("send", "recv"):  # receivers last: theirs wins
        best: dict[tuple[int, int], float] = {}
        for s in sides:
            if s["side"] == side:
                best[(s["src"], s["dst"])] = min(s["seconds"], best.get((s["src"], s["dst"]), float("inf")))
        out.update(best)
    return out
