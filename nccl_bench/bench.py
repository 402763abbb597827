"""`bench`: nccl-tests' *_perf for every collective, with nccl-tests' options and output.

    python -m nccl_bench bench -b 8 -e 8G -f 2 --collective all_reduce --algo ring,tree

Per init mode and algorithm one communicator (blocking config; NCCL_ALGO fixed before
it is created), then one sweep per collective (nccl_bench.sweep). Rank 0 prints a table
per collective laid out like nccl-tests' and writes one JSON file: nccl-tests' -J row
fields plus collective, algo and init, and one metadata block.
"""
from __future__ import annotations

import os
import shutil
import re
import sys
import tempfile
from dataclasses import dataclass, field

from nccl_bench import collectives, launch, nccl_debug, results
from nccl_bench.cli import Job, Parser, add_job_args, job_options, run_job
from nccl_bench.comm import InitPlan
from nccl_bench.deadline import Deadline
from nccl_bench.errors import EXIT_FAILED, BarrierTimeout, CommError, UsageError
from nccl_bench.options import JobOptions, split_list
from nccl_bench.sweep import Sweep, SweepPlan, size_steps
from nccl_bench.timing import TimingPlan

# nccl-tests' type names (and common aliases) -> torch dtype name
DTYPES = {"int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32",
          "int64": "int64", "half": "float16", "float16": "float16", "fp16": "float16",
          "float": "float32", "float32": "float32", "fp32": "float32", "double": "float64",
          "float64": "float64", "bfloat16": "bfloat16", "bf16": "bfloat16"}
TYPE_NAMES = {"int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64", "float16": "half",
              "float32": "float", "float64": "double", "bfloat16": "bfloat16"}
OPS = ("sum", "prod", "min", "max", "avg")
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
    op: str = "sum"  # -o
    dtype: str = "float"  # -d (nccl-tests name)
    root: int = 0  # -r
    graph: int = 0  # -G
    aggregate: str = "avg"  # -a
    blocking: bool = False  # -z
    cycles: int = 1  # -N
    algos: list[str] = field(default_factory=lambda: ["default"])
    proto: str | None = None
    json: str | None = None
    confirm_algo: bool = True

    def __post_init__(self):
        self.collectives = split_list(self.collectives, collectives.NAMES, "collective", "all")
        self.algos = split_list([a.lower() for a in self.algos], tuple(ALGOS), "algorithm (--algo)")
        if self.dtype not in DTYPES:
            raise UsageError(f"-d/--datatype: unknown type '{self.dtype}' (choose from {', '.join(DTYPES)})")
        if self.op not in OPS:
            raise UsageError(f"-o/--op: unknown reduction '{self.op}' (choose from {', '.join(OPS)})")
        if self.op == "avg" and self.torch_dtype_name not in ("float16", "float32", "float64", "bfloat16"):
            raise UsageError(f"-o/--op avg needs a floating type; -d {self.dtype} is an integer type")
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
        if self.root < 0:
            raise UsageError(f"-r/--root must be >= 0, got {self.root}")
        if self.graph and self.job.backend != "nccl":
            raise UsageError(f"-G/--cudagraph needs --backend nccl (CUDA graphs of raw NCCL calls); "
                             f"got --backend {self.job.backend}")
        self.timing = TimingPlan(self.iters, self.warmup, self.blocking, self.graph)
        self.sweep_plan(self.job.timeout)  # -a, -c and -N are checked by the plan itself
        if not self.pairs():
            raise UsageError(f"no collective in {','.join(self.collectives)} runs with --algo {','.join(self.algos)} "
                             "(tree applies to all_reduce only)")
        if self.job.backend == "gloo" and self.max_bytes > 256 << 20:
            raise UsageError(f"-e/--maxbytes {self.max_bytes} is too large for the CPU (gloo) model; "
                             "keep it <= 256M")

    @property
    def torch_dtype_name(self) -> str:
        return DTYPES[self.dtype]

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

    def sweep_plan(self, timeout: float) -> SweepPlan:
        import torch
        return SweepPlan(self.sizes(), getattr(torch, self.torch_dtype_name), TYPE_NAMES[self.torch_dtype_name],
                         self.op, self.root, self.timing, self.check, self.aggregate, timeout, self.cycles)


