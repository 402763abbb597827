"""`bench`: nccl-tests' *_perf for every collective, with nccl-tests' options and output.

    python -m nccl_bench bench -b 8 -e 8G -f 2 --collective all_reduce --algo ring,tree

Per init mode and algorithm one communicator (blocking config; NCCL_ALGO fixed before
it is created), then one sweep per collective and (type, op, root) (nccl_bench.measure.sweep). Rank
0 prints a table per collective laid out like nccl-tests' and writes one JSON file in
nccl-tests' -J layout (nccl_bench.records.bench): its rows carry collective, algo and init
beside nccl-tests' fields, and one metadata block sits beside nccl-tests' keys.
"""
from __future__ import annotations

from nccl_bench.measure import collectives
from nccl_bench.measure import fits
from nccl_bench.core import optionfields, results
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job.driver import run_job
from nccl_bench.job.spec import JobSpec, WorkerRef
from nccl_bench.bench.worker import worker
from nccl_bench.core.errors import UsageError
from nccl_bench.bench.split import from_env as split_from_env, groups
from nccl_bench.bench.options import BenchOptions


def parser() -> Parser:
    p = Parser(prog=prog("bench"), description="nccl-tests-style bandwidth sweep for every collective")
    optionfields.add_arguments(p, BenchOptions)  # every bench option, as BenchOptions declares it
    add_job_args(p, init_default="regular", allow_all=True, short_timeout=True)
    return p


def options(a) -> BenchOptions:
    given = optionfields.given(a, BenchOptions)
    if given["split"] is None:
        given["split"] = split_from_env()
    if given["min_bw"] is None:
        given["min_bw"] = min_bw_from_env()
    return BenchOptions(job=job_options(a, allow_all=True), **given)


def min_bw_from_env() -> float | None:
    """nccl-tests' NCCL_TESTS_MIN_BW: the average busbw (GB/s) below 0.9 x which the run fails."""
    import os
    text = os.environ.get("NCCL_TESTS_MIN_BW", "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"NCCL_TESTS_MIN_BW: '{text}' is not a bandwidth in GB/s") from None


# --- the driver (before any rank runs) -------------------------------------------------------------
def check_fits(o: BenchOptions, nranks: int) -> None:
    """Sizes that cannot fit in one GPU's memory (or the CPU's share) fail before launching."""
    need = fits.need_bytes(o.collective, o.maxbytes, o.types(), nranks, o.unalign,
                           check_temporaries=o.check > 0 and not o.torch_free)
    if (why := fits.why_not(o.job.backend, need, nranks)):
        raise UsageError(f"-e/--maxbytes {o.maxbytes}: {why}")


def check_ranks(o: BenchOptions, nranks: int, named: list[str]) -> None:
    """The root exists in every (split) group; a collective named on the command line runs on them."""
    sizes = sorted({len(m) for m in groups(o.split, nranks).values()})
    where = f"this {nranks}-rank job" if o.split is None else f"the smallest split group ({sizes[0]} ranks)"
    if o.root != "all" and o.root >= sizes[0]:
        raise UsageError(f"-r/--root {o.root} is not a rank of {where}")
    for name in o.collective:
        why = next(filter(None, (collectives.get(name).unfit(n) for n in sizes)), None)
        if why and name in named:
            raise UsageError(f"--collective {name}: {why}")


def main(argv: list[str]) -> int:
    """The driver, or a rank of a user's launcher: the options checked, then the job (nccl_bench.job.runner)."""
    a = parser().parse_args(argv)
    o = options(a)
    nranks = o.job.world_ranks()
    check_ranks(o, nranks, a.collective if isinstance(a.collective, list) else a.collective.split(","))
    results.check_writable(o.json, "-J/--json", kind="bench")
    check_fits(o, nranks)
    return run_job(JobSpec("bench", o.job, WorkerRef.of(worker, o), result=o.json,
                           torch_free=o.torch_free))


