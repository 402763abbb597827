"""The replay job: every rank runs its sequence of a Workload, in order, on the job's own groups.

Per rank: one communicator over the world, the workload's groups split from it (ncclCommSplit on the
nccl backend, new groups on torch and gloo: nccl_bench.comm.lifetime.subcommunicators), made in one
order on every rank. Then, as bench does for a size:
1. one checked pass: each call's inputs filled as bench fills them (datacheck), the call run and waited
   for, and every element of its result compared with the exactly predictable value;
2. `warmup` untimed passes of the whole sequence;
3. `iters` timed passes, the ranks lined up by a barrier before each. On GPU a CUDA event before and
   after each call on the one stream, read once the pass is done (the call's time, as the Flight
   Recorder's start and end events time it in the job); on CPU the wall clock around each call, waited
   for.
Buffers: one send and one receive buffer per dtype, as large as the largest call of that dtype, each
call on views of them (the sequence runs in order, so none overlaps another). The timings and wrong
counts of every rank go to rank 0 through the job store; nccl_bench.replay.rows folds them.
"""
from __future__ import annotations

import contextlib

from nccl_bench.comm import InitPlan
from nccl_bench.comm.lifetime import communicator, subcommunicators
from nccl_bench.core.heartbeat import Heartbeat
from nccl_bench.core import markers
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import UsageError
from nccl_bench.measure import collectives
from nccl_bench.measure.collectives import Move, Segment
from nccl_bench.measure.datacheck import count_wrong, fill
from nccl_bench.measure.timing import time_each
from nccl_bench.replay.workload import P2P, Op, Workload

SUM = "sum"  # a trace that records no reduction is replayed as sum
MAX_RAN = 20_000  # calls per rank kept in the result's record of what ran (a Flight Recorder keeps 2,000)


def _plan(job, store, nranks: int, rank: int, namespace: str, opts) -> InitPlan:
    return InitPlan(rank=rank, nranks=nranks, mode=opts.job.init[0], ranks_per_root=opts.job.ranks_per_root,
                    counter=0, store=store, local_rank=job.ident.local_rank, blocking=True, namespace=namespace)


class Call:
    """One op of this rank's sequence, bound to its communicator: layout, arguments, check."""

    def __init__(self, op: Op, comm, group_size: int):
        self.op, self.comm = op, comm
        n, r = group_size, comm.rank
        if op.collective in P2P:
            count = op.in_count or op.out_count
            move = Move(op.collective, op.peer, 0, count)
            self.send_n, self.recv_n = (count, 0) if op.collective == "send" else (0, count)
            self.method, self.args = "exchange", {"rounds": ((move,),)}
            self.segments = [Segment(0, count, op.peer)] if op.collective == "recv" else []
            self.reduction = SUM
        elif op.splits is not None:  # an all-to-all with uneven splits: its rounds, from the whole group's table
            counts = [list(row) for row in op.splits]
            self.send_n, self.recv_n = sum(counts[r]), sum(row[r] for row in counts)
            self.method, self.args = "exchange", {"rounds": collectives.split_rounds(counts, r)}
            self.segments = collectives.split_segments(counts, r)
            self.reduction = SUM
        else:
            coll = collectives.get(op.collective)
            lay = collectives.traced_layout(coll, op.in_count, op.out_count, op.elt, n, r)
            self.send_n, self.recv_n = lay.send, lay.recv
            self.reduction = op.op or SUM
            self.method = coll.method
            self.args = coll.call_args(self.reduction, op.root, r, n, lay)
            self.segments = coll.segments(lay, r, n, op.root)
        self.nranks = n

    def views(self, send_buf, recv_buf):
        """This call's buffers: the front of its dtype's two (a transfer's unused side keeps one element)."""
        return send_buf[:max(self.send_n, 1)], recv_buf[:max(self.recv_n, 1)]

    def launch(self, send_buf, recv_buf, stream) -> None:
        self.comm.prepare(self.method, *self.views(send_buf, recv_buf), stream=stream, **self.args)()

    def check(self, send_buf, recv_buf, stream, deadline: Deadline) -> int:
        send, recv = self.views(send_buf, recv_buf)
        recv.zero_()  # inputs are >= 1: a result never written shows up as wrong
        fill(send, self.comm.rank, self.reduction, self.nranks)
        self.launch(send_buf, recv_buf, stream)
        self.comm.wait(deadline, self.op.collective)
        return count_wrong(recv, self.segments, self.reduction, self.nranks)


