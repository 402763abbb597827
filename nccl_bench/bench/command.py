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
from nccl_bench.core import launch, results
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job.runner import run_job
from nccl_bench.core.errors import UsageError
from nccl_bench.bench.split import from_env as split_from_env, groups
from nccl_bench.bench.options import ALGOS, BenchOptions
from nccl_bench.measure.vocabulary import ALL_TYPES, DTYPES, OPS, parse_size
from nccl_bench.bench.worker import worker


# nccl-tests' integer flags of what a point keeps and shows: (short, long, help); default 0 (1 for -N and -m)
INTEGER_FLAGS = (
    ("-N", "--run_cycles", "run the sweep N times on the same buffers, each cycle printed and kept (default 1)"),
    ("-C", "--report_cputime", "1: the time column is the host (CPU) time per launch; JSON key cpu_time (default 0)"),
    ("-R", "--local_register", "register the buffers with NCCL: 0 no, 1 local (ncclCommRegister), 2 symmetric "
     "windows (NCCL >= 2.27); nccl backend only (default 0)"),
    ("-m", "--agg_iters", "operations launched back to back per timed iteration (default 1); time is per operation"),
    ("-I", "--per_iter_timing", "1: time every iteration (CUDA events between iterations; on gloo the wall clock "
     "around each iteration, which is then waited for): adds min/max/p50/p95/p99/stdev/cv per size, every "
     "process's times in the JSON (nccl-tests' analyze_perf_json.py reads them) (default 0)"),
    ("-K", "--per_iter_skip", "with -I 1: leave the first K timed iterations out of the statistics (default 0)"),
    ("-M", "--memory", "1: report memory usage per rank (GPU: device memory used and torch's peak; gloo: GPU memory "
     "is N/A, the host's peak RSS is given) (default 0)"),
    ("-S", "--report_timestamps", "1: a timestamp per size (when it started), in the table and the JSON (default 0)"),
    ("-u", "--unalign", "move every send and receive buffer this many ELEMENTS off its allocation (default 0)"),
    ("-p", "--parallel_init", "0/1, accepted for nccl-tests' command lines and recorded: with one process per GPU "
     "every rank already inits its communicator in parallel (nccl-tests' -p threads the inits of -g GPUs in one "
     "process), so it changes nothing here"),
)


def parser() -> Parser:
    p = Parser(prog=prog("bench"), description="nccl-tests-style bandwidth sweep for every collective")
    add_sweep_args(p)
    add_reporting_args(p)
    add_job_args(p, init_default="regular", allow_all=True, short_timeout=True)
    return p


def add_sweep_args(p: Parser) -> None:
    """What nccl-tests' options say is run: collectives, sizes, iterations, type, op, root, launch mode."""
    p.add_argument("--collective", default="all_reduce", help="collective(s), comma separated, or all (default "
                   "all_reduce, as all_reduce_perf): " + ",".join(collectives.NAMES))
    p.add_argument("-b", "--minbytes", default="32M", help="smallest size, bytes of the largest buffer (K/M/G; "
                   "default 32M, as nccl-tests)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size (K/M/G; default 32M, as nccl-tests)")
    p.add_argument("-f", "--stepfactor", type=float, default=None, help="multiply the size by this factor")
    p.add_argument("-i", "--stepbytes", default=None, help="add this many bytes (default 1M when no -f)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5,
                   help="warm-up iterations at every size from the smallest to the largest by factors of 2 when a "
                   "sweep starts, as nccl-tests 2.19.6 (default 5); each size then has one untimed sync launch")
    p.add_argument("--warmup_ms", type=float, default=20.0, help="with -w > 0, the warm-up goes on at the first size "
                   "until it has lasted this many ms (default 20), so a first row is timed as warm as a row mid-sweep; "
                   "0 = -w launches only, as nccl-tests")
    p.add_argument("-c", "--check", type=int, default=1, help="check iterations per size (default 1; 0 = none)")
    p.add_argument("-o", "--op", default="sum", help="reduction: " + ",".join(OPS) + ", or all (each in turn)")
    p.add_argument("-d", "--datatype", default="float", help="type: " + ",".join(DTYPES) + ", or all ("
                   + ",".join(ALL_TYPES) + ")")
    p.add_argument("-r", "--root", default="0", help="root rank of broadcast, reduce, gather and scatter (default 0), "
                   "or all (every rank in turn)")
    p.add_argument("-G", "--cudagraph", type=int, default=0,
                   help="capture -n iterations in a CUDA graph, replay N times")
    p.add_argument("-a", "--average", default="1", help="time across ranks: 0 rank0, 1 avg, 2 min, 3 max")
    p.add_argument("-z", "--blocking", type=int, nargs="?", const=1, default=0, help="wait after each operation")
    p.add_argument("--algo", default="default", help="NCCL algorithm(s), each its own communicator: "
                   + ",".join(ALGOS))
    p.add_argument("--proto", default=None, help="NCCL_PROTO for the bench communicators (e.g. Simple, LL128, LL)")
    p.add_argument("--split", default=None, help="split the ranks into groups, each running the sweep at once: "
                   "'AND 0x1', 'MOD 2', 'DIV 4' (or &, %%, /, |), as nccl-tests' NCCL_TESTS_SPLIT; default: "
                   "NCCL_TESTS_SPLIT_MASK or NCCL_TESTS_SPLIT from the environment")


