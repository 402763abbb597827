"""`init --leak-check N`: a bare loop of N inits (init, one all_reduce, destroy) sampling the same
resources as stress's leak watch, with none of the stress machinery, to tell what NCCL (or
gloo, or PyTorch) keeps per init from what the harness keeps.

Each rank samples every `every` inits and folds the samples into its own trends; at the end the
trends (a handful of sums each, not the samples) travel to rank 0, whose command judges them with
nccl_bench.core.leaks, as stress's are. Destroys run behind the loop, at most `depth` in flight (the
oldest waited for first), as in stress and in a plain loop that hands destroys to threads: an NCCL
destroy takes about 0.5 s (nccl_bench.comm.reaper), so a serial loop of 5,000 would take 40 minutes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from nccl_bench.comm import InitPlan, gpu_count
from nccl_bench.comm.lifetime import communicator
from nccl_bench.comm.reaper import Reaper
from nccl_bench.core import launch, resources
from nccl_bench.core.resources import Trends, default_warmup
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import CommError, at_least


@dataclass
class LeakCheckOptions:
    inits: int  # the loop's length
    every: int = 100  # inits between samples
    warmup: int | None = None  # inits whose samples are left out (None: a fifth, at most 1,000)
    mode: str = "scoped"
    depth: int = 8  # destroys in flight (0: serial)

    def __post_init__(self):
        at_least("--destroys-in-flight", self.depth, 0)
        at_least("--leak-check", self.inits, 1, " inits")
        at_least("--leak-every", self.every, 1)
        if self.warmup is None:
            self.warmup = default_warmup(self.inits)
        at_least("--leak-warmup", self.warmup, 0)


def loop(job, backend: str, ranks_per_root: int, timeout: float, opts: LeakCheckOptions,
         progress=None) -> tuple[Trends, dict]:
    """Run the loop on this rank. Returns its trends (samples after the warm-up) and counts
    {inits, failed, seconds}."""
    import torch  # on the rank only
    trends = Trends(opts.warmup)
    device = launch.local_device(job.ident.local_rank, gpu_count()) if backend != "gloo" else None
    failed, t0 = 0, time.perf_counter()
    reaper = Reaper(timeout + 10.0) if opts.depth else None
    for i in range(opts.inits):
        if reaper is not None and i > opts.depth:
            failed += not _ok(reaper.outcome(i - opts.depth - 1))
        plan = InitPlan(rank=job.rank, nranks=job.nranks, mode=opts.mode, ranks_per_root=ranks_per_root,
                        counter=i, store=job.store, local_rank=job.ident.local_rank, namespace="leak")
        try:
            with communicator(backend, plan, Deadline(timeout), reaper=reaper, key=i) as comm:
                x = torch.ones(1, device=comm.device)
                comm.all_reduce(x, x, "sum")
                comm.wait(Deadline(timeout), "all_reduce")
                ids = getattr(comm, "ids_used", None)  # torch exchanges its IDs itself
                key = ids.store_key() if ids is not None else None
                if key and opts.mode != "stock":  # every rank has read it: the collective ran
                    job.store.raw.delete_key(key)
        except CommError:
            failed += 1
        if i % opts.every == opts.every - 1:
            trends.add(job.rank, i, resources.sample(device, job.store.raw if job.rank == 0 else None))
        if progress and i % max(opts.inits // 10, 1) == 0:
            progress(i)
    for key in reaper.pending() if reaper is not None else []:
        failed += not _ok(reaper.outcome(key))
    return trends, {"inits": opts.inits, "failed": failed, "seconds": time.perf_counter() - t0}


def _ok(outcome) -> bool:
    return outcome is None or outcome.ok


def gathered(job, trends: Trends, counts: dict, timeout: float, into: Trends) -> list[dict] | None:
    """Rank 0: every rank's trends merged `into` one, and every rank's counts; None on the other ranks."""
    every = job.store.all_gather_obj("leakcheck/trends", {"trends": trends.state(), "counts": counts},
                                     timeout=timeout)
    if job.rank != 0:
        return None
    for got in every:
        into.merge(got["trends"])
    return [{"rank": r, **got["counts"]} for r, got in enumerate(every)]
