"""`init`: what creating a communicator costs, phase by phase, per init mode.

Each round starts from a store barrier so that phases line up across ranks; an optional
seeded skew delays each rank before its init. Per (mode, round, rank) it records the
unique-ID exchange through the store, creation until ready, the first collective (where
NCCL sets up its connections) and destroy. Failed inits (stock's stale reads) are rows
like any other, with the failure kind and the time to failure: counted and shown, never
dropped. `--simulate-ranks N` runs the scale model of the ID exchange instead
(nccl_bench.init.scale).
"""
from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass

from tabulate import tabulate

from nccl_bench.core import results, sysinfo
from nccl_bench import records
from nccl_bench.comm.bootstrap import MODES
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job.driver import run_job
from nccl_bench.job.runner import Job
from nccl_bench.job.spec import JobSpec, WorkerRef
from nccl_bench.comm import InitPlan
from nccl_bench.records.init import PHASES
from nccl_bench.records.init import failures, measured, stale_rounds, summarize
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import CommError, EXIT_FAILED, UsageError, at_least
from nccl_bench.comm.lifetime import communicator, destroy_note
from nccl_bench.core.markers import span
from nccl_bench.job.options import JobOptions, split_list

DEFAULT_ROUNDS = 10
MAX_ROUNDS = 100_000  # every rank's row of every round is held for the table and the file
DEFAULT_RANKS_PER_ROOT = 128


def parser() -> Parser:
    p = Parser(prog=prog("init"),
               description="per-phase cost of communicator init per mode; --simulate-ranks N: the ID "
                           "exchange of N simulated ranks against one real TCPStore, for ranks per root "
                           "1, 8 and 128 unless --ranks-per-root is given")
    add_job_args(p, init_default="regular,stock,scoped", allow_all=True, timeout=10.0)
    # None: 128 for the benchmark, 1, 8 and 128 for the scale model
    p.set_defaults(ranks_per_root=None, backend=None)
    p.add_argument("--rounds", type=int, default=None,
                   help=f"measured rounds per mode (default {DEFAULT_ROUNDS}); with --simulate-ranks: "
                        "re-inits after the first (default 1)")
    p.add_argument("--warmup", type=int, default=None, help="unmeasured rounds first (default 1)")
    p.add_argument("--skew-max", type=float, default=0.0,
                   help="each rank sleeps a seeded random 0..S seconds before each init (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the skew (default 0)")
    p.add_argument("--json", default=None, help="result file (default results/runs/init-<machine>-<time>.json)")
    p.add_argument("--simulate-ranks", type=int, default=None,
                   help="run the scale model with N simulated ranks instead (CPU, this process)")
    p.add_argument("--leak-check", type=int, default=None, metavar="N",
                   help="a bare loop of N inits (init, one all_reduce, destroy) sampling RSS, fds, threads, GPU "
                        "memory and NCCL shm every --leak-every inits: the slope per 1,000 inits, LEAK or not")
    p.add_argument("--leak-every", type=int, default=100, metavar="K", help="--leak-check: inits between samples")
    p.add_argument("--leak-warmup", type=int, default=None, metavar="N",
                   help="--leak-check: inits whose samples are left out (default a fifth, at most 1000)")
    p.add_argument("--destroys-in-flight", type=int, default=None, metavar="K",
                   help="--leak-check: destroys running behind the loop (default 8; 0: serial)")
    p.add_argument("--read-budget", type=int, default=None,
                   help="scale model: key reads performed per init; above it readers are sampled "
                        "(default 262144)")
    return p


@dataclass
class InitBenchOptions:
    """Rounds (measured, plus warm-up), seeded skew in seconds, and where results go."""

    job: JobOptions
    rounds: int = DEFAULT_ROUNDS
    warmup: int = 1
    skew_max: float = 0.0  # seconds
    seed: int = 0
    json: str | None = None

    def __post_init__(self):
        at_least("--rounds", self.rounds, 1, most=MAX_ROUNDS)
        at_least("--warmup", self.warmup, 0)
        if not 0 <= self.skew_max <= 3600:
            raise UsageError(f"--skew-max must be 0 to 3600 seconds, got {self.skew_max:g}")
        results.check_writable(self.json, kind="init")

    @property
    def modes(self) -> list[str]:
        return self.job.init

    @property
    def total_rounds(self) -> int:
        return self.warmup + self.rounds