def add_reporting_args(p: Parser) -> None:
    """What is kept and shown of each point: cycles, host time, registration, per-iteration times, memory,
    timestamps, the result file, the algorithm's confirmation."""
    for short, long, hint in INTEGER_FLAGS:
        p.add_argument(short, long, type=int, default=1 if long in ("--run_cycles", "--agg_iters") else 0, help=hint)
    p.add_argument("-J", "--json", default=None, help="result file (default results/runs/bench-<machine>-<time>.json)")
    p.add_argument("--no-algo-confirm", action="store_true",
                   help="do not record which algorithm NCCL ran at each size (its profiler plugin, at the size's "
                   "untimed launch)")


def options(a) -> BenchOptions:
    agg = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}.get(a.average, a.average)
    return BenchOptions(
        job=job_options(a, allow_all=True), collectives=a.collective,
        min_bytes=parse_size(a.minbytes, "-b/--minbytes"), max_bytes=parse_size(a.maxbytes, "-e/--maxbytes"),
        factor=a.stepfactor, step=None if a.stepbytes is None else parse_size(a.stepbytes, "-i/--stepbytes"),
        iters=a.iters, warmup=a.warmup_iters, warmup_ms=a.warmup_ms, check=a.check, op=a.op, dtype=a.datatype,
        root=_root(a.root),
        graph=a.cudagraph, aggregate=agg, blocking=bool(a.blocking), cycles=a.run_cycles,
        report_cputime=bool(a.report_cputime), local_register=a.local_register,
        algos=a.algo.split(","), proto=a.proto, json=a.json, confirm_algo=not a.no_algo_confirm,
        per_iter=a.per_iter_timing, per_iter_skip=a.per_iter_skip, agg_iters=a.agg_iters, memory=a.memory,
        timestamps=a.report_timestamps, unalign=a.unalign, parallel_init=a.parallel_init,
        split=a.split if a.split is not None else split_from_env())


def _root(text: str) -> int | str:
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"-r/--root: '{text}' is not a rank or all") from None


# --- the driver (before any rank runs) -------------------------------------------------------------
def check_fits(o: BenchOptions, nranks: int) -> None:
    """Sizes that cannot fit in one GPU's memory (or the CPU's share) fail before launching."""
    need = fits.need_bytes(o.collectives, o.max_bytes, o.types(), nranks, o.unalign,
                           check_temporaries=o.check > 0 and not o.torch_free)
    if (why := fits.why_not(o.job.backend, need, nranks)):
        raise UsageError(f"-e/--maxbytes {o.max_bytes}: {why}")


def check_ranks(o: BenchOptions, nranks: int, named: list[str]) -> None:
    """The root exists in every (split) group; a collective named on the command line runs on them."""
    sizes = sorted({len(m) for m in groups(o.split, nranks).values()})
    where = f"this {nranks}-rank job" if o.split is None else f"the smallest split group ({sizes[0]} ranks)"
    if o.root != "all" and o.root >= sizes[0]:
        raise UsageError(f"-r/--root {o.root} is not a rank of {where}")
    for name in o.collectives:
        why = next(filter(None, (collectives.get(name).unfit(n) for n in sizes)), None)
        if why and name in named:
            raise UsageError(f"--collective {name}: {why}")


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    o = options(a)
    ident = launch.detect()
    nranks = ident.world_size if ident else o.job.local_ranks()
    if o.torch_free and launch.self_launched(ident):  # a rank of ours: CUDA starts in a thread now (see worker)
        from nccl_bench.core import cudadriver
        cudadriver.init_early(ident.local_rank)
    check_ranks(o, nranks, a.collective.split(","))
    if not launch.self_launched(ident):  # a rank of ours: its launcher proved these before starting it
        results.check_writable(o.json, "-J/--json", kind="bench")
        check_fits(o, nranks)
    return run_job(["-m", "nccl_bench", "bench", *argv], o.job, worker(o), result=o.json, torch_free=o.torch_free)


