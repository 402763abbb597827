"""The asv suite's logic; benchmarks/*.py only declare parameters and call in here.

Each benchmark class has one `setup_cache` that runs its bounded jobs (nccl_bench.job.jobs:
own session, killed whole on timeout, inside asv's own timeout) and keeps, per job,
either the numbers or the job's failure. Per parameter combination, `setup` then looks
its samples up (nccl_bench.asv.samples: asv records their median and spread): a combination
this machine cannot run, or cannot run steadily, raises NotImplementedError (asv records it
as skipped, with the reason), one whose job failed raises JobFailed with the job's reason
(asv records it as failed and shows the reason with `asv run -e`). Every other combination
still gets its samples.

Which backend and how many ranks: nccl on one rank per GPU, else gloo on 2 ranks (the
CPU model). NCCL_BENCH_ASV_BACKEND and NCCL_BENCH_ASV_NRANKS override both.

asv's plugin for this suite (machine name, commit, versions, offline dashboard) is
nccl_bench.asv.plugin.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from nccl_bench.comm.bootstrap import MODES
from nccl_bench.measure.collectives import NAMES, get as collective
from nccl_bench.job.jobs import JobFailed, run_result
from nccl_bench.asv.samples import Samples, per_block

STRESS = "stress.__main__"  # `python -m stress` as a module path: the layer test sees the dependency in it

# The collectives NCCL runs in one call (the point-to-point rounds of gather, scatter, alltoallv and
# hypercube have no history here yet: their sizes and rank rules differ from these points).
COLLECTIVES = tuple(n for n in NAMES if not collective(n).rounds)
ALGOS = ("ring", "tree")
# "small": the smallest size that moves data on every rank (8 B, or 16 B per rank for the
# chunked collectives, following nccl-tests' rounding).
SIZES = {"small": None, "1 MiB": 1 << 20, "64 MiB": 64 << 20, "1 GiB": 1 << 30}
CYCLES = 3  # bench -N: each cycle of the sweep one sample of every point
RANKS_PER_ROOT = (1, 128)  # every rank a root; PyTorch's default (one root up to 128 ranks)
# phase -> the init row's field. "init" is the whole create call and "lifetime" a communicator's whole life
# as a churn lives it (create, the first collective, destroy), each timed from outside (docs/asv.md says from
# which commit the two mean this)
PHASES = {"exchange": "exchange_s", "create": "create_s", "init": "init_s",
          "first_collective": "first_collective_s", "destroy": "destroy_s", "lifetime": "lifetime_s"}

# What cannot be steady on the CPU model (measured between runs of identical code on a 2-core machine,
# docs/asv.md "Steady enough to compare"): asv skips these there, with the reason.
GLOO_BANDWIDTH = ("gloo's bandwidth swings 2-10 x between runs of identical code on a CPU machine "
                  "(docs/asv.md): not a series to judge; measured on GPUs")
GLOO_SUB_MS = {"exchange", "create", "first_collective"}
GLOO_SUB_MS_WHY = ("under a millisecond on gloo, where it drifts 25-56 % between runs of identical code "
                   "(docs/asv.md); 'init' (the whole create call) and 'lifetime' carry it on the CPU model")
STRESS_SEED = 1  # the same skews every run: a run's rate then moves with the code, not the draw
STRESS_BLOCK = 3  # rounds per sample

# setup_cache budgets (seconds): asv's own timeout for each; every job gets what is left
# minus a margin, so each is reaped before asv gives up on the setup_cache process.
BANDWIDTH_BUDGET = 240
INIT_BUDGET = 150
STRESS_BUDGET = 60
MARGIN = 10.0


# --- the machine ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Machine:
    backend: str
    gpus: int
    nranks: int

    @property
    def gloo(self) -> bool:
        return self.backend == "gloo"

    def cannot_run(self) -> str | None:
        """Why this machine runs none of the suite, or None."""
        if not self.gloo and self.gpus == 0:
            return f"backend {self.backend} needs a GPU and this machine has none"
        if not self.gloo and self.nranks > self.gpus:
            return f"{self.nranks} ranks need {self.nranks} GPUs and this machine has {self.gpus}"
        if self.nranks < 2:
            return f"a collective needs 2 or more ranks, this machine gives {self.nranks}"
        return None


def this_machine() -> Machine:
    from nccl_bench.comm import gpu_count
    gpus = gpu_count()
    backend = os.environ.get("NCCL_BENCH_ASV_BACKEND") or ("nccl" if gpus else "gloo")
    if backend not in ("nccl", "torch", "gloo"):
        raise ValueError(f"NCCL_BENCH_ASV_BACKEND: unknown backend '{backend}' (nccl, torch or gloo)")
    nranks = os.environ.get("NCCL_BENCH_ASV_NRANKS")
    try:
        n = int(nranks) if nranks else (2 if backend == "gloo" else gpus)
    except ValueError:
        raise ValueError(f"NCCL_BENCH_ASV_NRANKS must be a number of ranks, got '{nranks}'") from None
    return Machine(backend, gpus, n)


class Budget:
    """Seconds left of a setup_cache's asv timeout; each job gets at most its share."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds - MARGIN

    def job(self, cap: float) -> float:
        return max(0.0, min(cap, self.end - time.monotonic()))


