"""NCCL through NVIDIA's nccl4py (GPU only).

One ID -> ncclCommInitRank semantics; a list -> ncclCommInitRankScalable. The config is
nonblocking, so init, collectives and finalize are polled against the deadline and the
communicator is aborted when it passes. In that mode a call may itself return "in
progress": we poll `get_async_error()` after every call before the next NCCL call
(issuing one earlier gives "Attempt to use communicator before the previous operation
returned ncclSuccess" and wrong results; shared/anchors/README.md).
"""
from __future__ import annotations

import os
import re
import time

import torch

from nccl_bench.bootstrap import exchange_for
from nccl_bench.comm.base import Communicator, InitPlan
from nccl_bench.deadline import Deadline
from nccl_bench.errors import CommError, DeadlineExceeded, UsageError

_POLL_S = 0.0005
# wait() spins this long before it sleeps between polls: ranks then see a collective end within
# microseconds of each other, and a timing loop that starts right after starts on every rank
# together (sleeping polls left ranks up to _POLL_S apart, about 10 us per op at 20 iterations)
_SPIN_S = 0.5


def _nccl():
    try:
        import nccl.core as nc
        from nccl.bindings import nccl as nb
    except ImportError as e:
        raise UsageError(f"the nccl backend needs nccl4py (pip install 'nccl4py[cu13]'): {e}") from None
    return nc, nb


def lib_error_name(nb, status) -> str:
    try:
        return "nccl" + nb.Result(int(status)).name
    except Exception:
        return f"ncclResult {status}"


def error_name(nb, exc) -> str:
    """The library's error name of an NCCLError (it carries the ncclResult_t as .status)."""
    status = getattr(exc, "status", None)
    if status is None:
        m = re.search(r"\((\d+)\)", str(exc))
        status = int(m.group(1)) if m else -1
    return lib_error_name(nb, status)