def worker(opts, workload: Workload):
    """The rank's part: {"rank", "times": [pass][call] seconds, "wrong": [call], "ran": [call]}."""
    def run(job) -> dict:
        import torch
        wl = workload.fit(job.nranks)
        mine = wl.ranks.get(job.rank, [])
        keys = sorted(wl.groups)  # one order on every rank: the splits are collective
        ranks = [list(wl.groups[k].ranks) for k in keys]
        deadline = Deadline(opts.job.timeout)  # for the inits; each pass and check gets its own
        world_plan = _plan(job, job.store, job.nranks, job.rank, "replay", opts)

        def plan_for(i: int) -> InitPlan:
            members = ranks[i]
            return _plan(job, job.store.group(f"replay{i}", members), len(members), members.index(job.rank),
                         f"replay/g{i}", opts)

        out = {"rank": job.rank, "times": [], "wrong": [], "ran": []}
        with communicator(opts.job.backend, world_plan, deadline) as world, \
                subcommunicators(world, opts.job.backend, ranks, plan_for, deadline) as subs:
            comms = {keys[i]: c for i, c in subs.items()}
            calls = [Call(op, comms[op.group], len(wl.groups[op.group].ranks)) for op in mine]
            # what this rank runs, as launched: the record that the replay is the job's sequence
            out["ran"] = [[op.collective, c.send_n, c.recv_n, op.dtype, list(wl.groups[op.group].ranks)]
                          for c, op in zip(calls, mine)][:MAX_RAN]
            dev = world.device
            stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
            bufs = _buffers(world, calls, mine)
            ctx = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
            with ctx, Heartbeat("replay", enabled=job.rank == 0) as said:
                said.now = f"checking {len(calls)} calls"
                with markers.span("replay check"):
                    out["wrong"] = [c.check(*bufs[op.dtype], stream, Deadline(opts.job.timeout))
                                    for c, op in zip(calls, mine)]
                for k in range(opts.warmup):
                    said.now = f"warm-up pass {k + 1}/{opts.warmup}"
                    job.store.barrier(f"replay/warm{k}", timeout=opts.job.timeout)
                    _pass(calls, mine, bufs, stream, Deadline(opts.job.timeout), timed=False)
                for k in range(opts.iters):
                    said.now = f"timed pass {k + 1}/{opts.iters}"
                    job.store.barrier(f"replay/rep{k}", timeout=opts.job.timeout)
                    with markers.span("replay pass", rep=k):
                        out["times"].append(_pass(calls, mine, bufs, stream, Deadline(opts.job.timeout), timed=True))
            del bufs
        return out
    return run


def _buffers(world, calls: list[Call], ops: list[Op]) -> dict:
    """dtype -> (send, recv) as large as its largest call's."""
    import torch
    need: dict[str, list[int]] = {}
    for c, op in zip(calls, ops):
        s, r = need.setdefault(op.dtype, [1, 1])
        need[op.dtype] = [max(s, c.send_n), max(r, c.recv_n)]
    total = sum((s + r) * torch.empty((), dtype=getattr(torch, d)).element_size() for d, (s, r) in need.items())
    if world.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(world.device)
        if total > 0.9 * free:
            raise UsageError(f"the replay's buffers take {total / 2**30:.1f} GiB and the GPU has {free / 2**30:.1f} "
                             "GiB free")
    return {d: (world.alloc(s, getattr(torch, d)), world.alloc(r, getattr(torch, d))) for d, (s, r) in need.items()}


def _pass(calls, ops, bufs, stream, deadline: Deadline, timed: bool) -> list[float]:
    """One run of the sequence; with `timed`, each call's seconds (nccl_bench.measure.timing.time_each)."""
    launches = [lambda c=c, op=op: c.launch(*bufs[op.dtype], stream) for c, op in zip(calls, ops)]

    def wait_one(k: int) -> None:
        calls[k].comm.wait(deadline, ops[k].collective)

    def wait_all() -> None:
        for comm in {id(c.comm): c.comm for c in calls}.values():
            comm.wait(deadline, "replay")
    if not timed:
        for k, launch in enumerate(launches):
            launch()
            if stream is None:
                wait_one(k)
        wait_all()
        if stream is not None:
            stream.synchronize()
        return []
    return time_each(launches, stream, wait_one, wait_all)
