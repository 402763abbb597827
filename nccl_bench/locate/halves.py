"""Bisection: the world's all_reduce, then halves of the group that is slow or wrong, each half its
own communicator (as --split makes them), both halves measured at once, down to the rank that
makes it slow or corrupts it: about log2(n) steps, 2 * ceil(log2 n) measurements below the world's.

A half is followed when its result is wrong, or when its busbw is under `fraction` x the other
half's: a healthy machine's halves are alike, so the slow half holds the cause. When neither half
is wrong or clearly slower, the cause lies between them (a link across the halves) and the
bisection stops there. Slowness is followed down to pairs (one rank alone has no link to time);
wrong results down to the single rank.
"""
from __future__ import annotations

from typing import Callable

from nccl_bench.comm.plan import InitPlan
from nccl_bench.core.deadline import Deadline
from nccl_bench.measure.collectives import ALL, Segment
from nccl_bench.measure.datacheck import count_wrong, fill
from nccl_bench.locate.pairs import time_launch


def halves(members: list[int]) -> tuple[list[int], list[int]]:
    mid = (len(members) + 1) // 2
    return members[:mid], members[mid:]


def allreduce_busbw(nbytes: int, seconds: float, n: int) -> float:
    return nbytes / seconds / 1e9 * (2 * (n - 1) / n) if seconds > 0 and n > 1 else 0.0


def measure_group(backend: str, job, members: list[int], tag: str, counter: int, nbytes: int, iters: int,
                  timeout: float, delay: float, corrupt: bool) -> dict:
    """On every rank of `members`: one communicator, all_reduce timed then checked."""
    import torch
    from nccl_bench.comm.lifetime import communicator
    g, grank = len(members), members.index(job.rank)
    name = f"locate/{tag}/{members[0]}"  # a namespace per group: the halves' IDs never mix
    store = job.store.group(name, members)
    plan = InitPlan(rank=grank, nranks=g, mode="regular", ranks_per_root=128, counter=counter, store=store,
                    local_rank=job.ident.local_rank, blocking=True, namespace=name)
    count = max(nbytes // 4, 1)
    with communicator(backend, plan, Deadline(timeout)) as comm:
        send, recv = comm.alloc(count, torch.float32), comm.alloc(count, torch.float32)
        fill(send, grank, "sum", g)
        if corrupt:  # test-only injection: this rank's data is wrong
            send[: max(count // 16, 1)] += 1
        stream = torch.cuda.Stream(comm.device) if comm.device.type == "cuda" else None
        ctx = torch.cuda.stream(stream) if stream is not None else _Null()
        with ctx:
            seconds = time_launch(comm, "all_reduce", send, recv, stream, iters, timeout, delay=delay, op="sum")
        if stream is not None:
            stream.synchronize()
        wrong = count_wrong(recv, [Segment(0, count, ALL)], "sum", g)
    return {"members": members, "seconds": seconds, "bytes": count * 4,
            "busbw": allreduce_busbw(count * 4, seconds, g), "wrong": int(wrong)}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def bisect(job, measure: Callable[[list[list[int]], str], list[dict]], fraction: float, world_bad: Callable[[dict], str]
           ) -> tuple[list[dict], list[int] | None, str]:
    """Every rank runs the same steps. `measure(groups, tag)` measures each group at once (every rank
    in at most one) and returns every group's result, on every rank. `world_bad(result)` says why the
    world's result calls for a bisection ('' when it does not).
    Returns (steps, the group the cause was followed to or None, why)."""
    world = list(range(job.nranks))
    steps = [{"step": 0, "groups": measure([world], "world")}]
    why = world_bad(steps[0]["groups"][0])
    if not why:
        return steps, None, ""
    wrong = steps[0]["groups"][0]["wrong"] > 0
    group = world
    while len(group) > (1 if wrong else 2):
        a, b = halves(group)
        ra, rb = measure([a, b], f"b{len(steps)}")
        steps.append({"step": len(steps), "groups": [ra, rb]})
        if wrong:
            nxt = a if ra["wrong"] else b if rb["wrong"] else None
        else:
            slow = min((ra, rb), key=lambda r: r["busbw"] if len(r["members"]) > 1 else float("inf"))
            fast = rb if slow is ra else ra
            nxt = slow["members"] if len(slow["members"]) > 1 and slow["busbw"] < fraction * fast["busbw"] else None
        if nxt is None:
            return steps, group, why + ("; neither half wrong: the cause lies between them" if wrong else
                                        "; neither half slower: the cause lies between them")
        group = nxt
    return steps, group, why