def _job_args(m: Machine) -> list[str]:
    return ["--backend", m.backend, "--nranks", str(m.nranks)]


def _outcome(fn) -> dict:
    """{"value": fn()} or {"error": the job's reason}: one failed job spoils only its own points."""
    try:
        return {"value": fn()}
    except JobFailed as e:
        return {"error": str(e)}
    except (KeyError, IndexError, TypeError, ValueError) as e:  # a result of another shape
        return {"error": f"unexpected result: {type(e).__name__}: {e}"}


def _cache(seconds: float, jobs) -> dict:
    """A setup_cache: this machine, and the outcome of each of `jobs(machine)`'s (key, run) pairs,
    run(budget) one after the other within `seconds` (asv's timeout for the cache)."""
    m = this_machine()
    cache = {"machine": asdict(m), "jobs": {}}
    if m.cannot_run():
        return cache
    budget = Budget(seconds)
    for key, run in jobs(m):
        cache["jobs"][key] = _outcome(lambda: run(budget))
    return cache


def _value(entry: dict | None, what: str):
    if entry is None:
        raise NotImplementedError(f"{what}: not run on this machine")
    if "error" in entry:
        raise JobFailed([what], entry["error"])
    return entry["value"]


# --- bandwidth: collective x algo x init x size -> time per op, busbw ---------------------------
def bandwidth_jobs(m: Machine) -> list[tuple[str, str]]:
    """(init, algo) per job: one communicator each, so stock's keys are read once per job."""
    return [] if m.gloo else [(init, algo) for init in MODES for algo in ALGOS]


def bandwidth_skip(m: Machine, collective: str, algo: str, size: str) -> str | None:
    if (why := m.cannot_run()):
        return why
    if m.gloo:
        return GLOO_BANDWIDTH
    if algo == "tree" and collective != "all_reduce":
        return f"NCCL has no tree algorithm for {collective}"
    return None


def _bench_argv(m: Machine, init: str, algo: str) -> list[str]:
    return ["nccl_bench", "bench", *_job_args(m), "--init", init, "--ranks-per-root", "1", "--algo", algo,
            "--collective", ",".join(COLLECTIVES) if algo == "ring" else "all_reduce",
            "-b", "8", "-e", "1G", "-f", "2", "-n", "20", "-w", "5", "-c", "1", "-N", str(CYCLES)]


def _bench_points(res) -> dict:
    """{(collective, size label): {time_s: [...], busbw_gbps: [...], bytes}} from one bench JSON (out of
    place), one sample per cycle of the sweep."""
    by_cycle: dict[tuple[str, int], list[dict]] = {}
    for r in res.every_cycle():
        by_cycle.setdefault((r["collective"], r.get("cycle") or 0), []).append(r)
    out: dict = {}
    for (coll, _), rows in sorted(by_cycle.items()):
        rows.sort(key=lambda r: r["size"])
        for label, size in SIZES.items():
            hit = rows[0] if size is None else next((r for r in rows if r["size"] == size), None)
            if hit is not None:
                p = out.setdefault((coll, label), {"time_s": [], "busbw_gbps": [], "bytes": hit["size"]})
                p["time_s"].append(hit["out_of_place"]["time"] * 1e-6)
                p["busbw_gbps"].append(hit["out_of_place"]["bus_bw"])
    return out


def bandwidth_cache() -> dict:
    def jobs(m: Machine):
        for init, algo in bandwidth_jobs(m):
            yield (init, algo), lambda budget, init=init, algo=algo: _bench_points(
                run_result(_bench_argv(m, init, algo), budget.job(100.0), json_flag="-J"))
    return _cache(BANDWIDTH_BUDGET, jobs)


def bandwidth_point(cache: dict, collective: str, algo: str, init: str, size: str) -> dict:
    m = Machine(**cache["machine"])
    if (why := bandwidth_skip(m, collective, algo, size)):
        raise NotImplementedError(why)
    points = _value(cache["jobs"].get((init, algo)), f"bench {init}/{algo}")
    if (collective, size) not in points:
        raise JobFailed([f"bench {init}/{algo}"], f"no {collective} row at {size} in its result")
    p = points[(collective, size)]
    return {"time_s": Samples(p["time_s"]), "busbw_gbps": Samples(p["busbw_gbps"])}


# --- init latency: init mode x ranks per root x phase -> seconds, every init one sample ---------------
def init_skip(m: Machine, init: str, ranks_per_root: int, phase: str | None = None) -> str | None:
    if (why := m.cannot_run()):
        return why
    if init == "regular" and ranks_per_root != max(RANKS_PER_ROOT):
        return "regular init has one root whatever ranks-per-root says (measured at 128)"
    if m.gloo and phase in GLOO_SUB_MS:
        return f"{phase}: {GLOO_SUB_MS_WHY}"
    return None