def parser() -> Parser:
    p = Parser(prog="nccl_bench bench", description="nccl-tests-style bandwidth sweep for every collective")
    p.add_argument("--collective", default="all_reduce", help="collective(s), comma separated, or all: "
                   + ",".join(collectives.NAMES))
    p.add_argument("-b", "--minbytes", default="32M", help="smallest size, bytes of the largest buffer (K/M/G)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size (K/M/G)")
    p.add_argument("-f", "--stepfactor", type=float, default=None, help="multiply the size by this factor")
    p.add_argument("-i", "--stepbytes", default=None, help="add this many bytes (default 1M when no -f)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations per timing (default 5)")
    p.add_argument("-c", "--check", type=int, default=1, help="check iterations per size (default 1; 0 = none)")
    p.add_argument("-o", "--op", default="sum", help="reduction: " + ",".join(OPS))
    p.add_argument("-d", "--datatype", default="float", help="type: " + ",".join(DTYPES))
    p.add_argument("-r", "--root", type=int, default=0, help="root rank of broadcast and reduce (default 0)")
    p.add_argument("-G", "--cudagraph", type=int, default=0, help="capture -n iterations in a CUDA graph, replay N times")
    p.add_argument("-a", "--average", default="1", help="time across ranks: 0 rank0, 1 avg, 2 min, 3 max")
    p.add_argument("-z", "--blocking", type=int, nargs="?", const=1, default=0, help="wait after each operation")
    p.add_argument("-N", "--run_cycles", type=int, default=1,
                   help="run the sweep N times on the same buffers, each cycle printed and kept (default 1)")
    p.add_argument("--algo", default="default", help="NCCL algorithm(s), each its own communicator: "
                   + ",".join(ALGOS))
    p.add_argument("--proto", default=None, help="NCCL_PROTO for the bench communicators (e.g. Simple, LL128, LL)")
    p.add_argument("-J", "--json", default=None, help="result file (default results/bench-<machine>-<time>.json)")
    p.add_argument("--no-algo-confirm", action="store_true", help="skip the NCCL_DEBUG probe that confirms the algorithm")
    p.add_argument("--algo-probe", default=None, help=argparse_suppress())
    p.add_argument("--algo-confirmed", default=None, help=argparse_suppress())
    add_job_args(p, init_default="regular", allow_all=True)
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
        iters=a.iters, warmup=a.warmup_iters, check=a.check, op=a.op, dtype=a.datatype, root=a.root,
        graph=a.cudagraph, aggregate=agg, blocking=bool(a.blocking), cycles=a.run_cycles,
        algos=a.algo.split(","), proto=a.proto, json=a.json, confirm_algo=not a.no_algo_confirm)