# --- one init, measured --------------------------------------------------------------------
def new_row(mode: str, rnd: int, rank: int, warmup: bool, skew: float) -> dict:
    return {"mode": mode, "round": rnd, "rank": rank, "warmup": warmup, "skew_s": skew, "outcome": "ok",
            "failed_op": None, "error": None, "failed_after_s": None, "exchange_s": None, "create_s": None,
            "init_rest_s": None, "init_s": None, "first_collective_s": None, "destroy_s": None, "abort_s": None,
            "lifetime_s": None,
            "ids": None, "published_root": -1, "published": None}


def measure_init(job: Job, opts: InitBenchOptions, mode: str, rnd: int, rng: random.Random) -> dict:
    """One init of `mode` in round `rnd` on this rank: barrier, skew, then every phase timed."""
    import torch  # here, on the rank: the command's parsing and options stay free of it
    job.store.barrier(f"init/{mode}/{rnd}", timeout=opts.job.timeout + 60)
    skew = rng.uniform(0, opts.skew_max) if opts.skew_max > 0 else 0.0
    row = new_row(mode, rnd, job.rank, rnd < opts.warmup, skew)
    seen = {}

    def closed(comm, ok, seconds):
        seen["comm"] = comm
        row["destroy_s" if ok else "abort_s"] = seconds

    # A namespace per mode and the round as counter: modes never read each other's keys,
    # and only stock's keys repeat from one round to the next (that is its bug).
    plan = InitPlan(rank=job.rank, nranks=job.nranks, mode=mode, ranks_per_root=opts.job.ranks_per_root,
                    counter=rnd, store=job.store, local_rank=job.ident.local_rank, namespace=f"init/{mode}")
    where = {"round": rnd, "rank": job.rank, "mode": mode}
    with span("round", **where):
        if skew:
            with span("skew", **where):
                time.sleep(skew)
        deadline = Deadline(opts.job.timeout)
        t0 = time.perf_counter()
        phase, t_phase = "init", t0  # where a failure happened, and when that phase began
        try:
            with contextlib.ExitStack() as lifetime:
                with span("init", **where):
                    comm = lifetime.enter_context(communicator(opts.job.backend, plan, deadline, on_close=closed))
                row["exchange_s"], row["create_s"] = comm.timings.exchange, comm.timings.create
                row["init_s"], row["init_rest_s"] = comm.timings.init, comm.timings.rest
                x = torch.ones(1, device=comm.device)  # allocated outside the timed phase
                phase, t_phase = "first_collective_s", time.perf_counter()
                with span("verify", **where):
                    comm.all_reduce(x, x, "sum")
                    comm.wait(deadline, "first all_reduce")
                row["first_collective_s"] = time.perf_counter() - t_phase
                if float(x.item()) != job.nranks:
                    row["outcome"], row["failed_op"] = "wrong", "first all_reduce"
                    row["error"] = f"first all_reduce gave {float(x.item()):g}, expected {job.nranks}"
                phase, t_phase = "destroy_s", time.perf_counter()
                with span("destroy", **where):
                    lifetime.close()
            row["lifetime_s"] = time.perf_counter() - t0  # the whole life, from before create to after destroy
        except CommError as e:
            now = time.perf_counter()
            row.update(outcome=e.kind, failed_op=e.op, error=str(e), failed_after_s=now - t0)
            comm = seen.get("comm")
            if phase != "init":  # the first collective or the destroy failed: its time to failure
                row[phase] = now - t_phase
            elif e.op == "id-exchange":
                row["exchange_s"] = now - t0
            else:  # creation failed: what is left after the exchange is create's time to failure
                row["exchange_s"] = comm.timings.exchange if comm else None
                row["create_s"] = now - t0 - (row["exchange_s"] or 0.0)
    ids = seen["comm"].ids_used if "comm" in seen else None
    if ids is not None:  # evidence: which IDs this rank used and published
        row.update(ids=list(ids.fingerprints), published_root=ids.published_root, published=ids.published or None)
    return row


# --- statistics and the table -----------------------------------------------------------------
def _ms(v) -> str:
    return "-" if v is None else f"{v * 1e3:.2f}"


