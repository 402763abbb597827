"""PyTorch's own ProcessGroupNCCL: the stock code users run.

Two scenarios (nccl_bench.comm.scenario):
- restart: a new communicator per init is a new default process group on the same
  store, in which PyTorch reuses its store keys. `stock` turns on PyTorch's scalable path
  through TORCH_NCCL_RANKS_PER_ROOT; `regular` keeps it off; `scoped` gives each init a
  fresh store prefix (the workaround users can apply today).
- same-group: pytorch#178473's repro. One default process group, created without
  device_id (lazy, as the seed does), lives across rounds; each round's communicator is
  made by PyTorch itself when the round's first all_reduce runs on a device the group has
  no communicator for: cuda:(local rank + index in group) % local GPUs, the seed's
  `(rank + round) % world`. `stock` = TORCH_NCCL_RANKS_PER_ROOT at --ranks-per-root
  (scalable init, unscoped keys); `regular` = 128 or the world size (scalable off);
  `scoped` = ranks per root = world size, what a user can do today (PyTorch then takes
  its broadcast path, keyed by the group's comm counter). The group is destroyed with its
  last communicator and aborted with a failed one.

PyTorch exchanges the IDs itself; a recording store under it notes exactly which IDs
each rank published and read, the same evidence the other backends keep.
"""
from __future__ import annotations

import functools
import inspect
import math
import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from nccl_bench.comm.bootstrap import IdExchange
from nccl_bench.comm.ncclnames import first_line, torch_error_name
from nccl_bench.comm.base import EXCHANGE_ROUND_S, Communicator, InitPlan, round_views, torch_defaults
from nccl_bench.comm.plan import choose_algorithm
from nccl_bench.comm.recordingstore import RecordingStore
from nccl_bench.core import private
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import CommError, DeadlineExceeded, EXIT_FAILED

_GRACE_S = 10.0  # after the deadline and an abort, a call still blocked ends the process

_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
        "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


class _Watchdog:
    """Bounds a blocking PyTorch call: abort at the deadline; exit if still stuck after grace."""

    def __init__(self, comm: "TorchCommunicator", deadline: Deadline, op: str):
        self.comm, self.deadline, self.op = comm, deadline, op
        self.fired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()  # gone now, not while a timed loop that follows runs (it would take the GIL)
        return False

    def _run(self):
        if self._done.wait(self.deadline.remaining()):
            return
        self.fired = True
        self.comm.abort()
        if not self._done.wait(_GRACE_S):
            print(f"rank {self.comm.rank} ({self.comm.host}) {self.op}: still blocked "
                  f"{_GRACE_S:g}s after the deadline and an abort; ending this rank", flush=True)
            os._exit(EXIT_FAILED)


def _scope(plan: InitPlan) -> str:
    """restart: the store prefix of one init's process group (`scoped`: its own, per init)."""
    return f"torch/{plan.namespace}" + (f"/{plan.counter}" if plan.mode == "scoped" else "")


class _Group:
    """same-group: the default process group that outlives a round (process-wide, as PyTorch's is)."""

    generation: int | None = None
    store: RecordingStore | None = None


