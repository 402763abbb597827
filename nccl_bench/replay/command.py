"""`replay`: a real job's communication, run on this node and judged against the job itself.

    nccl-bench replay FILES_OR_DIR... [-n ITERS] [-w WARMUP] [--json PATH] [--max-slowdown X]

Reads Flight Recorder dumps, profiler traces or a workload file (nccl_bench.replay.traces: every file
checked before anything runs), says where a hung job's ranks stopped, then launches a job that replays
every rank's sequence on the trace's groups (nccl_bench.replay.worker) and folds the times into one row
per distinct call (nccl_bench.replay.rows): a table, and a JSON file of flat rows plus one
metadata block. Exit 1 for wrong values, or with --max-slowdown for rows slower than the job beyond the
spread; 2 for bad input.
"""
from __future__ import annotations

import json
import os
import shutil

from nccl_bench.core import launch, results, scratch
from nccl_bench import records
from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job.driver import run_job
from nccl_bench.job.runner import Job
from nccl_bench.job.spec import JobSpec, WorkerRef

MAX_ITERS = 10_000
# a practical margin: samples this tight separate at any difference, and under 1 us on a 5-6 us call (10-15 %)
# was seen between two runs of one job on one machine (issue 70)
SLOWER_MARGIN = 0.10


def parser() -> Parser:
    p = Parser(prog=prog("replay"), description="replay a job's collectives from its Flight Recorder "
               "dumps, profiler trace or a workload file, and judge them against the job's own times")
    p.add_argument("traces", nargs="+", metavar="FILE_OR_DIR", help="one dump or trace per rank (or their folder), "
                   "or one workload file")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed passes of the whole sequence (default 20)")
    p.add_argument("-w", "--warmup", type=int, default=2, help="untimed passes first (default 2)")
    p.add_argument("--json", default=None, help="result file (default results/runs/replay-<machine>-<time>.json)")
    p.add_argument("--max-slowdown", type=float, default=None, metavar="X",
                   help="exit 1 when a call runs more than X times the job's own time, beyond the spread")
    p.add_argument("--slower-margin", type=float, default=SLOWER_MARGIN, metavar="F",
                   help="a row is SLOWER only when beyond both sides' spread and more than this fraction slower than "
                        "the job (default 0.1: 10 %%)")
    p.add_argument("--list", action="store_true", help="read and check the files, say what would be replayed, "
                   "and run nothing (with --json: what was read, as a file)")
    p.add_argument("--allow-missing-ranks", action="store_true",
                   help="replay the groups whose ranks all have a file, leaving out the others (default: a rank with "
                        "no file, or one that cannot be read, stops the replay)")
    p.add_argument("--ranks-per-node", type=int, default=None, metavar="K",
                   help="the job ran K ranks a node, in rank order (its --nproc-per-node): the groups that spanned "
                        "nodes get no ratio against the job's times (a trace of several nodes says so itself; a "
                        "dump cannot)")
    add_job_args(p, timeout=120.0)
    return p


def check_args(a) -> None:
    """The options that need no trace, checked before any trace is read."""
    if not 1 <= a.iters <= MAX_ITERS:
        raise UsageError(f"-n/--iters must be 1..{MAX_ITERS}, got {a.iters}")
    if not 0 <= a.warmup <= MAX_ITERS:
        raise UsageError(f"-w/--warmup must be 0..{MAX_ITERS}, got {a.warmup}")
    if a.ranks_per_node is not None and not 1 <= a.ranks_per_node <= 4096:
        raise UsageError(f"--ranks-per-node must be 1..4096, got {a.ranks_per_node}")
    if a.max_slowdown is not None and not a.max_slowdown > 0:
        raise UsageError(f"--max-slowdown must be above 0, got {a.max_slowdown:g}")
    if not 0 <= a.slower_margin <= 10:
        raise UsageError(f"--slower-margin must be 0 to 10 (a fraction: 0.1 is 10 %), got {a.slower_margin:g}")
    results.check_writable(a.json, kind=None if a.list else "replay")


MAX_SAMPLES = 2_000_000  # call times a rank keeps and sends to rank 0: passes x its calls


class ReplayOptions:
    def __init__(self, a, workload, digest: str):
        calls = max(map(len, workload.ranks.values()), default=0)
        if calls * a.iters > MAX_SAMPLES:
            raise UsageError(f"-n/--iters {a.iters} x {calls} calls a rank is more than {MAX_SAMPLES} call times "
                             f"to keep; use -n {max(1, MAX_SAMPLES // max(calls, 1))} or fewer")
        if a.max_slowdown is not None and not workload.duration_known():
            raise UsageError("--max-slowdown needs the job's own times, and this trace has none (record with "
                             "TORCH_NCCL_ENABLE_TIMING=1, or give time_us in a workload file)")
        self.iters, self.warmup, self.json, self.max_slowdown = a.iters, a.warmup, a.json, a.max_slowdown
        self.slower_margin = a.slower_margin
        self.digest = digest  # names the workload across nodes (accept's golden replay)
        self.job = job_options(a)
        # as many ranks as the trace has, where this node has them; under torchrun or srun, the launcher's world
        if self.job.nranks is None and launch.detect() is None:
            from nccl_bench.comm import gpu_count
            here = workload.nranks if self.job.backend == "gloo" else min(gpu_count(), workload.nranks)
            self.job.nranks = max(1, here)


