"""The harness owns communicator lifetime: destroy on success, abort on failure.

Always: also on a deadline, an exception in the caller's body, and Ctrl-C. With a
Reaper the teardown still follows that rule but runs in the background (nccl_bench.comm.reaper).
"""
from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from nccl_bench.comm import InitPlan, new_communicator
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.streaming import Quantiles
from nccl_bench.comm.reaper import NCCL_PROXY_POLL_MS, teardown

if TYPE_CHECKING:  # the interface needs torch; the backend imports it when it is created
    from nccl_bench.comm.base import Communicator


@contextlib.contextmanager
def communicator(backend: str, plan: InitPlan, deadline: Deadline, on_close=None, reaper=None, key=None,
                 **payload):
    """Create a communicator for `plan` within `deadline`; yield it; tear it down.

    The create call is timed here, from outside, into `comm.timings.init`.
    `on_close(comm, ok, seconds)` is called after teardown with the destroy (or abort)
    time, so callers can time the destroy phase without owning it. With `reaper`, the
    teardown is handed to it under `key` (`payload` names it in NVTX ranges) and
    `seconds` is None: the caller reads the outcome from the reaper later.
    """
    comm: Communicator = new_communicator(backend)
    ok = False
    try:
        t0 = time.perf_counter()
        try:
            comm.create(plan, deadline)
        finally:  # the whole call as the caller waits for it (to failure, when it fails)
            comm.timings.init = time.perf_counter() - t0
        yield comm
        ok = True
    finally:
        if reaper is not None:
            reaper.submit(key, comm, ok, **payload)
            seconds = None
        else:
            t0 = time.perf_counter()
            teardown(comm, ok)
            seconds = time.perf_counter() - t0
        if on_close is not None:
            on_close(comm, ok, seconds)


@contextlib.contextmanager
def subcommunicators(parent, backend: str, groups: list[list[int]], plan_for, deadline: Deadline):
    """{index of group: sub-communicator} for the groups this rank is in, torn down (destroy on success,
    abort on failure) before the parent. By the parent's split where the backend has one (ncclCommSplit,
    PyTorch's new_group), else each group a communicator of its own made from `plan_for(index)` (its
    members' ID exchange in a namespace of the group's)."""
    made: dict[int, object] = {}
    ok = False
    with contextlib.ExitStack() as stack:
        children = parent.split(groups, deadline)
        try:
            if children is not None:
                made = {i: c for i, c in enumerate(children) if c is not None}
            else:
                for i, ranks in enumerate(groups):
                    if parent.rank in ranks:
                        made[i] = stack.enter_context(communicator(backend, plan_for(i), deadline))
            yield made
            ok = True
        finally:
            if children is not None:
                for child in reversed(list(made.values())):
                    teardown(child, ok)


def destroy_note(backend: str, seconds: list[float] | Quantiles) -> str | None:
    """One line on what destroy cost, and on NCCL backends why it cannot be much cheaper."""
    if not isinstance(seconds, Quantiles):
        folded = Quantiles()
        for s in seconds:
            folded.add(s)
        seconds = folded
    if not seconds.n:
        return None
    med = seconds.quantile(0.5) * 1e3
    line = f"destroy: median {med:.1f} ms, max {seconds.max * 1e3:.1f} ms over {seconds.n} teardowns"
    if backend in ("nccl", "torch"):
        line += (f"; ncclCommDestroy joins NCCL's proxy threads, which poll with a {NCCL_PROXY_POLL_MS} ms "
                 f"timeout (NCCL src/proxy.cc), so a destroy takes about {NCCL_PROXY_POLL_MS} ms at least")
    return line