# --- the driver (before any rank runs) -------------------------------------------------------------
def check_fits(o: BenchOptions, nranks: int) -> None:
    """Sizes that cannot fit in one GPU's memory (or the CPU's share) fail before launching."""
    import torch
    from nccl_bench import sysinfo
    elt = torch.empty((), dtype=getattr(torch, o.torch_dtype_name)).element_size()
    need = max(2 * max(lay.send, lay.recv) * elt for lay in
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


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    o = options(a)
    results.check_writable(o.json)
    ident = launch.detect()
    nranks = ident.world_size if ident else o.job.local_ranks()
    if o.root >= nranks:
        raise UsageError(f"-r/--root {o.root} is not a rank of this {nranks}-rank job")
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
def _plan(job: Job, o: BenchOptions, init: str, algo: str, counter: int) -> InitPlan:
    if algo == "default":  # NCCL_ALGO stays what the user's environment says
        if _USER_ALGO is None:
            os.environ.pop("NCCL_ALGO", None)
        else:
            os.environ["NCCL_ALGO"] = _USER_ALGO
    return InitPlan(rank=job.rank, nranks=job.nranks, mode=init, ranks_per_root=o.job.ranks_per_root,
                    counter=counter, store=job.store, local_rank=job.ident.local_rank, algo=ALGOS[algo],
                    proto=o.proto, blocking=True, namespace="bench")


_USER_ALGO = os.environ.get("NCCL_ALGO")


def probe_worker(o: BenchOptions, folder: str):
    """One call per (algo, collective, size <= 1 GiB), logged by NCCL; rank 0 lists its calls."""
    def run(job: Job) -> int:
        import torch
        from nccl_bench.lifetime import communicator
        plan = o.sweep_plan(o.job.timeout)
        elt = torch.empty((), dtype=plan.dtype).element_size()
        calls = []
        for k, algo in enumerate(o.algos):
            todo = [c for a, c in o.pairs() if a == algo]
            if not todo:
                continue
            with communicator(o.job.backend, _plan(job, o, o.job.init[0], algo, k), Deadline(o.job.timeout)) as comm:
                for name in todo:
                    coll = collectives.get(name)
                    args = coll.call_args(o.op, o.root, job.rank, job.nranks)
                    for size in plan.sizes:
                        lay = coll.layout(size, elt, job.nranks, job.rank)
                        if not (lay.send and lay.recv) or lay.bytes > nccl_debug.PROBE_MAX_BYTES:
                            continue
                        send = torch.ones(lay.send, dtype=plan.dtype, device=comm.device)
                        recv = torch.zeros(lay.recv, dtype=plan.dtype, device=comm.device)
                        comm.prepare(name, send, recv, **args)()
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
        from nccl_bench.lifetime import communicator
        plan = o.sweep_plan(o.job.timeout)
        hosts = job.store.all_gather_obj("bench/hosts", job.ident.host, timeout=60)
        confirmation = _confirmed(confirmed_path, o.job.backend)
        reported = confirmation["reported"]
        for algo, name in o.skipped():
            job.say(f"# skipped {name} with --algo {algo}: NCCL has no {algo} algorithm for it")
        rows, error, counter = [], None, 0
        progress = sys.stderr.isatty()
        try:
            for init in o.job.init:
                for algo in o.algos:
                    todo = [c for a, c in o.pairs() if a == algo]
                    if not todo:
                        continue
                    counter += 1
                    with communicator(o.job.backend, _plan(job, o, init, algo, counter),
                                      Deadline(o.job.timeout)) as comm:
                        for name in todo:
                            coll = collectives.get(name)
                            got = Sweep(job, comm, coll, plan, f"{init}/{algo}", progress).rows()
                            for r in got:
                                r.update(algo=algo, init=init, backend=o.job.backend, nranks=job.nranks,
                                         algo_confirmed=algo_verdict(algo, coll, reported.get(f"{algo}/{name}/{r['size']}")))
                            rows.extend(got)
                            if job.rank == 0:
                                title = f"{name}  algo {algo}  init {init}  {o.job.backend} x{job.nranks}"
                                for cycle in range(o.cycles):
                                    of = f"  cycle {cycle + 1}/{o.cycles}" if o.cycles > 1 else ""
                                    print(table([r for r in got if r["cycle"] == cycle], title + of), flush=True)
        except (CommError, BarrierTimeout) as e:
            error = e
        if job.rank != 0:
            if error is not None:
                raise error
            return _exit_code(rows, confirmation, o)
        meta = metadata(o, plan, hosts, job.nranks, confirmation, error)
        path = results.write("bench", rows, meta, o.json)
        print(footer(rows), flush=True)
        print(f"# results: {path}", flush=True)
        if error is not None:
            raise error
        return _exit_code(rows, confirmation, o, say=job.say)
    return run


def _exit_code(rows: list[dict], confirmation: dict, o: BenchOptions, say=None) -> int:
    wrong = sum((r[p]["nwrong"] or 0) for r in rows for p in ("out_of_place", "in_place"))
    mismatched = sorted({(r["algo"], r["collective"], r["algo_confirmed"]) for r in rows
                         if r["algo"] != "default" and r["algo_confirmed"] not in (None, "p2p")
                         and r["algo_confirmed"].lower() != r["algo"]})
    if say and mismatched:
        say("# algorithm not confirmed: " + "; ".join(f"{c} asked {a}, NCCL used {u}" for a, c, u in mismatched))
    return EXIT_FAILED if wrong or mismatched else 0


# --- output --------------------------------------------------------------------------------------------
_HEAD = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong"]


def table(rows: list[dict], title: str) -> str:
    """nccl-tests' columns: size count type redop root | out-of-place | in-place."""
    from tabulate import tabulate

    def place(p):
        w = "N/A" if p["nwrong"] is None else p["nwrong"]
        return [f"{p['time']:.2f}", f"{p['alg_bw']:.2f}", f"{p['bus_bw']:.2f}", w]
    body = [[r["size"], r["count"], r["type"], r["redop"], r["root"], *place(r["out_of_place"]),
             *place(r["in_place"])] for r in rows]
    text = tabulate(body, headers=_HEAD, tablefmt="plain", disable_numparse=True,
                    colalign=("right",) * len(_HEAD))
    lines = text.splitlines()
    units = "(B)  (elements)  |  out-of-place: time (us) algbw busbw (GB/s) #wrong  |  in-place: the same"
    notes = [f"# in-place {r['collective']}: timed, not checked (point-to-point in place has no defined "
             "order across processes)" for r in rows[:1] if r["in_place"]["nwrong"] is None
             and r["out_of_place"]["nwrong"] is not None]
    return "\n".join([f"# {title}", f"# {units}", "#" + lines[0][1:], *lines[1:], *notes])


def footer(rows: list[dict]) -> str:
    """nccl-tests' closing lines: wrong values over the run and the average busbw."""
    wrong = sum((r[p]["nwrong"] or 0) for r in rows for p in ("out_of_place", "in_place"))
    bws = [r[p]["bus_bw"] for r in rows for p in ("out_of_place", "in_place")]
    avg = sum(bws) / len(bws) if bws else 0.0
    return (f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}\n"
            f"# Avg bus bandwidth    : {avg:.4g}")


