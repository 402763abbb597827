"""The driver: a command started with no launcher around it. It has checked its options; here it fixes where
the ranks' library logs go, starts the ranks (nccl_bench.job.launcher), each handed the job as checked
(nccl_bench.job.spec), and, when the job failed, points at those logs. It never joins the job itself: that is a
rank's part (nccl_bench.job.runner)."""
from __future__ import annotations

import sys
from dataclasses import replace

from nccl_bench.core import startmarks
from nccl_bench.core.errors import EXIT_FAILED
from nccl_bench.core import launch as launch_env
from nccl_bench.job import launcher, logs
from nccl_bench.job.runner import end_rank_process, run_rank
from nccl_bench.job import spec as jobspec
from nccl_bench.job.options import store_timeout_default
from nccl_bench.job.spec import JobSpec

RANK_MODULE = "nccl_bench.job.rank"  # what each rank runs (launcher.run_module)


def say_starting(command: str, nranks: int, backend: str | None) -> None:
    """On a terminal, at once: what the seconds before the ranks' first line are spent on."""
    if not sys.stderr.isatty():
        return
    gpu = backend in ("nccl", "torch")
    work = "import their libraries, then CUDA and NCCL init" if gpu else "import torch and meet"
    print(f"{command}: starting {nranks} local rank(s) on {backend or 'the default backend'}; they {work}",
          file=sys.stderr, flush=True)


def launch(spec: JobSpec, max_restarts: int = 0, failures: list | None = None) -> int:
    """Start the job's local ranks, each handed `spec` (nccl_bench.job.rank), and wait for them all."""
    opts = spec.job
    store_timeout_default()  # a bad setting is the driver's one line, before any rank starts
    startmarks.check()
    stem = logs.fix_stem(spec.result, spec.command, opts.verbose)
    nranks = opts.local_ranks()
    say_starting(spec.command, nranks, opts.backend)
    path = jobspec.write(replace(spec, argv=tuple(sys.argv)))
    try:
        code = launcher.self_launch(nranks, ["-m", RANK_MODULE, path], preload=launcher.preload(spec.torch_free),
                                    max_restarts=max_restarts, failures=failures)
    finally:
        jobspec.remove(path)
    if code == EXIT_FAILED and stem is not None:
        print(f"library logs (c10d, gloo, NCCL): {logs.pattern(stem)}", file=sys.stderr, flush=True)
    return code


def run_job(spec: JobSpec) -> int:
    """A command's job, its options checked: with no launcher around this process, the driver starts the ranks
    and hands each the spec (launch); under a user's launcher (torchrun, srun, mpirun) this process is a rank: it
    runs its part (nccl_bench.job.runner.run_rank) and ends as a rank of ours does (end_rank_process)."""
    if launch_env.detect() is None:
        return launch(spec)
    end_rank_process(run_rank(spec))
