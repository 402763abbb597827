"""NCCL through NVIDIA's nccl4py (GPU only).

One ID -> ncclCommInitRank semantics; a list -> ncclCommInitRankScalable. The config is
nonblocking, so init, collectives and finalize are polled against the deadline and the
communicator is aborted when it passes. In that mode a call may itself return "in
progress": we poll `get_async_error()` after every call before the next NCCL call
(issuing one earlier gives "Attempt to use communicator before the previous operation
returned ncclSuccess" and wrong results; docs/validation.md#anchors).
"""
from __future__ import annotations

import time

from nccl_bench.comm import launchloop
from nccl_bench.comm.ncclnames import NATIVE_SINCE, SYMBOLS, error_name, lib_error_name, load as _nccl
from nccl_bench.comm.bootstrap import exchange_for
from nccl_bench.comm.base import ONE_GROUP, Communicator, InitPlan, own_copies
from nccl_bench.comm.nccldevice import DeviceSide
from nccl_bench.comm.plan import choose_algorithm
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.startmarks import mark
from nccl_bench.core import launch, private
from nccl_bench.core.errors import CommError, DeadlineExceeded, UsageError

_POLL_S = 0.0005
# wait() spins this long before it sleeps between polls: ranks then see a collective end within
# microseconds of each other, and a timing loop that starts right after starts on every rank
# together (sleeping polls left ranks up to _POLL_S apart, about 10 us per op at 20 iterations)
_SPIN_S = 0.5


class _CheckedLoop:
    """A compiled loop whose failures are CommErrors naming NCCL's error, like every other call."""

    def __init__(self, loop, comm: "NcclCommunicator", collective: str):
        self.loop, self.comm, self.collective, self.kind = loop, comm, collective, loop.kind
        self.record, self.gate, self.hook, self.hooks = loop.record, loop.gate, loop.hook, loop.hooks

    def run(self, first: int, n: int, **hooks) -> float:
        try:
            return self.loop.run(first, n, **hooks)
        except launchloop.LoopError as e:
            c = self.comm
            raise c._err(CommError, self.collective, lib_error_name(c.nb, e.code),
                         f"iteration {e.iteration}; {c._last_error()}") from None