def metadata(o: BenchOptions, plan: SweepPlan, hosts, nranks: int, confirmation: dict, error) -> dict:
    from nccl_bench import sysinfo
    meta = sysinfo.collect(o.job.backend, sorted(set(hosts or [])) or None)
    meta["bench"] = {
        "nranks": nranks, "collectives": o.collectives, "algos": o.algos, "proto": o.proto, "init": o.job.init,
        "ranks_per_root": o.job.ranks_per_root, "minbytes": o.min_bytes, "maxbytes": o.max_bytes,
        "stepfactor": o.factor, "stepbytes": None if o.factor else o.step, "iters": o.iters,
        "warmup_iters": o.warmup, "check": o.check, "op": o.op, "datatype": plan.type_name, "root": o.root,
        "cudagraph": o.graph, "average": o.aggregate, "blocking": o.blocking, "run_cycles": o.cycles, "time_unit": "us",
        "bw_unit": "GB/s (1e9 B/s)", "timing": "cuda events around the loop" if o.job.backend != "gloo"
        else "wall clock around the loop",
        "skipped": [{"algo": a, "collective": c} for a, c in o.skipped()],
        "algo_confirmation": {"status": confirmation.get("status"), "probe_max_bytes": nccl_debug.PROBE_MAX_BYTES},
    }
    if error is not None:
        meta["error"] = error.as_dict() if hasattr(error, "as_dict") else str(error)
    return meta
