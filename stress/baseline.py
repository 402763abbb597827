"""The raw rate to compare a stress run with: bare cycles, measured in the same job.

No skew, no NVTX, no journal, no gathers, no barriers between cycles, scoped keys:
`init_destroy` cycles only create and destroy; `init_verify_destroy` cycles also run
the verification collective once (on NCCL that first collective sets up connections,
a large part of a round), so stress's own overhead is the gap to that second rate.
"""
from __future__ import annotations

import time

from nccl_bench.comm import InitPlan
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import CommError
from nccl_bench.comm.lifetime import communicator
from stress.verify import Verification


def measure(job, backend: str, ranks_per_root: int, cycles: int, timeout: float, verify: Verification) -> dict:
    """Rates (cycles/s) on this rank; errors end that kind of cycle early and are reported."""
    out = {"cycles": cycles}
    counter = 0
    for kind, with_verify in (("init_destroy", False), ("init_verify_destroy", True)):
        job.store.barrier(f"stress/baseline/{kind}", timeout=timeout + 60)
        t0, done, error = time.perf_counter(), 0, None
        for _ in range(cycles):
            plan = InitPlan(rank=job.rank, nranks=job.nranks, mode="scoped", ranks_per_root=ranks_per_root,
                            counter=counter, store=job.store, local_rank=job.ident.local_rank,
                            namespace="stress-baseline")
            counter += 1
            deadline = Deadline(timeout)
            try:
                with communicator(backend, plan, deadline) as comm:
                    if with_verify:
                        send, recv = verify.buffers(comm.device)
                        verify.run(comm, send, recv)
                        comm.wait(deadline, verify.name)
                done += 1
            except CommError as e:
                error = str(e)
                break
        seconds = time.perf_counter() - t0
        out[f"{kind}_per_s"] = done / seconds if done and seconds > 0 else None
        out[f"{kind}_error"] = error
    return out