class NcclCommunicator(DeviceSide, Communicator):
    name = "nccl"
    needs_gpu = True
    supports_graphs = True

    def __init__(self) -> None:
        super().__init__()
        self.nc, self.nb = _nccl()
        self.comm = None
        self.blocking = False
        self.cta_policy: int | None = None
        self._ops = None
        self.gpu = None  # torch-free: the device's nccl_bench.core.cudadriver.Gpu; None: torch's

    def _initial_device(self):
        return None  # named by create()

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
        except Exception:  # no last error to add: the caller's own message stands
            return ""

    # --- lifecycle -------------------------------------------------------------------------
    def create(self, plan: InitPlan, deadline: Deadline) -> None:
        nc = self.nc
        self.rank, self.nranks = plan.rank, plan.nranks
        if plan.torch_free:
            from nccl_bench.core import cudadriver
            self.gpu = cudadriver.local_gpu(plan.local_rank)
            self.device = self.gpu.device
        else:
            import torch
            self.device = torch.device("cuda", launch.local_device(plan.local_rank, torch.cuda.device_count()))
            torch.cuda.set_device(self.device)
        choose_algorithm(plan)
        self.blocking, self.cta_policy = plan.blocking, plan.cta_policy
        self.ids_used = exchange_for(plan, self.new_id, deadline)
        self.timings.exchange = self.ids_used.seconds
        if plan.before_create is not None:
            plan.before_create(self.ids_used)
        uids = [nc.UniqueId.from_bytes(b) for b in self.ids_used.ids]
        mark("ids")
        t0 = time.perf_counter()
        self._op_deadline = deadline
        try:
            self.comm = nc.Communicator.init(plan.nranks, plan.rank, uids if len(uids) > 1 else uids[0],
                                             self._config())
        except self.nb.NCCLError as e:
            raise self._err(CommError, "init", error_name(self.nb, e)) from None
        if not self.blocking:
            self._settle("init", deadline)
        self.timings.create = time.perf_counter() - t0
        mark("init")
        self.created = True

    def _config(self):
        """NCCL's config for this communicator and its splits: blocking or not, and a CTA policy where asked."""
        policy = {} if self.cta_policy is None else {"cta_policy": self.nc.CTAPolicy(self.cta_policy)}
        return self.nc.NCCLConfig(blocking=self.blocking, **policy)

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
        except Exception:  # aborting after a failure: whatever NCCL raises now changes nothing
            pass
        finally:
            self.comm = None
            self.created = False

    def split(self, groups: list[list[int]], deadline: Deadline) -> list:
        """Every group by ncclCommSplit, which every rank calls for every group, in order (a rank not in a
        group passes no color); the child's rank order is the group's (key = place in the group)."""
        out = []
        for ranks in groups:
            member = self.rank in ranks
            try:
                raw = self.comm.split(0 if member else None, ranks.index(self.rank) if member else 0,
                                      self._config())
            except self.nb.NCCLError as e:
                raise self._err(CommError, "split", error_name(self.nb, e)) from None
            child = None
            if member:
                child = NcclCommunicator()
                child.comm, child.blocking, child.cta_policy = raw, self.blocking, self.cta_policy
                child.rank, child.nranks, child.device = ranks.index(self.rank), len(ranks), self.device
                child.gpu, child.created, child._op_deadline = self.gpu, True, deadline
            if not self.blocking:
                (child or self)._settle("split", deadline)
            out.append(child)
        return out

    # --- collectives ------------------------------------------------------------------------
    def set_deadline(self, deadline: Deadline) -> None:
        """Deadline for the 'in progress' polls of the calls that follow."""
        self._op_deadline = deadline

    # Each collective is one prepare()'d launch: the same NCCL calls the timed loop makes.
    def all_reduce(self, send, recv, op):
        self.prepare("all_reduce", send, recv, op=op)()

    def all_gather(self, send, recv):
        self.prepare("all_gather", send, recv)()

    def reduce_scatter(self, send, recv, op):
        self.prepare("reduce_scatter", send, recv, op=op)()

    def broadcast(self, send, recv, root):
        self.prepare("broadcast", send, recv, root=root)()

    def reduce(self, send, recv, op, root):
        self.prepare("reduce", send, recv, op=op, root=root)()

    def alltoall(self, send, recv):
        self.prepare("alltoall", send, recv)()

    def sendrecv(self, send, recv, to, frm):
        self.prepare("sendrecv", send, recv, to=to, frm=frm)()

    def exchange(self, send, recv, rounds, native=None):
        self.prepare("exchange", send, recv, rounds=rounds, native=native)()

    def _calls(self, collective, send, recv, comm, op=None, root=None, to=None, frm=None, stream=None,
               rounds=None, native=None):
        """One launch as NCCL calls: [(nccl4py binding name, args)], resolved once (pointers,
        counts, dtype, op, stream); `comm` is the binding's Comm, or its address for C."""
        st = int((stream or self._current_stream()).cuda_stream)
        (sp, dt, sc), (rp, _, rc) = self._buffer(send), self._buffer(recv)
        red = int(self._op(op)) if op is not None else 0
        if collective == "exchange" and native == ONE_GROUP:
            return self._round_calls(rounds, send, recv, sp, rp, dt, comm, st, own_in_group=True)
        if collective == "exchange" and native and int(self.nb.get_version()) >= NATIVE_SINCE:
            name, at = native  # as nccl-tests 2.19.6 calls them: count = the per-rank chunk
            return [(name, (sp, rp, sc if name == "gather" else rc, dt, at, comm, st))]
        if collective == "exchange":  # the rounds, as nccl-tests runs them before NCCL 2.28
            return self._round_calls(rounds, send, recv, sp, rp, dt, comm, st)
        return {
            "all_reduce": lambda: [("all_reduce", (sp, rp, sc, dt, red, comm, st))],
            "all_gather": lambda: [("all_gather", (sp, rp, sc, dt, comm, st))],
            "reduce_scatter": lambda: [("reduce_scatter", (sp, rp, rc, dt, red, comm, st))],
            "broadcast": lambda: [("broadcast", (sp, rp, rc, dt, root, comm, st))],
            "reduce": lambda: [("reduce", (sp, rp, sc, dt, red, root, comm, st))],
            "alltoall": lambda: [("allto_all", (sp, rp, sc // self.nranks, dt, comm, st))],
            "sendrecv": lambda: [("group_start", ()), ("send", (sp, sc, dt, to, comm, st)),
                                 ("recv", (rp, sc, dt, frm, comm, st)), ("group_end", ())],
        }[collective]()

    def _round_calls(self, rounds, send, recv, sp, rp, dt, comm, st, own_in_group=False) -> list:
        """Point-to-point rounds as NCCL calls: each round one group of ncclSend/ncclRecv. A copy to
        its own rank is a copy-engine copy before the round's group, as nccl-tests' cudaMemcpyAsync
        (NCCL's own send to self runs on a few SMs: 0.8 x at 64 MiB and up), left out in place
        where source and destination are one; `own_in_group`: a send and receive in the group, as PyTorch's."""
        esz, base, out = send.element_size(), {"send": sp, "recv": rp}, []
        for moves in rounds:
            for s, r, src, dst in [] if own_in_group else own_copies(moves, self.rank, send, recv):
                if src.data_ptr() != dst.data_ptr():
                    out.append(("copy", (dst.data_ptr(), src.data_ptr(), dst.numel() * esz, st)))
            moves = [m for m in moves if own_in_group or m.peer != self.rank]
            if moves:
                out += [("group_start", ())] + [
                    ("send", (base[m.buf] + m.at * esz, m.length, dt, m.peer, comm, st)) if m.op == "send"
                    else ("recv", (rp + m.at * esz, m.length, dt, m.peer, comm, st)) for m in moves] + [
                    ("group_end", ())]
        return out

    def prepare(self, collective, send, recv, op=None, root=None, to=None, frm=None, stream=None, rounds=None,
                native=None):
        """Each launch is one raw binding call per NCCL call (no per-call argument resolution). On a
        nonblocking communicator each call that stands alone or ends a group may return 'in progress'
        and is polled until it settles before the next one, as NCCL requires."""
        nb = self.nb
        calls = self._calls(collective, send, recv, self.comm._comm, op, root, to, frm, stream, rounds, native)
        bound = [(launchloop.memcpy if name == "copy" else getattr(nb, name), args) for name, args in calls]
        if not self.blocking:
            settles = [name not in ("group_start", "send", "recv", "copy") for name, _ in calls]

            def launch():
                for (fn, args), settle in zip(bound, settles):
                    fn(*args)
                    if settle:
                        self._settle(collective, self._op_deadline)
        elif len(bound) == 1:
            (fn, args), = bound

            def launch():
                fn(*args)
        else:
            def launch():
                for fn, args in bound:
                    fn(*args)

        def checked():
            try:
                launch()
            except nb.NCCLError as e:
                raise self._err(CommError, collective, error_name(nb, e), self._last_error()) from None
        return checked

    def launch_loop(self, collective, views, stream=None, **args):
        """The timed loop in C over NCCL's own entry points (nccl_bench.comm.launchloop), for a blocking
        communicator where the compiled loop and those entry points are available; else the Python loop."""
        if self.launch_path() == "compiled":
            comm = int(self.comm.ptr)
            steps = [[(self._fn_ptr(name), a) for name, a in self._calls(collective, s, r, comm, stream=stream, **args)]
                     for s, r in views]
            if all(fn for step in steps for fn, _ in step):  # never call address 0
                return _CheckedLoop(launchloop.CompiledLoop(steps), self, collective)
        return super().launch_loop(collective, views, stream=stream, **args)

    def launch_path(self) -> str:
        """Which loop launch_loop() runs: "compiled", or "python (why)"."""
        fn, why = launchloop.compiled()
        if not self.blocking:
            return "python (nonblocking communicator)"
        if fn is None:
            return f"python ({why})"
        return "compiled" if self._fn_ptr("all_reduce") else "python (nccl4py shows no NCCL function addresses)"

    def _fn_ptr(self, binding: str) -> int:
        """The address of the NCCL function that nccl4py's binding `binding` calls, in the libnccl it
        loaded (0 when nccl4py does not show it); looked up once per communicator."""
        ptrs = self.__dict__.setdefault("_fn_ptrs", {})
        if binding == "copy" and binding not in ptrs:
            try:
                ptrs[binding] = launchloop.memcpy_address()
            except (OSError, AttributeError):
                ptrs[binding] = 0
        if binding not in ptrs:
            symbol, ptrs[binding] = SYMBOLS[binding], 0
            for key in ("__" + symbol, symbol):
                try:
                    ptrs[binding] = private.nccl_function_pointer(key)
                except Exception:  # a private nccl4py helper: its absence means the Python loop
                    continue
                if ptrs[binding]:
                    break
        return ptrs[binding]

    def register(self, buffers, mode: int) -> list:
        """-R: 1 ncclCommRegister (local), 2 ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC
        (collective; NCCL >= 2.27). Returns handles with close(), to close before the buffers go."""
        if mode == 2 and int(self.nb.get_version()) < 22700:
            raise UsageError(f"-R/--local_register 2 (symmetric windows) needs NCCL >= 2.27; "
                             f"this libnccl is {int(self.nb.get_version())}")
        try:
            if mode == 1:
                return [self.comm.register_buffer(b) for b in buffers]
            return [self.comm.register_window(b, self.nc.WindowFlag.COLL_SYMMETRIC) for b in buffers]
        except self.nb.NCCLError as e:
            raise self._err(CommError, "register", error_name(self.nb, e), self._last_error()) from None

    def _op(self, op: str):
        return {"sum": self.nc.SUM, "prod": self.nc.PROD, "min": self.nc.MIN,
                "max": self.nc.MAX, "avg": self.nc.AVG}[op]

    def wait(self, deadline: Deadline, op: str = "collective") -> None:
        ev = self.new_event()
        ev.record(self._current_stream())
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
