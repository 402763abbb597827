"""`python -m stress`: parse, check the journal before anything starts, and launch the job."""
from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path

from nccl_bench.core import launch, results, sysinfo
from nccl_bench.core.errors import UsageError
from nccl_bench.measure import fits
from nccl_bench.measure.vocabulary import parse_size
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job import driver
from nccl_bench.job.driver import run_job
from nccl_bench.job.runner import guarded
from nccl_bench.job.spec import JobSpec, WorkerRef
from nccl_bench.comm.scenario import SCENARIOS
from stress import inject, journal, schedule
from stress.options import (COLLECTIVES, MAX_ROUNDS, ON_FAILURE, ROUNDS_PER_S_BOUND, Injection, StressOptions,
                            default_timeout, parse_duration)
from stress.journallock import JournalOwner, inherited as owner_inherited


def parser() -> Parser:
    p = Parser(prog=prog(None), description="churn communicator re-inits under seeded skew; "
               "classify every failure and explain it from every rank's evidence")
    add_job_args(p, "scoped", allow_all=True, ranks_per_root=1, timeout=None, helps={
        "init": "regular | stock | scoped | all (each in turn, compared)",
        "ranks_per_root": "ranks per unique-ID root (default 1: every rank a root, as in the seed)",
        "timeout": "per-round deadline, s (default 3 on GPU backends, 2 on gloo)"})
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds per init mode (default 100; with --duration, 100 a second of it)")
    p.add_argument("--duration", default=None, metavar="TIME",
                   help="run each init mode this long at most (90, 30m, 72h, 3d), its --rounds at most: the mode "
                        "ends after the round in flight, and the run with its summary and verdict")
    p.add_argument("--skew-max", type=float, default=0.05, help="max random sleep per rank before init, s (0.05)")
    p.add_argument("--seed", type=int, default=0, help="skew schedule seed (default 0)")
    p.add_argument("--collective", default="all_reduce", help="verification op: " + ", ".join(COLLECTIVES))
    p.add_argument("--bytes", default="4096", help="bytes of its largest buffer: 4096, 64K, 1M (default 4096; "
                   "at most 256M on gloo)")
    p.add_argument("--on-failure", default="continue", help=" | ".join(ON_FAILURE))
    p.add_argument("--journal", default=None,
                   help="JSON-lines journal (default results/runs/stress-<machine>-<time>-<pid>.jsonl)")
    p.add_argument("--summary-json", default=None, metavar="PATH",
                   help="write the summary here (default: <journal>-summary.json); without --journal "
                        "the journal goes beside it as <PATH stem>.journal.jsonl")
    p.add_argument("--resume", action="store_true", help="continue the --journal where it ends")
    p.add_argument("--check-ids", action="store_true",
                   help="compare ID fingerprints through the store before init (catches stale IDs)")
    p.add_argument("--baseline", type=int, default=0, metavar="N",
                   help="first measure N bare init+destroy cycles (and N with the verify op) for the raw rate")
    p.add_argument("--inject", action="append", default=[], metavar="KIND[@ROUND][:RANK]",
                   help="inject a fault (repeatable): " + ", ".join(inject.KINDS) + "; ROUND defaults to 1, "
                        "RANK to the last rank (see stress/inject.py)")
    p.add_argument("--max-restarts", type=int, default=0, metavar="N",
                   help="self-launch: restart the worker group up to N times after a rank fails "
                        "(torchrun's --max-restarts); a restarted group resumes the journal")
    p.add_argument("--destroys-in-flight", type=int, default=None, metavar="K",
                   help="destroys (aborts) that may run behind the next rounds, each round's still journaled "
                        "with its own (default 8; torch: 0); 0: serial, each round destroys before the next")
    p.add_argument("--scenario", default="restart", choices=SCENARIOS,
                   help="restart: a new process group per round on the same store (default); same-group: "
                        "one process group, a new communicator per round on another device, as in "
                        "pytorch#178473's repro (scoped = ranks per root raised to the world size)")
    p.add_argument("--leak-every", type=int, default=100, metavar="N",
                   help="every rank samples RSS, fds, threads, GPU memory and NCCL shm every N rounds; the "
                        "summary fits a slope per 1,000 rounds and says LEAK (default 100; 0: off)")
    p.add_argument("--leak-warmup", type=int, default=None, metavar="ROUNDS",
                   help="rounds whose samples the slope leaves out (default: a fifth of the run, at most 1000)")
    p.add_argument("--fail-on-leak", action="store_true", help="exit 1 when the leak watch says LEAK")
    p.add_argument("--print-schedule", action="store_true", help="print the skew schedule and exit")
    return p