class TorchCommunicator(Communicator):
    name = "torch"
    needs_gpu = True

    def __init__(self) -> None:
        super().__init__()
        self.pg = None
        self.group = None  # a sub-communicator's process group (split); None: the default group
        self._works: list = []
        self._store = None
        self._slot = None  # same-group: this communicator's place in the group

    def create(self, plan: InitPlan, deadline: Deadline) -> None:
        self.rank, self.nranks, self._slot = plan.rank, plan.nranks, plan.group
        ndev = max(torch.cuda.device_count(), 1)
        index = 0 if plan.group is None else plan.group.index
        self.device = torch.device("cuda", (plan.local_rank + index) % ndev)
        torch.cuda.set_device(self.device)
        choose_algorithm(plan)
        os.environ["TORCH_NCCL_RANKS_PER_ROOT"] = str(_ranks_per_root(plan))
        # Nonblocking init, so PyTorch itself gives up at the deadline instead of hanging; bench asks for
        # PyTorch's default, blocking, as its users run it: a nonblocking communicator makes PyTorch
        # poll NCCL after every collective, several times slower per op (docs/validation.md).
        os.environ["TORCH_NCCL_USE_COMM_NONBLOCKING"] = "0" if plan.blocking else "1"
        os.environ["TORCH_NCCL_NONBLOCKING_TIMEOUT"] = str(max(1, math.ceil(deadline.remaining())))
        t0 = time.perf_counter()
        with _Watchdog(self, deadline, "init") as wd:
            try:
                if plan.group is None:
                    self._new_group(plan, deadline, _scope(plan), self.device)
                else:
                    self._join_group(plan, deadline)
                self.pg = dist.group.WORLD
                # eager init may still be completing: one tiny barrier-free op proves the comm is ready
                probe = torch.zeros(1, device=self.device)
                dist.all_reduce(probe)
                torch.cuda.synchronize(self.device)
            except Exception as e:  # torch's errors (DistBackendError, RuntimeError...) become our CommError
                self._record(plan)
                kind = DeadlineExceeded if wd.fired or deadline.expired() else CommError
                raise self._err(kind, "init", torch_error_name(e), first_line(e)) from None
        self.timings.create = time.perf_counter() - t0
        self._record(plan)
        self.created = True

    def _new_group(self, plan: InitPlan, deadline: Deadline, scope: str, device_id) -> None:
        torch_defaults()
        self._store = RecordingStore(dist.PrefixStore(scope, plan.store.raw))
        dist.init_process_group("nccl", store=self._store, rank=plan.rank, world_size=plan.nranks,
                                device_id=device_id, timeout=timedelta(seconds=max(deadline.remaining(), 1)))

    def _join_group(self, plan: InitPlan, deadline: Deadline) -> None:
        """same-group: the run's group, made on its first round (after aborting one a failed
        round left behind here); the probe all_reduce on this round's device makes the communicator."""
        if _Group.generation != plan.group.generation:
            if dist.is_initialized():  # the round failed elsewhere while this rank's part went well
                self.abort()
            self._new_group(plan, deadline, plan.group.namespace(f"torch/{plan.namespace}"), None)
            _Group.generation, _Group.store = plan.group.generation, self._store
        self._store = _Group.store
        self._store.forget()

    def _record(self, plan: InitPlan) -> None:
        """The IDs PyTorch read (in key order: root order) and published on this rank."""
        st = self._store
        seen = {**st.published, **st.read}  # a broadcast root reads nothing: it used what it set
        keys = sorted(seen, key=_root_order)
        # a scoped restart's keys live under a prefix of this init alone: the harness may delete them
        # (once every rank is done); other layouts' keys are PyTorch's to overwrite, so no namespace
        scope = _scope(plan) if plan.group is None and plan.mode == "scoped" else ""
        ex = IdExchange(plan.mode, plan.counter, plan.rank, len(keys), keys,
                        fingerprints=[seen[k] for k in keys], namespace=scope)
        if st.published:
            key, fp = next(iter(st.published.items()))
            ex.published, ex.published_root = fp, _root_order(key)
        self.ids_used = ex

    def destroy(self) -> None:
        # same-group: the communicator stays in its group (as in the seed) until the group's last one
        if self.pg is not None and (self._slot is None or self._slot.last):
            dist.destroy_process_group()
            _Group.generation = None
        self.pg = None
        self.created = False

    def abort(self) -> None:
        _Group.generation = None  # same-group: a hung communicator takes its whole group along
        try:
            if dist.is_initialized():
                private.abort_process_group()
        except Exception:  # abort failed: destroy is the way left to let the group go
            try:
                dist.destroy_process_group()
            except Exception:  # neither let go: the process's exit frees it
                pass
        self.pg = None
        self.created = False

    def split(self, groups: list[list[int]], deadline: Deadline) -> list:
        """Every group by `dist.new_group`, which every rank calls for every group, in order."""
        out = []
        with _Watchdog(self, deadline, "split") as wd:
            for ranks in groups:
                try:
                    pg = dist.new_group(ranks, device_id=self.device, **_UNSORTED,
                                        timeout=timedelta(seconds=max(deadline.remaining(), 1)))
                except Exception as e:  # torch's errors become our CommError
                    kind = DeadlineExceeded if wd.fired or deadline.expired() else CommError
                    raise self._err(kind, "split", torch_error_name(e), first_line(e)) from None
                out.append(TorchSubgroup(self, pg, ranks) if self.rank in ranks else None)
        return out

    # --- collectives ---------------------------------------------------------------------------
    def prepare(self, collective, send, recv, op=None, root=None, to=None, frm=None, stream=None, rounds=None,
                native=None):
        """The timing loop's launcher: the calls a user writes, bound once, nothing of ours between launches
        (no method, no lookup); where PyTorch's call is in place, out of place is `recv.copy_(send)` first."""
        is_root, g = root is not None and self.rank == root, self.group
        if collective == "all_reduce":
            return _after_copy(send, recv, functools.partial(dist.all_reduce, recv, op=_OPS[op], group=g))
        if collective == "all_gather":
            return functools.partial(dist.all_gather_into_tensor, recv, send, group=g)
        if collective == "reduce_scatter":
            return functools.partial(dist.reduce_scatter_tensor, recv, send, op=_OPS[op], group=g)
        if collective == "broadcast":
            return _after_copy(send if is_root else recv, recv,
                               functools.partial(dist.broadcast, recv, group=g, group_src=root))
        if collective == "reduce":
            return _after_copy(send, recv, functools.partial(dist.reduce, recv, op=_OPS[op], group=g, group_dst=root))
        return super().prepare(collective, send, recv, op=op, root=root, to=to, frm=frm, stream=stream,
                               rounds=rounds, native=native)

    def _prep(self, send, recv):
        if send is not recv:
            recv.copy_(send)
        return recv

    # Collectives go as users write them, async_op=False: PyTorch (2.8+) then launches NCCL on the
    # current stream itself. async_op=True would launch on its internal stream, fenced by two events
    # and two stream waits per op, and stash the tensors: slower than a plain loop (docs/validation.md).
    # Either way nothing waits on the host here; wait() bounds what is in flight.
    def _issued(self, *works) -> None:
        """Point-to-point batches are always asynchronous: the current stream waits for each (no host
        wait), so events on it time them; wait() still bounds them."""
        for w in works:
            w.wait()
            self._works.append(w)

    def all_reduce(self, send, recv, op):
        dist.all_reduce(self._prep(send, recv), op=_OPS[op], group=self.group)

    def all_gather(self, send, recv):
        dist.all_gather_into_tensor(recv, send, group=self.group)

    def reduce_scatter(self, send, recv, op):
        dist.reduce_scatter_tensor(recv, send, op=_OPS[op], group=self.group)

    def broadcast(self, send, recv, root):
        dist.broadcast(self._prep(send, recv) if self.rank == root else recv, group=self.group, group_src=root)

    def reduce(self, send, recv, op, root):
        dist.reduce(self._prep(send, recv), op=_OPS[op], group=self.group, group_dst=root)

    def alltoall(self, send, recv):
        dist.all_to_all_single(recv, send.clone() if send.data_ptr() == recv.data_ptr() else send, group=self.group)

    def sendrecv(self, send, recv, to, frm):
        src = send.clone() if send.data_ptr() == recv.data_ptr() else send
        ops = [dist.P2POp(dist.isend, src, group=self.group, group_peer=to),
               dist.P2POp(dist.irecv, recv, group=self.group, group_peer=frm)]
        self._issued(*dist.batch_isend_irecv(ops))

    def exchange(self, send, recv, rounds, native=None):  # PyTorch has no tensor gather/scatter: the rounds
        for copies, moves, last in round_views(send, recv, rounds, self.rank):
            for src, dst in copies:
                dst.copy_(src)
            ops = [dist.P2POp(dist.isend if op == "send" else dist.irecv, view, group=self.group, group_peer=peer)
                   for op, peer, view in moves]
            self._issued(*(dist.batch_isend_irecv(ops) if ops else []))
            if not last:  # the next round may forward what this one receives: wait, bounded, errors mapped
                self.wait(Deadline(EXCHANGE_ROUND_S), "exchange")

    def wait(self, deadline: Deadline, op: str = "collective") -> None:
        works, self._works = self._works, []
        with _Watchdog(self, deadline, op) as wd:
            try:
                for w in works:
                    w.wait(timedelta(seconds=max(deadline.remaining(), 0.001)))
                torch.cuda.synchronize(self.device)
            except Exception as e:  # torch's errors become our CommError (past the deadline: DeadlineExceeded)
                kind = DeadlineExceeded if wd.fired or deadline.expired() else CommError
                raise self._err(kind, op, torch_error_name(e), first_line(e)) from None


