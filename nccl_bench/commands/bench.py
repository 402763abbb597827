"""`bench`: nccl-tests' *_perf for every collective, with nccl-tests' options and output.

    python -m nccl_bench bench -b 8 -e 8G -f 2 --collective all_reduce --algo ring,tree

Per init mode and algorithm one communicator (blocking config; NCCL_ALGO fixed before
it is created), then one sweep per collective and (type, op, root) (nccl_bench.engine.sweep). Rank
0 prints a table per collective laid out like nccl-tests' and writes one JSON file in
nccl-tests' -J layout (nccl_bench.engine.benchfile): its rows carry collective, algo and init
beside nccl-tests' fields, and one metadata block sits beside nccl-tests' keys.
"""
from __future__ import annotations

import os
import shutil
import re
import sys
import tempfile
from dataclasses import dataclass, field

from nccl_bench.engine import benchfile, collectives, nccl_debug
from nccl_bench.core import launch, results
from nccl_bench.engine.benchtable import footer, memory_line, table
from nccl_bench.job.cli import Job, Parser, add_job_args, job_options, run_job
from nccl_bench.comm import InitPlan
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import EXIT_FAILED, BarrierTimeout, CommError, UsageError
from nccl_bench.job.options import JobOptions, split_list
from nccl_bench.engine.split import GroupJob, groups, parse as parse_split, from_env as split_from_env
from nccl_bench.engine.sweepplan import SweepPlan, size_steps
from nccl_bench.engine.timing import TimingPlan

# nccl-tests' type names (and common aliases) -> torch dtype name
DTYPES = {"int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32",
          "int64": "int64", "half": "float16", "float16": "float16", "fp16": "float16",
          "float": "float32", "float32": "float32", "fp32": "float32", "double": "float64",
          "float64": "float64", "bfloat16": "bfloat16", "bf16": "bfloat16"}
ELEMENT_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8,
                 "bfloat16": 2}  # per torch dtype name: sizes are checked before torch loads
TYPE_NAMES = {"int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64", "float16": "half",
              "float32": "float", "float64": "double", "bfloat16": "bfloat16"}