def options(a) -> StressOptions:
    duration = parse_duration(a.duration) if a.duration is not None else None
    rounds = a.rounds if a.rounds is not None else (
        100 if duration is None else min(MAX_ROUNDS, max(1, math.ceil(duration * ROUNDS_PER_S_BOUND))))
    return StressOptions(job_options(a, allow_all=True, default_timeout=default_timeout), rounds=rounds,
                         duration=duration,
                         skew_max=a.skew_max, seed=a.seed, collective=a.collective,
                         bytes=parse_size(a.bytes, "--bytes"),
                         on_failure=a.on_failure, resume=a.resume, summary_json=a.summary_json,
                         journal=a.journal or (str(Path(a.summary_json).with_suffix(".journal.jsonl"))
                                               if a.summary_json else None),
                         check_ids=a.check_ids, baseline=a.baseline, inject=[Injection.parse(i) for i in a.inject],
                         max_restarts=a.max_restarts, destroys_in_flight=a.destroys_in_flight,
                         scenario=a.scenario, leak_every=a.leak_every, leak_warmup=a.leak_warmup,
                         fail_on_leak=a.fail_on_leak)


def journal_path(opts: StressOptions) -> Path:
    """The journal this run writes: --journal, or a new default name under results/runs/."""
    if opts.journal:
        return Path(opts.journal)
    path = journal.default_path()
    path.parent.mkdir(parents=True, exist_ok=True)  # results/runs/ may not exist in a fresh checkout
    return path


def check_journal(opts: StressOptions, nranks: int, path: Path) -> None:
    """In the driver, holding the journal, before any process starts: can it be written or
    continued (exit 2 if not)?"""
    if opts.summary_json:
        results.check_writable(opts.summary_json, "--summary-json")
    if opts.resume:
        done: dict[str, int] = {}  # rounds per mode the journal holds

        def count(row: dict) -> None:
            done[row["mode"]] = max(done.get(row["mode"], 0), int(row["round"]) + 1)
        journal.check_resumable(journal.read(path, on_round=count), opts.identity(nranks), path)
        if max(done.values(), default=0) > opts.rounds:
            raise UsageError(f"--resume: {path} already holds {max(done.values())} rounds of a mode, more than "
                             f"--rounds {opts.rounds}; pass --rounds {max(done.values())} or more to go on")
        journal.check_appendable(path)
    else:
        journal.check_new(path)


def elastic_journal() -> Path | None:
    """Under a launcher that may restart the group: a name every restart agrees on (its run id)."""
    if int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0) <= 0:
        return None
    run_id = launch.detect().run_id
    return journal.default_path().with_name(f"stress-{sysinfo.machine_name()}-{run_id}.jsonl")


def spec(opts: StressOptions) -> JobSpec:
    """The job every rank runs: the rounds' loop needs torch, loaded where the job runs (stress.loop)."""
    return JobSpec("stress", opts.job, WorkerRef("stress.loop", "worker", (opts, opts.journal)), result=opts.journal)


def launched(opts: StressOptions, path: str) -> int:
    """The driver: self-launch the workers; then say how any rank ended that the launcher saw die."""
    failures: list[dict] = []
    code = driver.launch(spec(opts), max_restarts=opts.max_restarts, failures=failures)
    # SIGTERM is the launcher's own (how it stops the others once one rank failed); SIGTERM or SIGINT sent
    # to a rank is a stop the ranks carried out (the journal says so): neither is a rank that was killed
    died = [f for f in failures if f.get("signal") and f["signal"] not in ("SIGTERM", "SIGHUP", "SIGINT")]
    if died and Path(path).exists():
        for f in died:
            print(f"launcher: rank {f['rank']} (pid {f['pid']}) was killed by {f['signal']}", flush=True)
        journal.Writer(path).note({"type": "launcher", "failures": failures})
    return code


def console() -> int:
    """The `nccl-stress` console script, and `python -m stress`."""
    from nccl_bench import honour_ctrl_c
    honour_ctrl_c()
    return guarded(lambda: main(sys.argv[1:]))


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    opts = options(a)
    ident = launch.detect()
    nranks = opts.job.world_ranks()
    fits.require("--bytes", opts.job.backend, [opts.collective], opts.bytes, nranks)
    opts.inject = inject.resolve(opts.inject, opts.rounds, nranks, opts.job.backend, list(opts.job.init),
                                 opts.job.ranks_per_root, opts.collective)
    if a.print_schedule:
        print(schedule.render(opts.seed, opts.rounds, nranks, opts.skew_max))
        return 0
    if launch.detect() is None:  # the driver: fix the journal's name so every worker agrees on it
        path = journal_path(opts)
        with JournalOwner(path):  # one writer per journal, for the whole run (its workers included)
            check_journal(opts, nranks, path)
            opts.journal = str(path)
            return launched(opts, str(path))
    if opts.journal is None:  # under a launcher: rank 0 names it (only rank 0 writes it)
        path = elastic_journal() or journal.default_path()
        if ident.rank == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        opts.journal = str(path)
    with contextlib.ExitStack() as held:
        if ident.rank == 0 and not owner_inherited():  # under torchrun/srun: rank 0 writes, rank 0 holds
            held.enter_context(JournalOwner(opts.journal))
        return run_job(spec(opts))