def table(rows: list[dict]) -> str:
    body, last = [], None
    for s in summarize(rows):
        if s["key"] == "failed_after_s" and not s["n"]:
            continue
        body.append([s["mode"] if s["mode"] != last else "", s["phase"], s["n"],
                     *(_ms(s[k]) for k in ("median", "p90", "p99", "max"))])
        last = s["mode"]
    text = tabulate(body, headers=["mode", "phase", "n", "median ms", "p90 ms", "p99 ms", "max ms"],
                    tablefmt="simple", disable_numparse=True, colalign=("left", "left", "right"))
    stale = stale_rounds(measured(rows))
    lines = []
    for mode, f in failures(rows).items():
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(f["kinds"].items()))
        proof = f"; stale IDs proven in {len(stale.get(mode, []))} round(s)" if stale.get(mode) else ""
        lines.append(f"  {mode}: {f['failed']} of {f['inits']} inits failed" + (f" ({kinds})" if kinds else "") + proof)
    return text + "\nfailed inits (every rank of every measured round):\n" + "\n".join(lines)


def progress(rnd: int, opts: InitBenchOptions, everyone: list[dict]) -> str:
    parts = []
    for mode in opts.modes:
        mine = [r for r in everyone if r["mode"] == mode]
        bad = [r for r in mine if r["outcome"] != "ok"]
        if bad:
            parts.append(f"{mode} " + "/".join(sorted({r['outcome'] for r in bad})) + f" on {len(bad)} rank(s)")
        else:
            parts.append(f"{mode} init {max(r['init_s'] or 0 for r in mine) * 1e3:.1f} ms")
    tag = "warm-up" if rnd < opts.warmup else f"round {rnd - opts.warmup + 1}/{opts.rounds}"
    return f"{tag}: " + " | ".join(parts)


# --- the job ---------------------------------------------------------------------------------------
def metadata(job: Job, opts: InitBenchOptions, complete: bool) -> dict:
    hosts = list(dict.fromkeys(job.store.host_of(r) for r in range(job.nranks)))
    meta = sysinfo.collect(opts.job.backend, hosts)
    meta["params"] = {"command": "init", "modes": opts.modes, "rounds": opts.rounds, "warmup": opts.warmup,
                      "nranks": job.nranks, "ranks_per_root": opts.job.ranks_per_root, "skew_max_s": opts.skew_max,
                      "seed": opts.seed, "timeout_s": opts.job.timeout, "complete": complete,
                      "phases": {key: label for label, key in PHASES},
                      "note": "torch: PyTorch exchanges IDs itself (exchange_s null) and its create includes "
                              "eager init plus one probe all_reduce"}
    return meta


def worker(opts: InitBenchOptions):
    def run(job: Job) -> int:
        job.say(f"init latency: {opts.job.backend} x{job.nranks}, modes {','.join(opts.modes)}, "
                f"{opts.rounds} round(s) + {opts.warmup} warm-up, ranks per root {opts.job.ranks_per_root}, "
                f"skew 0..{opts.skew_max:g} s (seed {opts.seed}), deadline {opts.job.timeout:g} s")
        rng = random.Random(f"initbench/{opts.seed}/{job.rank}")
        rows: list[dict] = []
        complete = False
        try:
            for rnd in range(opts.total_rounds):
                mine = [measure_init(job, opts, mode, rnd, rng) for mode in opts.modes]
                everyone = job.store.all_gather_obj(f"init/rows/{rnd}", mine, timeout=opts.job.timeout + 60)
                if job.rank == 0:
                    rows.extend(r for per_rank in everyone for r in per_rank)
                job.say(progress(rnd, opts, [r for per_rank in everyone for r in per_rank]))
            complete = True
        finally:  # results already measured are written even when the run is cut short
            if job.rank == 0 and rows:
                path = records.write("init", rows, metadata(job, opts, complete), opts.json)
                if complete:
                    print(table(rows), flush=True)
                    note = destroy_note(opts.job.backend, [r["destroy_s"] for r in rows if not r["warmup"]
                                                           and r["destroy_s"] is not None])
                    if note:
                        print(note, flush=True)
                print(f"results: {path}" + ("" if complete else " (incomplete run)"), flush=True)
        if job.rank != 0:
            return 0
        failed = sum(f["failed"] for f in failures(rows).values())
        failed += sum(r["outcome"] != "ok" for r in rows if r["warmup"])
        return EXIT_FAILED if failed else 0
    return run