class NcclCommunicator(Communicator):
    name = "nccl"
    needs_gpu = True
    supports_graphs = True

    def __init__(self) -> None:
        super().__init__()
        self.nc, self.nb = _nccl()
        self.comm = None
        self.blocking = False
        self._ops = None

    def new_id(self) -> bytes:
        return bytes(self.nc.get_unique_id())

    # --- polling ---------------------------------------------------------------------
    def _status(self):
        return self.comm.get_async_error()

    def _settle(self, op: str, deadline: Deadline) -> None:
        """Poll until the last call left 'in progress'; raise on error or deadline."""
        nb = self.nb
        while True:
            st = self._status()
            if st == nb.Result.Success:
                return
            if st != nb.Result.InProgress:
                raise self._err(CommError, op, lib_error_name(nb, st), self._last_error())
            if deadline.expired():
                raise self._err(DeadlineExceeded, op, "ncclInProgress past the deadline",
                                f"{deadline.seconds:g}s")
            time.sleep(_POLL_S)

    def _last_error(self) -> str:
        try:
            return (self.comm.get_last_error() or "").strip()[:300]
        except Exception:
            return ""

    def _call(self, op: str, fn, *args, **kw):
        try:
            fn(*args, **kw)
        except self.nb.NCCLError as e:
            raise self._err(CommError, op, error_name(self.nb, e),
                            self._last_error()) from None
        if not self.blocking:
            self._settle(op, self._op_deadline)

    # --- lifecycle -------------------------------------------------------------------------
    def create(self, plan: InitPlan, deadline: Deadline) -> None:
        nc = self.nc
        self.rank, self.nranks = plan.rank, plan.nranks
        self.device = torch.device("cuda", plan.local_rank % max(torch.cuda.device_count(), 1))
        torch.cuda.set_device(self.device)
        for var, val in (("NCCL_ALGO", plan.algo), ("NCCL_PROTO", plan.proto)):
            if val:  # read by NCCL at each communicator's init
                os.environ[var] = val
        self.blocking = plan.blocking
        self.ids_used = exchange_for(plan, self.new_id, deadline)
        self.timings.exchange = self.ids_used.seconds
        if plan.before_create is not None:
            plan.before_create(self.ids_used)
        uids = [nc.UniqueId.from_bytes(b) for b in self.ids_used.ids]
        t0 = time.perf_counter()
        self._op_deadline = deadline
        try:
            self.comm = nc.Communicator.init(plan.nranks, plan.rank, uids if len(uids) > 1 else uids[0],
                                             nc.NCCLConfig(blocking=self.blocking))
        except self.nb.NCCLError as e:
            raise self._err(CommError, "init", error_name(self.nb, e)) from None
        if not self.blocking:
            self._settle("init", deadline)
        self.timings.create = time.perf_counter() - t0
        self._stream = torch.cuda.current_stream(self.device)
        self.created = True

    def destroy(self) -> None:
        if self.comm is None:
            return
        try:
            if not self.blocking:
                self.comm.finalize()
                self._settle("destroy", Deadline(max(self._op_deadline.remaining(), 30.0)))
            self.comm.destroy()
        finally:
            self.comm = None
            self.created = False

    def abort(self) -> None:
        if self.comm is None:
            return
        try:
            self.comm.abort()
        except Exception:
            pass
        finally:
            self.comm = None
            self.created = False

    # --- collectives ------------------------------------------------------------------------
    def _stream_arg(self) -> int:
        return torch.cuda.current_stream().cuda_stream

    def set_deadline(self, deadline: Deadline) -> None:
        """Deadline for the 'in progress' polls of the calls that follow."""
        self._op_deadline = deadline

    def all_reduce(self, send, recv, op):
        self._call("all_reduce", self.comm.allreduce, send, recv, self._op(op), stream=self._stream_arg())

    def all_gather(self, send, recv):
        self._call("all_gather", self.comm.allgather, send, recv, stream=self._stream_arg())

    def reduce_scatter(self, send, recv, op):
        self._call("reduce_scatter", self.comm.reduce_scatter, send, recv, self._op(op), stream=self._stream_arg())

    def broadcast(self, send, recv, root):
        self._call("broadcast", self.comm.broadcast, send, recv, root, stream=self._stream_arg())

    def reduce(self, send, recv, op, root):
        self._call("reduce", self.comm.reduce, send, recv, self._op(op), root, stream=self._stream_arg())

    def alltoall(self, send, recv):
        self._call("alltoall", self.comm.alltoall, send, recv, stream=self._stream_arg())

    def sendrecv(self, send, recv, to, frm):
        s = self._stream_arg()
        nc = self.nc

        def pair():
            with nc.group():
                self.comm.send(send, to, stream=s)
                self.comm.recv(recv, frm, stream=s)
        self._call("sendrecv", pair)

    def alloc(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """ncclMemAlloc'd memory, as nccl-tests (>= 2.19) allocates its buffers: cuMem-backed, so NCCL
        can register it, e.g. for collectives captured in CUDA graphs. Freed with the tensor."""
        from nccl.core.interop.torch import empty
        return empty(numel, dtype=dtype, device=self.device).zero_()

    def prepare(self, collective, send, recv, op=None, root=None, to=None, frm=None, stream=None):
        """Resolve pointers, counts, dtype, op and stream once; each launch is one raw binding call.

        Meant for a blocking communicator (InitPlan(blocking=True)): a nonblocking one needs a
        get_async_error() poll after every call, which this path skips.
        """
        from nccl.core.buffer import NcclBuffer
        nb = self.nb
        comm = self.comm._comm
        st = int((stream or torch.cuda.current_stream(self.device)).cuda_stream)
        s, r = NcclBuffer(send), NcclBuffer(recv)
        sp, rp, dt, sc, rc = s.ptr, r.ptr, int(s.dtype), int(s.count), int(r.count)
        red = int(self._op(op)) if op is not None else 0
        n = self.nranks
        calls = {
            "all_reduce": lambda: nb.all_reduce(sp, rp, sc, dt, red, comm, st),
            "all_gather": lambda: nb.all_gather(sp, rp, sc, dt, comm, st),
            "reduce_scatter": lambda: nb.reduce_scatter(sp, rp, rc, dt, red, comm, st),
            "broadcast": lambda: nb.broadcast(sp, rp, rc, dt, root, comm, st),
            "reduce": lambda: nb.reduce(sp, rp, sc, dt, red, root, comm, st),
            "alltoall": lambda: nb.allto_all(sp, rp, sc // n, dt, comm, st),
        }
        if collective == "sendrecv":
            send_, recv_, gs, ge, cnt = nb.send, nb.recv, nb.group_start, nb.group_end, sc

            def launch():
                gs()
                send_(sp, cnt, dt, to, comm, st)
                recv_(rp, cnt, dt, frm, comm, st)
                ge()
        else:
            launch = calls[collective]
        if not self.blocking:
            return lambda: self._call(collective, launch)

        def checked():
            try:
                launch()
            except nb.NCCLError as e:
                raise self._err(CommError, collective, error_name(nb, e), self._last_error()) from None
        return checked

    def _op(self, op: str):
        return {"sum": self.nc.SUM, "prod": self.nc.PROD, "min": self.nc.MIN,
                "max": self.nc.MAX, "avg": self.nc.AVG}[op]

    def wait(self, deadline: Deadline, op: str = "collective") -> None:
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(self.device))
        nb = self.nb
        spin_until = time.perf_counter() + _SPIN_S
        while not ev.query():
            st = self._status()
            if st not in (nb.Result.Success, nb.Result.InProgress):
                raise self._err(CommError, op, lib_error_name(nb, st), self._last_error())
            if deadline.expired():
                raise self._err(DeadlineExceeded, op, "collective did not complete", f"{deadline.seconds:g}s")
            if time.perf_counter() > spin_until:
                time.sleep(_POLL_S)
