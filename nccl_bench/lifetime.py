"""The harness owns communicator lifetime: destroy on success, abort on failure.

Always: also on a deadline, an exception in the caller's body, and Ctrl-C.
"""
from __future__ import annotations

import contextlib
import time

from nccl_bench.comm import InitPlan, new_communicator
from nccl_bench.comm.base import Communicator
from nccl_bench.deadline import Deadline


@contextlib.contextmanager
def communicator(backend: str, plan: InitPlan, deadline: Deadline, on_close=None):
    """Create a communicator for `plan` within `deadline`; yield it; tear it down.

    `on_close(comm, ok, seconds)` is called after teardown with the destroy (or abort)
    time, so callers can time the destroy phase without owning it.
    """
    comm: Communicator = new_communicator(backend)
    ok = False
    try:
        comm.create(plan, deadline)
        yield comm
        ok = True
    finally:
        t0 = time.perf_counter()
        if ok:
            try:
                comm.destroy()
            except BaseException:
                comm.abort()
                raise
        else:
            comm.abort()
        if on_close is not None:
            on_close(comm, ok, time.perf_counter() - t0)
