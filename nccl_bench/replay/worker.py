"""The replay job: every rank runs its sequence of a Workload, in order, on the job's own groups.

Per rank: one communicator over the world, the workload's groups split from it (ncclCommSplit on the
nccl backend, new groups on torch and gloo: nccl_bench.comm.lifetime.subcommunicators), made in one
order on every rank. Then, as bench does for a size:
1. one checked pass: each call's inputs filled as bench fills them (datacheck), the call run and waited
   for, and every element of its result compared with the exactly predictable value;
2. `warmup` untimed passes of the whole sequence;
3. `iters` timed passes, each timed as bench times a call (PassTimer): on GPU the ranks line up once per
   pass, on the GPU; the whole pass is enqueued behind a short hold, so no call waits on the host; one CUDA
   event between calls. On CPU the wall clock around each call, waited for.
The transfers of one batch (batch_isend_irecv) are one launch, one NCCL group, as the job made them.
Buffers: one send and one receive buffer per dtype, as large as the largest call of that dtype, each
call on views of them (the sequence runs in order, so none overlaps another). The timings and wrong
counts of every rank go to rank 0 through the job store; nccl_bench.replay.rows folds them.
"""
from __future__ import annotations

import contextlib

from nccl_bench.comm import InitPlan
from nccl_bench.comm.base import ONE_GROUP
from nccl_bench.comm.lifetime import communicator, subcommunicators
from nccl_bench.core.heartbeat import Heartbeat
from nccl_bench.core import markers
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import UsageError
from nccl_bench.measure import collectives
from nccl_bench.measure.collectives import Move, Segment
from nccl_bench.measure.datacheck import count_wrong, fill
from nccl_bench.replay.passes import PassTimer, kernel_spans
from nccl_bench.replay.workload import P2P, Op, Workload

SUM = "sum"  # a trace that records no reduction is replayed as sum
MAX_RAN = 20_000  # calls per rank kept in the result's record of what ran (a Flight Recorder keeps 2,000)
PROFILED = 3  # passes run under the profiler, after the timed ones, for each call's kernel times


def _plan(job, store, nranks: int, rank: int, namespace: str, opts) -> InitPlan:
    return InitPlan(rank=rank, nranks=nranks, mode=opts.job.init[0], ranks_per_root=opts.job.ranks_per_root,
                    counter=0, store=store, local_rank=job.ident.local_rank, blocking=True, namespace=namespace)


class Call:
    """One launch of this rank's sequence, bound to its communicator: a call, or the transfers of one batch
    (batch_isend_irecv) as one NCCL group; layout, arguments, check, and its launcher once prepared."""

    def __init__(self, ops: list[Op], comm, group_size: int):
        self.ops, self.comm, self.launcher = ops, comm, None
        # a call whose ranks start in the job's order in profiled passes (PassTimer.arrive); a batch held as one
        # with the batches its transfers join (readytimes.arrival_holds) has one hold on each of its transfers
        self.hold_us = ops[0].hold_us if len({o.hold_us for o in ops}) == 1 else None
        self.lineup = None
        op, n, r = ops[0], group_size, comm.rank
        if op.collective in P2P:
            # every send of a batch reads the front of the send buffer, so the receiver knows where its elements
            # came from; each receive lands after the one before it
            moves, self.segments, at = [], [], 0
            for o in ops:
                count = o.in_count or o.out_count
                if o.collective == "send":
                    moves.append(Move("send", o.peer, 0, count))
                else:
                    moves.append(Move("recv", o.peer, at, count))
                    self.segments.append(Segment(at, count, o.peer))
                    at += count
            self.send_n, self.recv_n = max((m.length for m in moves if m.op == "send"), default=0), at
            self.method, self.args = "exchange", {"rounds": (tuple(moves),)}
            self.reduction = SUM
        elif op.splits is not None:  # an all-to-all with uneven splits: its rounds, from the whole group's table
            counts = [list(row) for row in op.splits]
            self.send_n, self.recv_n = sum(counts[r]), sum(row[r] for row in counts)
            self.method = "exchange"  # launched as the job's all_to_all_single launched it
            self.args = {"rounds": collectives.split_rounds(counts, r), "native": ONE_GROUP}
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

    def same_as(self, other: "Call") -> bool:
        """The same launch: communicator, call, sizes, dtype and arguments."""
        return (self.comm is other.comm and self.method == other.method and self.ops[0].dtype == other.ops[0].dtype
                and (self.send_n, self.recv_n) == (other.send_n, other.recv_n) and self.args == other.args)

    def views(self, send_buf, recv_buf):
        """This call's buffers: the front of its dtype's two (a transfer's unused side keeps one element)."""
        return send_buf[:max(self.send_n, 1)], recv_buf[:max(self.recv_n, 1)]

    def prepare(self, send_buf, recv_buf, stream) -> None:
        """The launch resolved once (pointers, counts, stream), as bench's timed loop resolves it."""
        self.launcher = self.comm.prepare(self.method, *self.views(send_buf, recv_buf), stream=stream, **self.args)
        if self.hold_us is not None:  # the profiled passes (and the checked one, to prove it meets): the call's ranks
            # line up on one element and leave it together; a transfer's or a batch's ends one element each way with
            # each peer, in one group (each peer's launch lines up with this rank too: readytimes holds a batch only
            # where that is so)
            peers = sorted({o.peer for o in self.ops})
            moves = tuple(m for k, p in enumerate(peers)
                          for m in (Move("send", p, 0, 1), Move("recv", p, k if k < recv_buf.numel() else 0, 1)))
            self.lineup = (self.comm.prepare("exchange", send_buf[:1], recv_buf, stream=stream, rounds=(moves,))
                           if self.ops[0].collective in P2P else
                           self.comm.prepare("all_reduce", send_buf[:1], recv_buf[:1], op=SUM, stream=stream))

    def check(self, send_buf, recv_buf, deadline: Deadline) -> int:
        """The call once, every element of its result checked; its line-up first, as the profiled passes run it,
        so that one its peers do not mirror stops here, at its deadline, on every backend."""
        if self.lineup is not None:
            self.lineup()
            self.comm.wait(deadline, "line-up")
        send, recv = self.views(send_buf, recv_buf)
        recv.zero_()  # inputs are >= 1: a result never written shows up as wrong
        fill(send, self.comm.rank, self.reduction, self.nranks)
        self.launcher()
        self.comm.wait(deadline, self.ops[0].collective)
        return count_wrong(recv, self.segments, self.reduction, self.nranks)


