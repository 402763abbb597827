"""What a communicator init is given (InitPlan) and what it measured (InitTimings).

Plain records without torch, so that option parsing and the commands' modules can name
them without paying for the torch import; the backends (base.py) use them as they are.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from nccl_bench.comm.scenario import GroupSlot


@dataclass
class InitPlan:
    """What one communicator init needs: who, which key layout, which counter."""

    rank: int
    nranks: int
    mode: str  # regular | stock | scoped
    ranks_per_root: int
    counter: int  # per-communicator init counter (same sequence on every rank)
    store: object  # nccl_bench.job.store.JobStore
    local_rank: int = 0
    algo: str | None = None  # NCCL_ALGO for this communicator (fixed before init)
    proto: str | None = None  # NCCL_PROTO
    blocking: bool = False  # nccl: blocking config (bench -z) instead of nonblocking
    cta_policy: int | None = None  # nccl: ncclConfig_t.CTAPolicy (bench -x); None: NCCL's default, unset
    namespace: str = "ids"  # store namespace for ID keys (a command may scope its own)
    # Called with the IdExchange between the ID exchange and the create, by backends that
    # exchange IDs themselves (nccl, gloo); raising skips the create (stress --check-ids).
    before_create: Callable[[object], None] | None = None
    # same-group (nccl_bench.comm.scenario): the process group this init belongs to; None: restart,
    # every init a new group on the same store.
    group: GroupSlot | None = None
    # nccl: buffers, streams and events of the CUDA driver's own (nccl_bench.core.cudadriver), for a rank
    # that loads no torch; else torch's
    torch_free: bool = False


@dataclass
class InitTimings:
    """Seconds of one init on this rank. `init` is the whole create call as its caller waits for it, timed
    from outside by the harness (comm.lifetime) the same way for every backend; `exchange` and `create` are
    the backend's own timers inside it (exchange None when the library exchanges itself), and `rest` is
    what they do not cover: a slowdown anywhere in the create call shows in `init`."""

    exchange: float | None = None
    create: float | None = None
    init: float | None = None

    @property
    def rest(self) -> float | None:
        if self.init is None:
            return None
        return max(self.init - (self.exchange or 0.0) - (self.create or 0.0), 0.0)


_USERS = {var: os.environ.get(var) for var in ("NCCL_ALGO", "NCCL_PROTO")}  # as the process started


def choose_algorithm(plan: InitPlan) -> None:
    """Before a communicator's init, which NCCL reads NCCL_ALGO and NCCL_PROTO at: the plan's where it names one,
    else the user's own, so that a communicator forced to one algorithm leaves the next one NCCL's choice."""
    for var, val in (("NCCL_ALGO", plan.algo), ("NCCL_PROTO", plan.proto)):
        want = val or _USERS[var]
        if want is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = want
