"""One small communicator interface; three backends implement it.

Lifecycle is explicit (create, destroy, abort), never hidden in __del__, because
destroying a communicator is itself collective. The harness (nccl_bench.comm.lifetime) owns
it: destroy on success, abort on failure.

Buffers are torch tensors on `self.device` (a nccl communicator made for a rank without torch: arrays of
nccl_bench.core.cudadriver, with the same calls). Collective methods enqueue; `wait()` blocks
until everything enqueued has finished, bounded by the deadline, and raises CommError /
DeadlineExceeded. Out-of-place when `send is not recv`, in-place otherwise.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable

from nccl_bench.comm.plan import InitPlan, InitTimings  # noqa: F401 (backends import InitPlan from here)
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import UsageError
from nccl_bench.core.launch import node_name

if TYPE_CHECKING:  # torch is loaded by the backends that use it, when they are made
    import torch

EXCHANGE_ROUND_S = 60.0  # exchange(): a middle round waits this long at most (bench's default -T)
# Which keyword arguments each collective method takes beyond (send, recv).
_PREPARE_ARGS = {"all_reduce": ("op",), "all_gather": (), "reduce_scatter": ("op",), "broadcast": ("root",),
                 "reduce": ("op", "root"), "alltoall": (), "sendrecv": ("to", "frm"), "exchange": ("rounds", "native")}


def torch_defaults() -> None:
    """Before a torch process group is made: torch's flight recorder off unless the user set its size.
    It keeps about 250 B per process group for good (its per-group status map), so a run that makes one
    group per round grows with rounds; our own flight records and diagnosis stand in for it."""
    if "TORCH_NCCL_TRACE_BUFFER_SIZE" not in os.environ:
        os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "0")


class Communicator(ABC):
    """A communicator over `nranks` ranks, created from an InitPlan within a deadline."""

    name: str = "?"
    needs_gpu: bool = False
    supports_graphs: bool = False

    def __init__(self) -> None:
        self.rank = -1
        self.nranks = 0
        self.host = node_name()
        self.device = self._initial_device()
        self.timings = InitTimings()
        self.ids_used = None  # bootstrap.IdExchange of the last init, when this side exchanged
        self.created = False

    def _initial_device(self):
        """The device before create() names one: the CPU, as torch names it."""
        return _cpu()

    # --- lifecycle -------------------------------------------------------------
    @abstractmethod
    def create(self, plan: InitPlan, deadline: Deadline) -> None:
        """Exchange IDs (unless the library does) and create the communicator."""

    @abstractmethod
    def destroy(self) -> None:
        """Collective, orderly teardown after success."""

    @abstractmethod
    def abort(self) -> None:
        """Local teardown after failure; never blocks on peers."""

    def split(self, groups: list[list[int]], deadline: Deadline) -> list["Communicator | None"] | None:
        """Sub-communicators of this one, one per group (this communicator's ranks, in group-rank order),
        made collectively: every rank calls it with the same groups in the same order and gets None for
        a group it is not in. None: this backend makes none; the caller makes each group a communicator
        of its own through the bootstrap (nccl_bench.comm.lifetime.subcommunicators)."""
        return None

    # --- collectives (enqueue) ---------------------------------------------------
    @abstractmethod
    def all_reduce(self, send: torch.Tensor, recv: torch.Tensor, op: str) -> None: ...

    @abstractmethod
    def all_gather(self, send: torch.Tensor, recv: torch.Tensor) -> None: ...

    @abstractmethod
    def reduce_scatter(self, send: torch.Tensor, recv: torch.Tensor, op: str) -> None: ...

    @abstractmethod
    def broadcast(self, send: torch.Tensor, recv: torch.Tensor, root: int) -> None: ...

    @abstractmethod
    def reduce(self, send: torch.Tensor, recv: torch.Tensor, op: str, root: int) -> None: ...

    @abstractmethod
    def alltoall(self, send: torch.Tensor, recv: torch.Tensor) -> None: ...

    @abstractmethod
    def sendrecv(self, send: torch.Tensor, recv: torch.Tensor, to: int, frm: int) -> None: ...

    @abstractmethod
    def exchange(self, send: torch.Tensor, recv: torch.Tensor, rounds: tuple, native: tuple | None = None) -> None:
        """Point-to-point rounds (collectives.Move tuples), each one group, in order: what nccl-tests
        runs for gather, scatter, alltoallv and hypercube. `native` (name, root), where given, is the
        library's single call for the same (ncclGather, ncclScatter), for a backend that has it."""

    @abstractmethod
    def wait(self, deadline: Deadline, op: str = "collective") -> None:
        """Block until enqueued work finished, or raise CommError / DeadlineExceeded."""

    # --- buffers and the fast launch path ---------------------------------------------
    def alloc(self, numel: int, dtype) -> torch.Tensor:
        """A zeroed benchmark buffer on this communicator's device, of a torch dtype or its name (a backend
        may use its library's own allocator, as nccl-tests uses ncclMemAlloc)."""
        import torch
        return torch.zeros(numel, dtype=getattr(torch, dtype) if isinstance(dtype, str) else dtype, device=self.device)

    # --- streams and events: the timed loop's, on GPU (None and no-ops on CPU) ---------------
    def new_stream(self):
        """A stream of this communicator's device for the timed loops; None on CPU."""
        if self.device.type != "cuda":
            return None
        import torch
        return torch.cuda.Stream(self.device)

    def new_event(self, enable_timing: bool = False):
        import torch
        return torch.cuda.Event(enable_timing=enable_timing)

    def on_stream(self, stream):
        """Work that names no stream goes to `stream` meanwhile (torch's current stream)."""
        if stream is None:
            return contextlib.nullcontext()
        import torch
        return torch.cuda.stream(stream)

    def prepare(self, collective: str, send: torch.Tensor, recv: torch.Tensor, op: str | None = None,
                root: int | None = None, to: int | None = None, frm: int | None = None,
                stream=None, rounds: tuple | None = None, native: tuple | None = None) -> Callable[[], None]:
        """A zero-argument launcher of one collective on fixed buffers, for timing loops.

        This default calls the method above each time (the stream is the caller's current
        one); a backend may resolve pointers, counts and the stream once instead.
        """
        method = getattr(self, collective)
        extra = {"op": op, "root": root, "to": to, "frm": frm, "rounds": rounds, "native": native}
        kw = {k: v for k, v in extra.items() if k in _PREPARE_ARGS[collective]}
        return lambda: method(send, recv, **kw)

    def launch_loop(self, collective: str, views, stream=None, **args):
        """The timed loop over `views` ([(send, recv)] per step): a nccl_bench.comm.launchloop loop
        whose run(first, n) makes iterations first.. on step i % len(views). This default loops
        over prepare()'d launchers in Python; a backend may run the loop in compiled code."""
        from nccl_bench.comm.launchloop import PythonLoop
        return PythonLoop([self.prepare(collective, s, r, stream=stream, **args) for s, r in views])

    def launch_path(self) -> str:
        """How launch_loop() launches, for the results' metadata."""
        return "python"

    def register(self, buffers: list[torch.Tensor], mode: int) -> list:
        """-R/--local_register: register the benchmark buffers with the communicator (1 local,
        2 symmetric); returns handles with close(). Only the nccl backend registers."""
        raise UsageError(f"-R/--local_register {mode} needs --backend nccl; the {self.name} backend registers nothing")

    # --- what the library reports --------------------------------------------------
    def algo_used(self) -> str | None:
        """The algorithm the library reports it used, where it reports one."""
        return None

    def _err(self, cls, op: str, lib_error: str, detail: str = ""):
        return cls(op, lib_error, detail, rank=self.rank, host=self.host)


# An exchange's `native` for rounds launched as PyTorch launches all_to_all_single with split sizes: each round's
# sends and receives in one NCCL group, its own rank's among them (no copy-engine copy, as nccl-tests makes)
ONE_GROUP = ("one group", None)


def _cpu():
    import torch
    return torch.device("cpu")


def own_copies(moves, rank: int, send: torch.Tensor, recv: torch.Tensor) -> list[tuple]:
    """The round's sends to and receives from `rank` itself, paired in order: a local copy each, as
    (send move, receive move, source view, destination view)."""
    sends = [m for m in moves if m.op == "send" and m.peer == rank]
    recvs = [m for m in moves if m.op == "recv" and m.peer == rank]
    return [(s, r, (send if s.buf == "send" else recv)[s.at:s.at + s.length], recv[r.at:r.at + r.length])
            for s, r in zip(sends, recvs)]


def split_round(moves, rank: int, send: torch.Tensor, recv: torch.Tensor):
    """(local copies as (source, destination) views, remote moves) of one round; a copy onto itself
    (in place) is dropped."""
    copies = [(src, dst) for _, _, src, dst in own_copies(moves, rank, send, recv) if src.data_ptr() != dst.data_ptr()]
    return copies, [m for m in moves if m.peer != rank]


def round_views(send: torch.Tensor, recv: torch.Tensor, rounds: tuple, rank: int):
    """For backends that move host-visible views: per round (local copies, [(op, peer, view)], last
    round?). In place the send view is copied first, so that sends read what the buffer held before
    anything arrived."""
    if overlaps(send, recv):
        send = send.clone()
    for k, moves in enumerate(rounds):
        copies, remote = split_round(moves, rank, send, recv)
        views = [(m.op, m.peer, (send if m.op == "send" and m.buf == "send" else recv)[m.at:m.at + m.length])
                 for m in remote]
        yield copies, views, k == len(rounds) - 1


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views share memory (in place)."""
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def id_prefix(ids: list[bytes]) -> str:
    """A store prefix derived from the whole ID list: ranks with different lists never meet."""
    h = hashlib.blake2b(digest_size=8)
    for b in ids:
        h.update(b)
    return h.hexdigest()
