"""What a process pays once, before its first communicator: CUDA's start on its device and the library's
first init (NCCL reads its environment, probes the node and loads its kernels into the device's context).
A command whose deadline measures communicators (stress's rounds) pays it here first, timed on its own,
so that the deadline measures what it names: on a node of four GPUs that cost alone can outlast a round's.

It is paid by a communicator of this rank alone, created and destroyed through the same backend and
harness as every other, so that whatever a backend does at its first init is done, and nothing that
depends on a peer is: a slow or missing peer is the rounds' to judge, not the start's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from nccl_bench.comm.plan import InitPlan
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import CommError

START_FLOOR_S = 60.0  # the start's own bound, unless --timeout is longer: a device's first start can take tens
# of seconds where no daemon keeps the driver loaded (nvidia-persistenced)


@dataclass
class StartCost:
    """This rank's start: its seconds, as the caller waited for them, or the error that ended it."""

    seconds: float
    error: dict | None = None

    def as_dict(self) -> dict:
        return {"seconds": round(self.seconds, 4), "error": self.error}


def start_bound(timeout: float) -> float:
    return max(timeout, START_FLOOR_S)


def pay_once(backend: str, job, timeout: float) -> StartCost:
    """Create and destroy a communicator of this rank alone on `job`'s store, within the start's bound."""
    from nccl_bench.comm.lifetime import communicator
    plan = InitPlan(rank=0, nranks=1, mode="regular", ranks_per_root=1, counter=0, store=job.store,
                    local_rank=job.ident.local_rank, namespace=f"start/{job.rank}")
    t0 = time.perf_counter()
    try:
        with communicator(backend, plan, Deadline(start_bound(timeout))):
            pass
    except CommError as e:
        error = e.as_dict()
        error.update(rank=job.rank, host=job.ident.host)
        return StartCost(time.perf_counter() - t0, error)
    return StartCost(time.perf_counter() - t0)
