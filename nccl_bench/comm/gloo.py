"""The CPU model: a ProcessGroupGloo per communicator, for CI and laptops.

Each communicator rendezvouses under a store prefix derived from the whole ID list, so
ranks holding different IDs never meet, exactly as NCCL ranks with mismatched IDs never
finish bootstrap; the deadline bounds the rendezvous.

The IDs are exchanged in the scenario's key layout (bootstrap.exchange_for): in `same-group`
as PyTorch 2.11 keys them inside one process group (a group prefix; `stock`'s scalable keys
`UniqueNCCLID:<root>` with no counter, so they repeat for every communicator of the group;
the broadcast path, which `scoped` = ranks per root >= world size takes, keyed by the group's
comm counter, so fresh). See nccl_bench/comm/scenario.py.

What each init costs the process is kept small (issue #31): torch keeps, for good, about 140 B for
every thread that ever ran a collective (c10d's RankLocal map, keyed by a thread id never reused) and
about 250 B for every process group its flight recorder saw. So a communicator gets one worker thread
(torch's default is two) and torch's flight recorder is off (torch_defaults). The transport device is
made once per process, as NCCL keeps its network across communicators; each init still makes its own
context and connections.
"""
from __future__ import annotations

import functools
import os
import time
from datetime import timedelta

import torch.distributed as dist

from nccl_bench.comm import gloo_interfaces
from nccl_bench.comm.bootstrap import exchange_for
from nccl_bench.comm.base import (EXCHANGE_ROUND_S, Communicator, InitPlan, id_prefix, round_views,
                                  torch_defaults)
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import CommError, DeadlineExceeded

# Tests only: seconds this CPU model pays at a process's first communicator, as NCCL does (its first init
# loads its kernels; on a GPU, CUDA starts then too), so that where that cost falls can be shown on CPU.
FIRST_INIT_ENV = "NCCL_BENCH_GLOO_FIRST_INIT_S"
_first_init_paid = False

_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
        "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.SUM}  # avg: sum, then divide