def main(argv: list[str]) -> int:
    """The driver reads every file once, checks what the replay may start (its ranks, its memory), and hands
    each rank its own sequence (sequence_worker); under torchrun, srun or mpirun every rank reads the files
    itself."""
    from nccl_bench.replay import admission, traces
    a = parser().parse_args(argv)
    check_args(a)
    workload = traces.load(a.traces, a.allow_missing_ranks)
    if a.ranks_per_node:
        workload.place(a.ranks_per_node, "--ranks-per-node")
    if a.list:
        return list_only(a, workload)
    workload = workload.compact()
    opts = ReplayOptions(a, workload, traces.digest(a.traces))
    ident = launch.detect()
    if ident is not None:
        fit_some(workload, ident.world_size)
        return run_job(JobSpec("replay", opts.job, WorkerRef.of(worker, opts, workload), result=opts.json))
    fitted = fit_some(workload, opts.job.local_ranks())
    admission.check(fitted, opts.job.backend, opts.job.local_ranks())
    for line in traces.describe(fitted):
        print(line, flush=True)
    folder = write_sequences(fitted, opts.digest)
    try:
        return run_job(JobSpec("replay", opts.job, WorkerRef.of(sequence_worker, opts, folder),
                               result=opts.json))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fit_some(workload, nranks: int):
    """The groups that fit `nranks` ranks; UsageError where none does, before any rank starts (a replay of nothing
    would say nothing and exit 0)."""
    fitted = workload.fit(nranks)
    if any(fitted.ranks.values()):
        return fitted
    least = min(workload.groups.values(), key=lambda g: max(g.ranks), default=None)
    need = f" (the smallest, {least.label()}, needs {max(least.ranks) + 1})" if least else ""
    raise UsageError(f"{workload.file_of(0)}: every group of this job needs more than the {nranks} rank(s) "
                     f"here{need}; nothing to replay")


def sequence_worker(opts: ReplayOptions, folder: str):
    """A rank of ours: its calls as the driver read them (rank 0: every rank's, to fold)."""
    workload, _ = read_sequences(folder)
    return worker(opts, workload)


def write_sequences(wl, digest: str) -> str:
    """Each rank's calls in a file of its own (and every rank's in one, for rank 0), in a folder the launcher
    removes when the job ends."""
    folder = scratch.make("replay")
    for r in [*wl.ranks, None]:
        name = "all" if r is None else f"rank{r}"
        with open(os.path.join(folder, f"{name}.json"), "w") as f:
            json.dump({**wl.sequence_doc(r), "digest": digest}, f)
    return folder


