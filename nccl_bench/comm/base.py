"""One small communicator interface; three backends implement it.

Lifecycle is explicit (create, destroy, abort), never hidden in __del__, because
destroying a communicator is itself collective. The harness (nccl_bench.lifetime) owns
it: destroy on success, abort on failure.

Buffers are torch tensors on `self.device`. Collective methods enqueue; `wait()` blocks
until everything enqueued has finished, bounded by the deadline, and raises CommError /
DeadlineExceeded. Out-of-place when `send is not recv`, in-place otherwise.
"""
from __future__ import annotations

import hashlib
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

import torch

from nccl_bench.deadline import Deadline
from nccl_bench.scenario import GroupSlot

REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
# Which keyword arguments each collective method takes beyond (send, recv).
_PREPARE_ARGS = {"all_reduce": ("op",), "all_gather": (), "reduce_scatter": ("op",), "broadcast": ("root",),
                 "reduce": ("op", "root"), "alltoall": (), "sendrecv": ("to", "frm")}


@dataclass
class InitPlan:
    """What one communicator init needs: who, which key layout, which counter."""

    rank: int
    nranks: int
    mode: str  # regular | stock | scoped
    ranks_per_root: int
    counter: int  # per-communicator init counter (same sequence on every rank)
    store: object  # nccl_bench.store.JobStore
    local_rank: int = 0
    algo: str | None = None  # NCCL_ALGO for this communicator (fixed before init)
    proto: str | None = None  # NCCL_PROTO
    blocking: bool = False  # nccl: blocking config (bench -z) instead of nonblocking
    namespace: str = "ids"  # store namespace for ID keys (a command may scope its own)
    # Called with the IdExchange between the ID exchange and the create, by backends that
    # exchange IDs themselves (nccl, gloo); raising skips the create (stress --check-ids).
    before_create: Callable[[object], None] | None = None
    # same-group (nccl_bench.scenario): the process group this init belongs to; None: restart,
    # every init a new group on the same store.
    group: GroupSlot | None = None


@dataclass
class InitTimings:
    """Seconds per init phase on this rank; exchange is None when the library exchanges itself."""

    exchange: float | None = None
    create: float | None = None


class Communicator(ABC):
    """A communicator over `nranks` ranks, created from an InitPlan within a deadline."""

    name: str = "?"
    needs_gpu: bool = False
    supports_graphs: bool = False

    def __init__(self) -> None:
        self.rank = -1
        self.nranks = 0
        self.host = socket.gethostname()
        self.device = torch.device("cpu")
        self.timings = InitTimings()
        self.ids_used = None  # bootstrap.IdExchange of the last init, when this side exchanged
        self.created = False

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
    def wait(self, deadline: Deadline, op: str = "collective") -> None:
        """Block until enqueued work finished, or raise CommError / DeadlineExceeded."""

    # --- buffers and the fast launch path ---------------------------------------------
    def alloc(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """A zeroed benchmark buffer on this communicator's device (a backend may use its
        library's own allocator, as nccl-tests uses ncclMemAlloc)."""
        return torch.zeros(numel, dtype=dtype, device=self.device)

    def prepare(self, collective: str, send: torch.Tensor, recv: torch.Tensor, op: str | None = None,
                root: int | None = None, to: int | None = None, frm: int | None = None,
                stream=None) -> Callable[[], None]:
        """A zero-argument launcher of one collective on fixed buffers, for timing loops.

        This default calls the method above each time (the stream is the caller's current
        one); a backend may resolve pointers, counts and the stream once instead.
        """
        method = getattr(self, collective)
        extra = {"op": op, "root": root, "to": to, "frm": frm}
        kw = {k: v for k, v in extra.items() if k in _PREPARE_ARGS[collective]}
        return lambda: method(send, recv, **kw)

    # --- what the library reports --------------------------------------------------
    def algo_used(self) -> str | None:
        """The algorithm the library reports it used, where it reports one."""
        return None

    def _err(self, cls, op: str, lib_error: str, detail: str = ""):
        return cls(op, lib_error, detail, rank=self.rank, host=self.host)


def id_prefix(ids: list[bytes]) -> str:
    """A store prefix derived from the whole ID list: ranks with different lists never meet."""
    h = hashlib.blake2b(digest_size=8)
    for b in ids:
        h.update(b)
    return h.hexdigest()