def _init_argv(m: Machine, ranks_per_root: int) -> list[str]:
    modes = [i for i in MODES if not init_skip(m, i, ranks_per_root)]
    # a stale stock init hangs until the 3 s deadline: a few times a healthy init (docs/validation.md)
    return ["nccl_bench", "init", *_job_args(m), "--init", ",".join(modes), "--ranks-per-root", str(ranks_per_root),
            "--rounds", "10" if m.gloo else "6", "--warmup", "1", "--timeout", "3"]


def _init_samples(res) -> dict:
    """{mode: {phase: [seconds of every init that worked, every rank]} or {"error": why}} over the
    measured rounds.

    stock's stale-key failures are its known bug (pytorch#178473): its samples are the
    inits that worked, and with none ({"skipped": why}) it has no number this run (ranks skewed by a
    loaded machine read stale IDs every round: gloo, 2 cores, a CPU-heavy job beside). A failed regular
    or scoped init is a failure of the benchmark.
    """
    rows = [r for r in res.rows if not r["warmup"]]
    out = {}
    for mode in dict.fromkeys(r["mode"] for r in rows):
        mine = [r for r in rows if r["mode"] == mode]
        ok = [r for r in mine if r["outcome"] == "ok"]
        bad = sorted({f"{r['outcome']} in {r['failed_op']}: {r['error']}" for r in mine if r["outcome"] != "ok"})
        if not ok and mode == "stock":
            out[mode] = {"skipped": f"stock: none of {len(mine)} inits worked, its stale-key bug (pytorch#178473); "
                                    f"first: {bad[0] if bad else '?'}"}
        elif not ok or (bad and mode != "stock"):
            out[mode] = {"error": f"{mode}: {len(mine) - len(ok)} of {len(mine)} inits failed; first: "
                                  f"{bad[0] if bad else '?'}"}
        else:
            out[mode] = {phase: [v for r in ok if (v := r.get(PHASES[phase])) is not None] for phase in PHASES}
    return out


def init_cache() -> dict:
    def jobs(m: Machine):
        cap = 60.0 if m.gloo else 90.0
        for rpr in RANKS_PER_ROOT:
            # exit 1 is a failed init somewhere: judged per mode below, not per job
            yield rpr, lambda budget, rpr=rpr: _init_samples(
                run_result(_init_argv(m, rpr), budget.job(cap), ok_codes=(0, 1)))
    return _cache(INIT_BUDGET, jobs)


def init_phase(cache: dict, init: str, ranks_per_root: int, phase: str) -> Samples:
    m = Machine(**cache["machine"])
    if (why := init_skip(m, init, ranks_per_root, phase)):
        raise NotImplementedError(why)
    modes = _value(cache["jobs"].get(ranks_per_root), f"init --ranks-per-root {ranks_per_root}")
    got = modes.get(init)
    if got is not None and "skipped" in got:
        raise NotImplementedError(got["skipped"])  # asv: skipped, with its reason
    if got is None or "error" in got:
        raise JobFailed([f"init {init}"], got["error"] if got else "no rows for this mode")
    if not got[phase]:
        raise JobFailed([f"init {init}"], f"no {phase} time recorded")
    return Samples(got[phase])


# --- stress: a short scoped churn -> rounds per second, a block of rounds one sample -------------------
def _stress_argv(m: Machine, journal: Path) -> list[str]:
    return [STRESS, *_job_args(m), "--init", "scoped", "--rounds", "30", "--seed", str(STRESS_SEED),
            "--journal", str(journal)]


def round_seconds(journal: Path) -> list[float]:
    """Each round's seconds from a stress journal: its slowest rank's, from the round's start (skew
    included) to its end."""
    out = []
    with open(journal) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "round" and rec.get("verdict") == "ok":
                out.append(max(r.get("elapsed_s") or 0.0 for r in rec["ranks"]))
    return out


def _stress_blocks(m: Machine, budget: Budget) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="nccl_bench_asv_") as tmp:
        journal = Path(tmp) / "stress.jsonl"
        res = run_result(_stress_argv(m, journal), budget.job(STRESS_BUDGET), json_flag="--summary-json")
        blocks = per_block(round_seconds(journal), STRESS_BLOCK)
    if not blocks:
        raise JobFailed([STRESS], f"fewer than {STRESS_BLOCK} rounds timed ({res.top['rounds']} rounds)")
    return blocks


def stress_cache() -> dict:
    def jobs(m: Machine):
        yield "scoped", lambda budget: _stress_blocks(m, budget)
    return _cache(STRESS_BUDGET, jobs)


def stress_rate(cache: dict) -> Samples:
    """Rounds per second of the churn (each round: init, verify, destroy), one sample per block of rounds."""
    m = Machine(**cache["machine"])
    if (why := m.cannot_run()):
        raise NotImplementedError(why)
    return Samples(1.0 / s for s in _value(cache["jobs"].get("scoped"), "stress --init scoped"))