class GlooCommunicator(Communicator):
    name = "gloo"

    def __init__(self) -> None:
        super().__init__()
        self.pg = None
        self._work: list = []
        self._after: list = []  # host-side fix-ups run once the work completed
        self._store = None
        self._key: str | None = None  # the address gloo's rendezvous published for this rank

    @staticmethod
    def new_id() -> bytes:
        return os.urandom(128)  # ncclUniqueId is 128 bytes; so is ours

    def create(self, plan: InitPlan, deadline: Deadline) -> None:
        self.rank, self.nranks = plan.rank, plan.nranks
        self.ids_used = exchange_for(plan, self.new_id, deadline)
        self.timings.exchange = self.ids_used.seconds
        if plan.before_create is not None:
            plan.before_create(self.ids_used)
        t0 = time.perf_counter()
        self._first_init(deadline)
        prefix = f"gloo/{id_prefix(self.ids_used.ids)}"
        store = dist.PrefixStore(prefix, plan.store.raw)
        self._store, self._key = plan.store.raw, f"{prefix}/0/{plan.rank}"
        try:
            self.pg = dist.ProcessGroupGloo(store, plan.rank, plan.nranks, _options(deadline))
        except Exception as e:  # gloo raises RuntimeError subclasses of its own: each becomes our CommError
            kind = DeadlineExceeded if deadline.expired() or "imeout" in str(e) else CommError
            raise self._err(kind, "init", "gloo rendezvous failed",
                            f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
        self.timings.create = time.perf_counter() - t0
        self.created = True

    def _first_init(self, deadline: Deadline) -> None:
        """The process's first communicator pays FIRST_INIT_ENV's seconds; past the deadline it is a hang, as
        NCCL's nonblocking init aborted at its deadline is."""
        global _first_init_paid
        if _first_init_paid:
            return
        _first_init_paid = True
        time.sleep(float(os.environ.get(FIRST_INIT_ENV) or 0))
        if deadline.expired():
            raise self._err(DeadlineExceeded, "init", "deadline exceeded",
                            "the process's first init outlasted the deadline")

    def destroy(self) -> None:
        self.pg = None
        self.created = False
        self._forget_key()

    def _forget_key(self) -> None:
        """Delete this rank's rendezvous address: once the communicator ends no peer needs it, and a
        soak's store would otherwise keep one key per rank per init."""
        if self._key is not None:
            try:
                self._store.delete_key(self._key)
            except Exception:
                pass  # the store is gone
            self._key = self._store = None

    def abort(self) -> None:
        if self.pg is not None:
            try:
                self.pg.abort()
            except Exception:  # aborting after a failure: whatever gloo raises now changes nothing
                pass
        self.pg = None
        self._work.clear()
        self._after.clear()
        self.created = False
        self._forget_key()

    # --- collectives ----------------------------------------------------------------
    def _prep(self, send, recv):
        if send is not recv:
            recv.copy_(send)
        return recv

    def _avg(self, t, op):
        if op == "avg":
            self._after.append(lambda: t.div_(self.nranks))

    def all_reduce(self, send, recv, op):
        t = self._prep(send, recv)
        self._work.append(self.pg.allreduce([t], _opts_allreduce(op)))
        self._avg(t, op)

    def all_gather(self, send, recv):
        outs = list(recv.chunk(self.nranks))
        src = send.clone() if send.data_ptr() == outs[self.rank].data_ptr() else send
        w = self.pg.allgather([outs], [src])
        self._work.append(w)

    def reduce_scatter(self, send, recv, op):
        tmp = send.clone()
        self._work.append(self.pg.allreduce([tmp], _opts_allreduce(op)))
        mine = tmp.chunk(self.nranks)[self.rank]
        self._after.append(lambda: recv.copy_(mine / self.nranks if op == "avg" else mine))

    def broadcast(self, send, recv, root):
        t = recv
        if self.rank == root and send is not recv:
            recv.copy_(send)
        opts = dist.BroadcastOptions()
        opts.rootRank = root
        self._work.append(self.pg.broadcast([t], opts))

    def reduce(self, send, recv, op, root):
        tmp = send.clone()
        opts = dist.ReduceOptions()
        opts.reduceOp = _OPS[op]
        opts.rootRank = root
        self._work.append(self.pg.reduce([tmp], opts))
        if self.rank == root:
            self._after.append(lambda: recv.copy_(tmp / self.nranks if op == "avg" else tmp))

    def alltoall(self, send, recv):
        src = send.clone() if send.data_ptr() == recv.data_ptr() else send
        self._work.append(self.pg.alltoall_base(recv, src, [], [], dist.AllToAllOptions()))

    def sendrecv(self, send, recv, to, frm):
        src = send.clone() if send.data_ptr() == recv.data_ptr() else send
        if to == self.rank and frm == self.rank:
            recv.copy_(src)
            return
        # tag 0 both ways; gloo pairs by (peer, tag) so a ring cannot deadlock
        self._work.append(self.pg.send([src], to, 0))
        self._work.append(self.pg.recv([recv], frm, 0))

    def exchange(self, send, recv, rounds, native=None):  # gloo has no single call: the rounds
        for copies, moves, last in round_views(send, recv, rounds, self.rank):
            for src, dst in copies:
                dst.copy_(src)
            work = [(self.pg.send if op == "send" else self.pg.recv)([view], peer, 0) for op, peer, view in moves]
            self._work.extend(work)
            if not last:  # the next round may forward what this one receives: wait, bounded, errors mapped
                self.wait(Deadline(EXCHANGE_ROUND_S), "exchange")

    def wait(self, deadline: Deadline, op: str = "collective") -> None:
        work, self._work = self._work, []
        try:
            for w in work:
                if not w.wait(timedelta(seconds=max(deadline.remaining(), 0.001))):
                    raise self._err(DeadlineExceeded, op, "gloo work did not complete")
        except CommError:
            raise
        except Exception as e:  # gloo's own errors become our CommError (a timeout: DeadlineExceeded)
            msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            kind = DeadlineExceeded if "imed out" in msg or "imeout" in msg else CommError
            raise self._err(kind, op, "gloo error", msg) from None
        after, self._after = self._after, []
        for fix in after:
            fix()


def _options(deadline: Deadline):
    torch_defaults()
    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = timedelta(seconds=max(deadline.remaining(), 0.001))
    opts._devices = _devices()
    opts._threads = len(opts._devices)  # collectives of one communicator run in order: one thread each
    return opts


@functools.cache
def _devices() -> list:
    """The process's transport, as torch makes it: one device per GLOO_SOCKET_IFNAME interface, else
    the host name's address."""
    names = gloo_interfaces()
    if names:
        return [dist.ProcessGroupGloo.create_device(interface=n) for n in names]
    return [dist.ProcessGroupGloo.create_default_device()]


def _opts_allreduce(op: str):
    opts = dist.AllreduceOptions()
    opts.reduceOp = _OPS[op]
    return opts