class TorchSubgroup(TorchCommunicator):
    """A group of the default process group's ranks: `dist.new_group` (PyTorch makes its NCCL
    communicator with ncclCommSplit where the parent's is bound to a device); calls pass group=."""

    def __init__(self, parent: TorchCommunicator, pg, ranks: list[int]) -> None:
        super().__init__()
        self.pg = self.group = pg
        self.rank, self.nranks = ranks.index(parent.rank), len(ranks)
        self.device, self.created = parent.device, True

    def destroy(self) -> None:
        if self.group is not None:
            dist.destroy_process_group(self.group)
        self.pg = self.group = None
        self.created = False

    def abort(self) -> None:
        try:
            if self.group is not None:
                private.abort_process_group(self.group)
        except Exception:  # aborting after a failure: whatever torch raises now changes nothing
            pass
        self.pg = self.group = None
        self.created = False


# a group's ranks in the trace's order, where this torch lets new_group keep it (2.12+); else sorted
_UNSORTED = {"sort_ranks": False} if "sort_ranks" in inspect.signature(dist.new_group).parameters else {}


def _after_copy(send, recv, call):
    """`call` alone in place; out of place `recv.copy_(send)` then `call`, both bound once."""
    if send is recv:
        return call
    copy = recv.copy_

    def launch():
        copy(send)
        call()
    return launch


def _ranks_per_root(plan: InitPlan) -> int:
    """TORCH_NCCL_RANKS_PER_ROOT per mode: PyTorch takes its scalable path only when world > this."""
    if plan.mode == "stock":
        return plan.ranks_per_root
    if plan.mode == "scoped" and plan.group is not None:
        return max(plan.nranks, plan.ranks_per_root)  # the user's workaround in one group
    if plan.mode == "scoped":
        return plan.ranks_per_root  # restart: scalable init under a fresh store prefix per init
    return max(plan.nranks, 128)


def _root_order(key: str) -> int:
    """Root number from 'UniqueNCCLID:<i>' keys; PyTorch's single broadcast key is root 0."""
    tail = key.rsplit("UniqueNCCLID:", 1)
    return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else 0