def launches(ops: list[Op]) -> list[list[Op]]:
    """The rank's calls as launched: one each, and the transfers of one batch together."""
    out: list[list[Op]] = []
    for op in ops:
        if op.batch is not None and out and out[-1][0].batch == op.batch and out[-1][0].group == op.group:
            out[-1].append(op)
        else:
            out.append([op])
    return out


def worker(opts, workload: Workload):
    """The rank's part: {"rank", "times": [pass][call] seconds, "wrong": [call], "ran": [call]}."""
    def run(job) -> dict:
        import torch
        wl = workload.fit(job.nranks)
        mine = wl.ranks.get(job.rank, [])
        # one order on every rank: the splits are collective. A group of the whole world in its order runs on the
        # world communicator itself, as a job's default group is no split (a split child can get fewer channels)
        world_keys = [k for k in sorted(wl.groups) if list(wl.groups[k].ranks) == list(range(job.nranks))]
        keys = [k for k in sorted(wl.groups) if k not in world_keys]
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
            comms = {keys[i]: c for i, c in subs.items()} | {k: world for k in world_keys}
            calls = [Call(unit, comms[unit[0].group], len(wl.groups[unit[0].group].ranks)) for unit in launches(mine)]
            # what this rank runs, as launched: the record that the replay is the job's sequence
            out["ran"] = [[op.collective, c.send_n, c.recv_n, op.dtype, list(wl.groups[op.group].ranks)]
                          for c in calls for op in c.ops][:MAX_RAN]
            dev = world.device
            stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
            bufs = _buffers(world, calls)
            ctx = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
            with ctx, Heartbeat("replay", enabled=job.rank == 0) as said:
                for c in calls:
                    c.prepare(*bufs[c.ops[0].dtype], stream)
                said.now = f"checking {len(calls)} calls"
                with markers.span("replay check"):
                    wrong = [c.check(*bufs[c.ops[0].dtype], Deadline(opts.job.timeout)) for c in calls]
                out["wrong"] = [w if k == 0 else 0 for c, w in zip(calls, wrong) for k in range(len(c.ops))]
                passes = PassTimer(world, calls, stream)
                for k in range(opts.warmup):
                    said.now = f"warm-up pass {k + 1}/{opts.warmup}"
                    job.store.barrier(f"replay/warm{k}", timeout=opts.job.timeout)
                    passes.run(Deadline(opts.job.timeout), timed=False)
                passes.agree_hold(Deadline(opts.job.timeout))
                for k in range(opts.iters):
                    said.now = f"timed pass {k + 1}/{opts.iters}"
                    job.store.barrier(f"replay/rep{k}", timeout=opts.job.timeout)
                    with markers.span("replay pass", rep=k):
                        times = passes.run(Deadline(opts.job.timeout), timed=True)
                    out["times"].append([t for c, t in zip(calls, times) for _ in c.ops])  # a batch's time is each's
                if stream is not None and opts.iters:
                    said.now = "profiled passes (each call's kernels)"
                    spans = kernel_spans(passes, calls, Deadline(opts.job.timeout), min(PROFILED, opts.iters),
                                         lambda k: job.store.barrier(f"replay/prof{k}", timeout=opts.job.timeout))
                    out["kernels"] = [[span[i] for span in spans] for i, c in enumerate(calls) for _ in c.ops]
                del passes
            del bufs
        return out
    return run


def _buffers(world, calls: list[Call]) -> dict:
    """dtype -> (send, recv) as large as its largest call's."""
    import torch
    need: dict[str, list[int]] = {}
    for c in calls:
        s, r = need.setdefault(c.ops[0].dtype, [1, 1])
        need[c.ops[0].dtype] = [max(s, c.send_n), max(r, c.recv_n)]
    total = sum((s + r) * torch.empty((), dtype=getattr(torch, d)).element_size() for d, (s, r) in need.items())
    if world.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(world.device)
        if total > 0.9 * free:
            raise UsageError(f"the replay's buffers take {total / 2**30:.1f} GiB and the GPU has {free / 2**30:.1f} "
                             "GiB free")
    return {d: (world.alloc(s, getattr(torch, d)), world.alloc(r, getattr(torch, d))) for d, (s, r) in need.items()}