def leak_worker(opts: JobOptions, check, json_path: str | None):
    """`--leak-check N`: the bare loop on every rank, judged on rank 0 (exit 1 on a LEAK or a failed init)."""
    from nccl_bench.init import leakloop
    from nccl_bench.core.leaks import FLOORS, LeakWatch, human

    def run(job: Job) -> int:
        job.say(f"leak check: {opts.backend} x{job.nranks}, {check.inits} inits of {check.mode} (init, one "
                f"all_reduce, destroy; {check.depth or 'no'} destroys in flight), a sample every {check.every}, "
                f"warm-up {check.warmup} inits")
        trends, counts = leakloop.loop(job, opts.backend, opts.ranks_per_root, opts.timeout, check,
                                       progress=lambda i: job.say(f"  {i}/{check.inits} inits"))
        watch = LeakWatch(check.warmup, opts.backend)
        per_rank = leakloop.gathered(job, trends, counts, opts.timeout + 60, into=watch)
        if per_rank is None:
            return 0
        findings = watch.findings()
        seconds = max(c["seconds"] for c in per_rank)
        failed = sum(c["failed"] for c in per_rank)
        print(f"{check.inits} inits in {seconds:.1f} s ({check.inits / seconds:.1f} inits/s), {failed} failed "
              "on some rank", flush=True)
        body = [(f["rank"], f["resource"], f["samples"],
                 "-" if f["slope_per_1000"] is None else human(f["slope_per_1000"], FLOORS[f["resource"]].unit),
                 "-" if f["interval_per_1000"] is None else " .. ".join(
                     human(v, FLOORS[f["resource"]].unit) for v in f["interval_per_1000"]), f["verdict"])
                for f in findings]
        print(tabulate(body, headers=["rank", "resource", "samples", "slope /1000 inits", "99% interval", "verdict"],
                       tablefmt="simple", disable_numparse=True), flush=True)
        print(watch.summary_line(findings), flush=True)
        for line in watch.leak_lines(findings):
            print(line, flush=True)
        meta = sysinfo.collect(opts.backend)
        meta["params"] = {"command": "init --leak-check", "inits": check.inits, "every": check.every,
                          "warmup": check.warmup, "mode": check.mode, "nranks": job.nranks, "per_rank": per_rank,
                          "loop": "init, one all_reduce of 1 float, destroy", "destroys_in_flight": check.depth}
        path = records.write("leakcheck", findings, meta, json_path)
        print(f"results: {path}", flush=True)
        leaked = any(f["verdict"] == "LEAK" for f in findings)
        return EXIT_FAILED if leaked or failed else 0
    return run


def simulate_options(a):
    """The scale model's options from the same command line; job-only flags are refused."""
    from nccl_bench.init.scale import SimulateOptions
    for flag, value in (("--backend", a.backend), ("--nranks", a.nranks), ("--warmup", a.warmup)):
        if value is not None:
            raise UsageError(f"{flag} has no meaning with --simulate-ranks (the model runs the store traffic only)")
    return SimulateOptions(
        ranks=a.simulate_ranks, modes=split_list(a.init, MODES, "init mode", "all"),
        ranks_per_root=[a.ranks_per_root] if a.ranks_per_root is not None else [1, 8, 128],
        reinits=1 if a.rounds is None else a.rounds, skew_max=a.skew_max, seed=a.seed, timeout=a.timeout,
        **({} if a.read_budget is None else {"read_budget": a.read_budget}), json=a.json)


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if a.simulate_ranks is not None:
        from nccl_bench.init import scale
        return scale.run(simulate_options(a))
    if a.read_budget is not None:
        raise UsageError("--read-budget belongs to the scale model (--simulate-ranks)")
    if a.ranks_per_root is None:
        a.ranks_per_root = DEFAULT_RANKS_PER_ROOT
    if a.leak_check is not None:
        from nccl_bench.init.leakloop import LeakCheckOptions
        job = job_options(a, allow_all=True)
        check = LeakCheckOptions(a.leak_check, a.leak_every, a.leak_warmup, mode=job.init[0],
                                 depth=8 if a.destroys_in_flight is None else a.destroys_in_flight)
        results.check_writable(a.json, kind="leakcheck")
        return run_job(JobSpec("init", job, WorkerRef.of(leak_worker, job, check, a.json), result=a.json))
    opts = InitBenchOptions(job=job_options(a, allow_all=True),
                            rounds=DEFAULT_ROUNDS if a.rounds is None else a.rounds,
                            warmup=1 if a.warmup is None else a.warmup,
                            skew_max=a.skew_max, seed=a.seed, json=a.json)
    return run_job(JobSpec("init", opts.job, WorkerRef.of(worker, opts), result=opts.json))