def read_sequences(folder: str):
    """(this rank's workload, the workload's digest): rank 0 reads every rank's calls, the others their own."""
    from nccl_bench.replay.workload import Workload
    rank = os.environ.get("RANK", "0")
    name = "all" if rank == "0" else f"rank{rank}"
    try:
        with open(os.path.join(folder, f"{name}.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{folder}: cannot read {name}.json ({type(e).__name__})") from None
    return Workload.from_sequence_doc(doc), doc["digest"]


def list_only(a, workload) -> int:
    """--list: what was read, on the terminal and (--json) as a file; nothing runs."""
    from nccl_bench.replay import traces
    for line in traces.describe(workload):
        print(line, flush=True)
    if a.json:
        meta = {"replay": {**summary(workload), "digest": traces.digest(a.traces)}, "listed": True}
        print(f"# results: {records.write('replay', [], meta, a.json)}", flush=True)
    return 0


def summary(wl) -> dict:
    """What a replay's metadata says of the workload it read."""
    return {"source": wl.source, "files": wl.files, "trace_nranks": wl.nranks,
            "groups": {k: {"ranks": list(g.ranks), "desc": g.desc} for k, g in wl.groups.items()},
            "notes": wl.notes, "skipped": wl.skipped, "stopped": wl.stopped, "trace_meta": wl.meta,
            "calls_per_rank": {str(r): len(ops) for r, ops in wl.ranks.items()}}


def worker(opts: ReplayOptions, workload):
    def run(job: Job) -> int:
        from nccl_bench.replay import rows as replay_rows, worker as replay_worker
        mine = replay_worker.worker(opts, workload)(job)
        everyone = job.store.all_gather_obj("replay/result", mine, timeout=opts.job.timeout + 60)
        if job.rank != 0:
            return 0
        wl = workload.fit(job.nranks)
        if not job.ident.single_node:
            wl = wl.crossing_here(job.ident.local_world_size)
        rows, seq = replay_rows.fold(wl, everyone, opts.slower_margin)
        bad = replay_rows.verdict(rows, opts.max_slowdown)
        meta = metadata(opts, wl, seq, job.nranks, everyone)
        path = records.write("replay", [r.to_json() for r in rows], meta, opts.json)
        for line in lines(rows, seq, bad, opts):
            print(line, flush=True)
        print(f"# results: {path}", flush=True)
        return EXIT_FAILED if bad else 0
    return run


def metadata(opts: ReplayOptions, wl, seq: dict, nranks: int, outs: list[dict]) -> dict:
    from nccl_bench.core import sysinfo
    meta = sysinfo.collect(opts.job.backend)
    meta["replay"] = {**summary(wl), "nranks": nranks, "digest": opts.digest,
                      "iters": opts.iters, "warmup": opts.warmup, "max_slowdown": opts.max_slowdown,
                      "slower_margin": opts.slower_margin,
                      "ran": {str(o["rank"]): o["ran"] for o in outs},
                      "timing": "one cuda event between calls, each pass enqueued whole behind a hold; kernels from "
                      "profiled passes" if opts.job.backend != "gloo"
                      else "wall clock around each call, waited for", "time_unit": "us", "bw_unit": "GB/s (1e9 B/s)"}
    meta["sequence"] = seq
    return meta


def lines(rows: list, seq: dict, bad: list, opts: ReplayOptions) -> list[str]:
    """The table (one line per replay_rows.ReplayRow), the sequence, the wrong values and each failing row."""
    from tabulate import tabulate
    f = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    ready = any(r.trace_ready_us is not None for r in rows)
    kernels = any(r.ready_us is not None for r in rows)
    body = [[r.collective, r.bytes, r.dtype, _ranks(r.group_ranks), r.calls, f(r.time_us), f(r.busbw),
             *([f(r.ready_us)] if kernels else []), f(r.trace_time_us),
             *([f(r.trace_ready_us), f(r.trace_overlap_pct, 0)] if ready else []),
             f(r.ratio), r.nwrong, "SLOWER" if r.slower else ""] for r in rows]
    out = [tabulate(body, headers=["collective", "bytes", "dtype", "group_ranks", "calls", "time_us", "busbw",
                                   *(["ready_us"] if kernels else []), "trace_us",
                                   *(["trace_ready", "overlap%"] if ready else []), "x trace", "#wrong", ""],
                    tablefmt="plain", disable_numparse=True)]
    if kernels:
        out.append("# time_us: each call's time here, as bench times one; ready_us: its kernels here once its last "
                   "rank had started them (profiled passes)")
    if not ready and any(r.trace_time_us is not None for r in rows):
        out.append("# trace_us: the job's whole time per call, from its start to its end event: each call's wait for "
                   "its late peers and the job's own gaps are in it, so x trace well below 1 is no speed-up; a "
                   "profiler trace of one node gives the job's ready time (docs/replay.md)")
    if ready:
        out.append("# trace_us: the job's whole time per call; trace_ready: once its last rank had started it; "
                   "overlap%: the share of it that the job's other kernels ran beside it; x trace: ready_us over "
                   "trace_ready where both are known, else time_us over the job's time")
    here = f"{f(seq['here_median_us'])} us (quartiles {f(seq['here_p25_us'])}..{f(seq['here_p75_us'])})"
    trace = (f"{f(seq['trace_us'])} us" + (" (its calls' ready times)" if seq["trace_of"] == "ready_us" else
                                           " of whole durations, each call's waits for its peers in them: not a "
                                           "time to compare, no ratio" if seq["trace_of"] == "duration_us" else "")
             if seq["trace_us"] else str(seq["trace_of"]) if seq["trace_of"] and seq["trace_of"].startswith("not ")
             else "not known (no durations in the trace)")
    if seq.get("here_ready_us") is not None:
        here += f", its kernels' ready times {f(seq['here_ready_us'])} us"
        if seq.get("calls_without_ready"):
            trace += (f", both without the calls that have no ready time on one side ({seq['calls_without_ready']} "
                      "over the ranks)")
    out.append(f"# sequence per pass (the slowest rank's calls, summed): here {here}; in the trace {trace}"
               + (f"; {seq['ratio']:.2f} x" + (" (ready over ready)" if seq.get("ratio_of") == "ready" else "")
                  if seq["ratio"] else ""))
    if any(r.ratio for r in rows):
        out.append(f"# SLOWER: beyond both sides' spread (its lower quartile above the job's upper) and more than "
                   f"{opts.slower_margin:.0%} slower than the job (--slower-margin)")
    wrong = sum(r.nwrong for r in rows)
    out.append(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
    for r in bad:
        why = (f"{r.nwrong} wrong values" if r.nwrong else
               f"{r.ratio:.2f} x the job's time, more than --max-slowdown {opts.max_slowdown:g}")
        out.append(f"FAIL {r.collective} {r.bytes} B {r.dtype} on ranks {r.group_ranks}: {why}")
    return out


def _ranks(ranks: list[int]) -> str:
    return ",".join(map(str, ranks)) if len(ranks) <= 8 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"