OPS = ("sum", "prod", "min", "max", "avg")
ALL_TYPES = ("int8", "uint8", "int32", "int64", "half", "float", "double", "bfloat16")  # -d all (nccl-tests' names)
FLOATING = ("float16", "float32", "float64", "bfloat16")
ALGOS = {"default": None, "ring": "Ring", "tree": "Tree", "nvls": "NVLS", "nvlstree": "NVLSTree",
         "collnetdirect": "CollnetDirect", "collnetchain": "CollnetChain", "pat": "PAT"}
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """'8', '64K', '1M', '8G' (powers of 1024, as nccl-tests) -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)B?\s*", str(text), re.IGNORECASE)
    if not m:
        raise UsageError(f"{what}: '{text}' is not a size (e.g. 8, 64K, 1M, 8G)")
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()]


@dataclass
class BenchOptions:
    """What to sweep and how to time it; bad values fail by option name."""

    job: JobOptions
    collectives: list[str] = field(default_factory=lambda: ["all_reduce"])
    min_bytes: int = 32 << 20  # -b
    max_bytes: int = 32 << 20  # -e
    factor: float | None = None  # -f (multiply)
    step: int | None = None  # -i (add), used when -f is not given
    iters: int = 20  # -n
    warmup: int = 5  # -w
    check: int = 1  # -c
    op: str = "sum"  # -o, or "all": every reduction (collectives that reduce)
    dtype: str = "float"  # -d (nccl-tests name), or "all": every type
    root: int | str = 0  # -r, or "all": every rank (rooted collectives)
    graph: int = 0  # -G
    aggregate: str = "avg"  # -a
    blocking: bool = False  # -z
    cycles: int = 1  # -N
    report_cputime: bool = False  # -C: the time column is the host (CPU) time per launch
    local_register: int = 0  # -R: 0 none, 1 local (ncclCommRegister), 2 symmetric (ncclCommWindowRegister)
    algos: list[str] = field(default_factory=lambda: ["default"])
    proto: str | None = None
    json: str | None = None
    confirm_algo: bool = True
    per_iter: int = 0  # -I: 1 = time every iteration (min/max/p50/p95/p99/stdev/cv, per-process rows)
    per_iter_skip: int = 0  # -K: first timed iterations left out of -I's statistics
    agg_iters: int = 1  # -m: operations per timed iteration
    memory: int = 0  # -M: 1 = report memory usage
    timestamps: int = 0  # -S: 1 = a timestamp per row
    unalign: int = 0  # -u: elements by which the buffers are moved off their allocation
    parallel_init: int = 0  # -p: accepted (0/1) and recorded; one process per GPU inits in parallel anyway
    split: str | None = None  # --split / NCCL_TESTS_SPLIT(_MASK): groups by rank, each its own sweep

    def __post_init__(self):
        self.collectives = split_list(self.collectives, collectives.NAMES, "collective", "all")
        self.algos = split_list([a.lower() for a in self.algos], tuple(ALGOS), "algorithm (--algo)")
        if self.dtype not in DTYPES and self.dtype != "all":
            raise UsageError(f"-d/--datatype: unknown type '{self.dtype}' (choose from {', '.join(DTYPES)} or all)")
        if self.op not in OPS and self.op != "all":
            raise UsageError(f"-o/--op: unknown reduction '{self.op}' (choose from {', '.join(OPS)} or all)")
        if self.op == "avg" and self.dtype != "all" and self.torch_dtype_name not in FLOATING:
            raise UsageError(f"-o/--op avg needs a floating type; -d {self.dtype} is an integer type")
        if self.root != "all" and not isinstance(self.root, int):
            raise UsageError(f"-r/--root must be a rank or all, got {self.root!r}")
        for name, value in (("-I/--per_iter_timing", self.per_iter), ("-M/--memory", self.memory),
                            ("-S/--report_timestamps", self.timestamps), ("-p/--parallel_init", self.parallel_init)):
            if value not in (0, 1):
                raise UsageError(f"{name} must be 0 or 1, got {value}")
        if self.per_iter_skip and not self.per_iter:
            raise UsageError("-K/--per_iter_skip needs -I/--per_iter_timing 1")
        if self.min_bytes > self.max_bytes:
            raise UsageError(f"-b/--minbytes {self.min_bytes} is larger than -e/--maxbytes {self.max_bytes}")
        if self.factor is not None and self.step is not None:
            raise UsageError("give -f/--stepfactor or -i/--stepbytes, not both")
        if self.factor is not None and not self.factor > 1:
            raise UsageError(f"-f/--stepfactor must be > 1, got {self.factor:g}")
        if self.step is not None and self.step < 1:
            raise UsageError(f"-i/--stepbytes must be >= 1, got {self.step}")
        if self.factor is None and self.step is None:
            self.step = 1 << 20  # nccl-tests' default -i 1M
        if self.root != "all" and self.root < 0:
            raise UsageError(f"-r/--root must be >= 0, got {self.root}")
        if self.split is not None:
            parse_split(self.split)
        if self.graph and self.job.backend != "nccl":
            raise UsageError(f"-G/--cudagraph needs --backend nccl (CUDA graphs of raw NCCL calls); "
                             f"got --backend {self.job.backend}")
        if self.local_register not in (0, 1, 2):
            raise UsageError(f"-R/--local_register must be 0, 1 or 2, got {self.local_register}")
        if self.local_register and self.job.backend != "nccl":
            raise UsageError(f"-R/--local_register {self.local_register} needs --backend nccl "
                             f"(buffer registration is NCCL's); got --backend {self.job.backend}")
        self.timing = TimingPlan(self.iters, self.warmup, self.blocking, self.graph, self.agg_iters, bool(self.per_iter))
        self.sweep_plan(self.job.timeout, *self.combos(collectives.get(self.collectives[0]), 1)[0])  # -a -c -N -u -K
        if not self.pairs():
            raise UsageError(f"no collective in {','.join(self.collectives)} runs with --algo {','.join(self.algos)} "
                             "(tree applies to all_reduce only)")
        if self.job.backend == "gloo" and self.max_bytes > 256 << 20:
            raise UsageError(f"-e/--maxbytes {self.max_bytes} is too large for the CPU (gloo) model; "
                             "keep it <= 256M")

    @property
    def torch_dtype_name(self) -> str:
        return DTYPES[self.dtype]

    def types(self) -> list[str]:
        return list(ALL_TYPES) if self.dtype == "all" else [self.dtype]

    def combos(self, coll: collectives.Collective, nranks: int) -> list[tuple[str, str, int]]:
        """(type, op, root) to sweep for one collective: -o all only where it reduces, -r all only
        where it has a root; avg only on floating types."""
        ops = list(OPS) if self.op == "all" and coll.reduces else ["sum" if self.op == "all" else self.op]
        roots = list(range(nranks)) if self.root == "all" and coll.rooted else [0 if self.root == "all" else self.root]
        return [(t, op, r) for t in self.types() for op in ops for r in roots
                if not (op == "avg" and coll.reduces and DTYPES[t] not in FLOATING)]

    def sizes(self) -> list[int]:
        return size_steps(self.min_bytes, self.max_bytes, self.factor, self.step)

    def pairs(self) -> list[tuple[str, str]]:
        """(algo, collective) to run: an algorithm only where NCCL has it; point-to-point once."""
        out = []
        for i, algo in enumerate(self.algos):
            for name in self.collectives:
                c = collectives.get(name)
                if algo == "default" or algo in c.algos or (not c.algos and i == 0):
                    out.append((algo, name))
        return out

    def skipped(self) -> list[tuple[str, str]]:
        run = set(self.pairs())
        return [(a, c) for a in self.algos for c in self.collectives
                if (a, c) not in run and collectives.get(c).algos]

    def sweep_plan(self, timeout: float, dtype: str, op: str, root: int) -> SweepPlan:
        name = DTYPES[dtype]
        return SweepPlan(self.sizes(), name, TYPE_NAMES[name], op, root, self.timing, self.check,
                         self.aggregate, timeout, self.cycles, report_cputime=self.report_cputime,
                         register=self.local_register, unalign=self.unalign, per_iter_skip=self.per_iter_skip,
                         timestamps=bool(self.timestamps))


def parser() -> Parser:
    p = Parser(prog="nccl_bench bench", description="nccl-tests-style bandwidth sweep for every collective")
    p.add_argument("--collective", default="all_reduce", help="collective(s), comma separated, or all: "
                   + ",".join(collectives.NAMES))
    p.add_argument("-b", "--minbytes", default="32M", help="smallest size, bytes of the largest buffer (K/M/G)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size (K/M/G)")
    p.add_argument("-f", "--stepfactor", type=float, default=None, help="multiply the size by this factor")
    p.add_argument("-i", "--stepbytes", default=None, help="add this many bytes (default 1M when no -f)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations at the largest and at the smallest size when a sweep starts, as "
                   "nccl-tests (default 5); each size then has one untimed sync launch")
    p.add_argument("-c", "--check", type=int, default=1, help="check iterations per size (default 1; 0 = none)")
    p.add_argument("-o", "--op", default="sum", help="reduction: " + ",".join(OPS) + ", or all (each in turn)")
    p.add_argument("-d", "--datatype", default="float", help="type: " + ",".join(DTYPES) + ", or all ("
                   + ",".join(ALL_TYPES) + ")")
    p.add_argument("-r", "--root", default="0", help="root rank of broadcast, reduce, gather and scatter (default 0), "
                   "or all (every rank in turn)")
    p.add_argument("-G", "--cudagraph", type=int, default=0, help="capture -n iterations in a CUDA graph, replay N times")
    p.add_argument("-a", "--average", default="1", help="time across ranks: 0 rank0, 1 avg, 2 min, 3 max")
    p.add_argument("-z", "--blocking", type=int, nargs="?", const=1, default=0, help="wait after each operation")
    p.add_argument("-N", "--run_cycles", type=int, default=1,
                   help="run the sweep N times on the same buffers, each cycle printed and kept (default 1)")
    p.add_argument("-C", "--report_cputime", type=int, default=0,
                   help="1: the time column is the host (CPU) time per launch; JSON key cpu_time (default 0)")
    p.add_argument("-R", "--local_register", type=int, default=0,
                   help="register the buffers with NCCL: 0 no, 1 local (ncclCommRegister), "
                   "2 symmetric windows (NCCL >= 2.27); nccl backend only (default 0)")
    p.add_argument("-m", "--agg_iters", type=int, default=1,
                   help="operations launched back to back per timed iteration (default 1); time is per operation")
    p.add_argument("-I", "--per_iter_timing", type=int, default=0,
                   help="1: time every iteration (CUDA events between iterations; on gloo the wall clock around "
                   "each iteration, which is then waited for): adds min/max/p50/p95/p99/stdev/cv per size, "
                   "every process's times in the JSON (nccl-tests' analyze_perf_json.py reads them) (default 0)")
    p.add_argument("-K", "--per_iter_skip", type=int, default=0,
                   help="with -I 1: leave the first K timed iterations out of the statistics (default 0)")
    p.add_argument("-M", "--memory", type=int, default=0,
                   help="1: report memory usage per rank (GPU: device memory used and torch's peak; gloo: "
                   "GPU memory is N/A, the host's peak RSS is given) (default 0)")
    p.add_argument("-S", "--report_timestamps", type=int, default=0,
                   help="1: a timestamp per size (when it started), in the table and the JSON (default 0)")
    p.add_argument("-u", "--unalign", type=int, default=0,
                   help="move every send and receive buffer this many ELEMENTS off its allocation (default 0)")
    p.add_argument("-p", "--parallel_init", type=int, default=0,
                   help="0/1, accepted for nccl-tests' command lines and recorded: with one process per GPU "
                   "every rank already inits its communicator in parallel (nccl-tests' -p threads the inits "
                   "of -g GPUs in one process), so it changes nothing here")
    p.add_argument("--algo", default="default", help="NCCL algorithm(s), each its own communicator: "
                   + ",".join(ALGOS))
    p.add_argument("--proto", default=None, help="NCCL_PROTO for the bench communicators (e.g. Simple, LL128, LL)")
    p.add_argument("-J", "--json", default=None, help="result file (default results/bench-<machine>-<time>.json)")
    p.add_argument("--split", default=None, help="split the ranks into groups, each running the sweep at once: "
                   "'AND 0x1', 'MOD 2', 'DIV 4' (or &, %%, /, |), as nccl-tests' NCCL_TESTS_SPLIT; default: "
                   "NCCL_TESTS_SPLIT_MASK or NCCL_TESTS_SPLIT from the environment")
    p.add_argument("--no-algo-confirm", action="store_true", help="skip the NCCL_DEBUG probe that confirms the algorithm")
    p.add_argument("--algo-probe", default=None, help=argparse_suppress())
    p.add_argument("--algo-confirmed", default=None, help=argparse_suppress())
    add_job_args(p, init_default="regular", allow_all=True, short_timeout=True)
    return p


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS


def options(a) -> BenchOptions:
    agg = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}.get(a.average, a.average)
    return BenchOptions(
        job=job_options(a, allow_all=True), collectives=a.collective,
        min_bytes=parse_size(a.minbytes, "-b/--minbytes"), max_bytes=parse_size(a.maxbytes, "-e/--maxbytes"),
        factor=a.stepfactor, step=None if a.stepbytes is None else parse_size(a.stepbytes, "-i/--stepbytes"),
        iters=a.iters, warmup=a.warmup_iters, check=a.check, op=a.op, dtype=a.datatype, root=_root(a.root),
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
    from nccl_bench.core import sysinfo
    elts = {ELEMENT_BYTES[DTYPES[t]] for t in o.types()}
    need = max(2 * (max(lay.send, lay.recv) + o.unalign) * elt for elt in elts for lay in
               (collectives.get(c).layout(o.max_bytes, elt, nranks, 0) for c in o.collectives))
    need += 4 * collectives.CHUNK * 8  # the check's int64 temporaries
    if o.job.backend == "gloo":
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // max(nranks, 1)
        where = f"this machine's memory per rank ({have / 2**30:.1f} GiB)"
    else:
        devs = sysinfo.gpus().get("devices") or []
        if not devs:
            return
        have = min(d["memory_gib"] for d in devs) * 2**30
        where = f"GPU memory ({have / 2**30:.0f} GiB)"
    if need > have:
        raise UsageError(f"-e/--maxbytes {o.max_bytes}: buffers need {need / 2**30:.1f} GiB, more than {where}")


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
    results.check_writable(o.json)
    ident = launch.detect()
    nranks = ident.world_size if ident else o.job.local_ranks()
    check_ranks(o, nranks, a.collective.split(","))
    check_fits(o, nranks)
    if a.algo_probe:
        return run_job(["-m", "nccl_bench", "bench", *argv], o.job, probe_worker(o, a.algo_probe))
    if ident is None and o.job.backend in ("nccl", "torch") and o.confirm_algo and not a.algo_confirmed:
        confirmed = probe(o, argv)
        try:
            return run_job(["-m", "nccl_bench", "bench", *argv, "--algo-confirmed", confirmed], o.job,
                           worker(o, a.algo_confirmed), result=o.json)
        finally:
            shutil.rmtree(os.path.dirname(confirmed), ignore_errors=True)
    return run_job(["-m", "nccl_bench", "bench", *argv], o.job, worker(o, a.algo_confirmed), result=o.json)


def probe(o: BenchOptions, argv: list[str]) -> str:
    """Run the short NCCL_DEBUG=INFO probe job; returns a JSON file with what NCCL reported."""
    import json
    folder = tempfile.mkdtemp(prefix="nccl_bench_probe_")
    env = nccl_debug.probe_env(folder)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        code = launch.self_launch(o.job.local_ranks(), ["-m", "nccl_bench", "bench", *argv, "--algo-probe", folder])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        found = nccl_debug.confirm(folder) if code == 0 else {}
        status = "ok" if code == 0 else f"probe job exited {code}"
    except (OSError, ValueError, KeyError) as e:
        found, status = {}, f"probe unreadable: {type(e).__name__}"
    out = os.path.join(folder, "confirmed.json")
    with open(out, "w") as f:
        json.dump({"status": status, "reported": found}, f)
    return out


# --- the ranks ---------------------------------------------------------------------------------------
def _plan(job: GroupJob, o: BenchOptions, init: str, algo: str, counter: int) -> InitPlan:
    if algo == "default":  # NCCL_ALGO stays what the user's environment says
        if _USER_ALGO is None:
            os.environ.pop("NCCL_ALGO", None)
        else:
            os.environ["NCCL_ALGO"] = _USER_ALGO
    return InitPlan(rank=job.rank, nranks=job.nranks, mode=init, ranks_per_root=o.job.ranks_per_root,
                    counter=counter, store=job.store, local_rank=job.ident.local_rank, algo=ALGOS[algo],
                    proto=o.proto, blocking=True, namespace=job.namespace)


_USER_ALGO = os.environ.get("NCCL_ALGO")


def probe_worker(o: BenchOptions, folder: str):
    """One call per (algo, collective, size <= 1 GiB), logged by NCCL; rank 0 lists its calls."""
    def run(job: Job) -> int:
        import torch
        from nccl_bench.comm.lifetime import communicator
        calls = []
        for k, algo in enumerate(o.algos):
            todo = [c for a, c in o.pairs() if a == algo]
            if not todo:
                continue
            with communicator(o.job.backend, _plan(GroupJob(job, None), o, o.job.init[0], algo, k),
                              Deadline(o.job.timeout)) as comm:
                for name in todo:
                    coll = collectives.get(name)
                    if coll.unfit(job.nranks):
                        continue
                    plan = o.sweep_plan(o.job.timeout, *o.combos(coll, job.nranks)[0])
                    dtype, elt = getattr(torch, plan.dtype), ELEMENT_BYTES[plan.dtype]
                    for size in plan.sizes:
                        lay = coll.layout(size, elt, job.nranks, job.rank)
                        if not (lay.send and lay.recv) or lay.bytes > nccl_debug.PROBE_MAX_BYTES:
                            continue
                        args = coll.call_args(plan.op, plan.root, job.rank, job.nranks, lay)
                        send = torch.ones(lay.send, dtype=dtype, device=comm.device)
                        recv = torch.zeros(lay.recv, dtype=dtype, device=comm.device)
                        comm.prepare(coll.method, send, recv, **args)()
                        comm.wait(Deadline(o.job.timeout), name)
                        calls.append({"algo": algo, "collective": name, "nccl_name": coll.nccl_name, "size": lay.bytes})
        if job.rank == 0:
            nccl_debug.write_manifest(folder, os.getpid(), calls)
        return 0
    return run


def _confirmed(path: str | None, backend: str) -> dict:
    import json
    if backend == "gloo":
        return {"status": "n/a (gloo)", "reported": {}}
    if not path:
        return {"status": "not checked (external launcher or --no-algo-confirm)", "reported": {}}
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"status": "probe result missing", "reported": {}}


def algo_verdict(algo: str, coll: collectives.Collective, reported: str | None) -> str | None:
    """What goes in a row's algo_confirmed: NCCL's word, 'p2p', or None when not reported."""
    if coll.nccl_name is None:
        return "p2p"
    return reported


def worker(o: BenchOptions, confirmed_path: str | None):
    def run(job: Job) -> int:
        from nccl_bench.comm.lifetime import communicator
        from nccl_bench.engine.sweep import Sweep  # the engine needs torch: loaded where the job runs
        started = benchfile.now()
        devices = job.store.all_gather_obj("bench/devices", device_entry(job, o.job.backend), timeout=60)
        confirmation = _confirmed(confirmed_path, o.job.backend)
        reported = confirmation["reported"]
        for algo, name in o.skipped():
            job.say(f"# skipped {name} with --algo {algo}: NCCL has no {algo} algorithm for it")
        rows, error, counter, memory, launch_path = [], None, 0, {}, None
        progress = sys.stderr.isatty()
        group = GroupJob(job, o.split)  # the whole job when there is no split
        unfit = {c: collectives.get(c).unfit(group.nranks) for c in o.collectives}
        for name, why in unfit.items():
            if why:
                job.say(f"# skipped {name}: {why}")
        try:
            for init in o.job.init:
                for algo in o.algos:
                    todo = [c for a, c in o.pairs() if a == algo and not unfit[c]]
                    if not todo:
                        continue
                    counter += 1
                    with communicator(o.job.backend, _plan(group, o, init, algo, counter),
                                      Deadline(o.job.timeout)) as comm:
                        launch_path = comm.launch_path()
                        for name in todo:
                            coll = collectives.get(name)
                            got = []
                            for combo in o.combos(coll, group.nranks):
                                plan = o.sweep_plan(o.job.timeout, *combo)
                                tag = "/".join(map(str, (init, algo, *combo)))
                                got += Sweep(group, comm, coll, plan, tag, progress and job.rank == 0).rows()
                            for r in got:
                                r.update(algo=algo, init=init, backend=o.job.backend, nranks=group.nranks,
                                         **group.row_fields,
                                         algo_confirmed=algo_verdict(algo, coll, reported.get(f"{algo}/{name}/{r['size']}")))
                            rows.extend(got)
                            if job.rank == 0:
                                title = f"{name}  algo {algo}  init {init}  {o.job.backend} x{group.nranks}"
                                if o.split is not None:
                                    title += f"  split {o.split}: group {group.group} of {group.ngroups}"
                                for cycle in range(o.cycles):
                                    of = f"  cycle {cycle + 1}/{o.cycles}" if o.cycles > 1 else ""
                                    print(table([r for r in got if r["cycle"] == cycle], title + of), flush=True)
                        if o.memory:
                            memory = peak_memory(comm.device, memory)
            if o.memory:
                memory = job.store.all_gather_obj("bench/memory", memory, timeout=60)
        except (CommError, BarrierTimeout) as e:
            error = e
        try:
            rows = group.collect(rows)
        except BarrierTimeout as e:  # a group's first rank is gone: keep what this rank's group measured
            error = error or e
        if job.rank != 0:
            if error is not None:
                raise error
            return _exit_code(rows, confirmation, o)
        meta = metadata(o, [d["hostname"] for d in devices], job.nranks, confirmation, error, launch_path)
        if o.memory and error is None:
            meta["bench"]["memory"] = memory
            print(memory_line(memory), flush=True)
        doc = benchfile.document(rows, meta, nccl_config(o), devices, started, ["nccl_bench", *sys.argv[1:]],
                                 [] if error is None else [str(error)])
        path = results.write_doc("bench", doc, o.json)
        print(footer(rows), flush=True)
        print(f"# results: {path}", flush=True)
        if getattr(error, "kind", None) == "hang":
            print(f"# test timeout: {error.op} did not finish within -T/--timeout {o.job.timeout:g} s", flush=True)
        if error is not None:
            raise error
        return _exit_code(rows, confirmation, o, say=job.say)
    return run


def device_entry(job: Job, backend: str) -> dict:
    """This rank's entry of nccl-tests' config.devices."""
    entry = {"rank": job.rank, "group": 0, "pid": os.getpid(), "hostname": job.ident.host, "device": -1,
             "device_hex": "", "device_info": "cpu (gloo)"}
    if backend != "gloo":
        import torch
        i = job.ident.local_rank
        props = torch.cuda.get_device_properties(i)
        bus = [getattr(props, f"pci_{k}_id", 0) for k in ("domain", "bus", "device")]
        entry.update(device=i, device_hex=f"{bus[0]:04x}:{bus[1]:02x}:{bus[2]:02x}", device_info=props.name)
    return entry


def peak_memory(device, before: dict) -> dict:
    """-M: this rank's memory use so far (the largest seen over its communicators)."""
    import resource
    now = {"host_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if device.type == "cuda":
        import torch
        free, total = torch.cuda.mem_get_info(device)
        now.update(device_used_bytes=total - free, device_total_bytes=total,
                   torch_peak_bytes=torch.cuda.max_memory_allocated(device))
    return {k: max(v, before.get(k, 0)) for k, v in now.items()}


def nccl_config(o: BenchOptions) -> dict:
    """nccl-tests' config block (its booleans as "true"/"false" strings), less the devices."""
    step = ({"step_factor": int(o.factor) if float(o.factor).is_integer() else o.factor} if o.factor
            else {"step_bytes": o.step})
    return {"nthreads": 1, "ngpus": 1, "minimum_bytes": o.min_bytes, "maximum_bytes": o.max_bytes, **step,
            "warmup_iters": o.warmup, "iterations": o.iters, "aggregated_iterations": o.agg_iters,
            "validation": o.check, "graph": o.graph, "blocking_collectives": benchfile.flag(o.blocking),
            "per_iter_timing": benchfile.flag(o.per_iter), "parallel_init": benchfile.flag(o.parallel_init)}


def _exit_code(rows: list[dict], confirmation: dict, o: BenchOptions, say=None) -> int:
    wrong, _ = benchfile.totals(rows)
    mismatched = sorted({(r["algo"], r["collective"], r["algo_confirmed"]) for r in rows
                         if r["algo"] != "default" and r["algo_confirmed"] not in (None, "p2p")
                         and r["algo_confirmed"].lower() != r["algo"]})
    if say and mismatched:
        say("# algorithm not confirmed: " + "; ".join(f"{c} asked {a}, NCCL used {u}" for a, c, u in mismatched))
    return EXIT_FAILED if wrong or mismatched else 0


def metadata(o: BenchOptions, hosts, nranks: int, confirmation: dict, error, launch_path: str | None = None) -> dict:
    from nccl_bench.core import sysinfo
    meta = sysinfo.collect(o.job.backend, sorted(set(hosts or [])) or None)
    timing = "cuda events around the loop" if o.job.backend != "gloo" else "wall clock around the loop"
    if o.per_iter:
        timing += (", and an event after each iteration (-I)" if o.job.backend != "gloo"
                   else ", and around each iteration, waited for (-I)")
    meta["bench"] = {
        "nranks": nranks, "collectives": o.collectives, "algos": o.algos, "proto": o.proto, "init": o.job.init,
        "ranks_per_root": o.job.ranks_per_root, "minbytes": o.min_bytes, "maxbytes": o.max_bytes,
        "stepfactor": o.factor, "stepbytes": None if o.factor else o.step, "iters": o.iters,
        "warmup_iters": o.warmup, "check": o.check, "op": o.op,
        "datatype": "all" if o.dtype == "all" else TYPE_NAMES[o.torch_dtype_name], "root": o.root,
        "cudagraph": o.graph, "split": o.split, "average": o.aggregate, "blocking": o.blocking,
        "run_cycles": o.cycles, "agg_iters": o.agg_iters, "per_iter_timing": o.per_iter,
        "per_iter_skip": o.per_iter_skip, "unalign_elements": o.unalign, "parallel_init": o.parallel_init,
        "timeout_s": o.job.timeout, "time_unit": "us", "bw_unit": "GB/s (1e9 B/s)", "timing": timing,
        "report_cputime": o.report_cputime, "local_register": o.local_register,
        "launch": launch_path,  # "compiled" (C loop over NCCL's entry points) or "python (why)"
        "skipped": [{"algo": a, "collective": c} for a, c in o.skipped()],
        "algo_confirmation": {"status": confirmation.get("status"), "probe_max_bytes": nccl_debug.PROBE_MAX_BYTES},
    }
    if error is not None:
        meta["error"] = error.as_dict() if hasattr(error, "as_dict") else str(error)
    return meta
