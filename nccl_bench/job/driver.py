"""The driver: a command started with no launcher around it. It has checked its options; here it fixes where
the ranks' library logs go, starts the ranks (nccl_bench.job.launcher) and, when the job failed, points at those
logs. It never joins the job itself: that is a rank's part (nccl_bench.job.runner)."""
from __future__ import annotations

import sys

from nccl_bench.core import startmarks
from nccl_bench.core.errors import EXIT_FAILED
from nccl_bench.job import launcher, logs
from nccl_bench.job.options import store_timeout_default


def say_starting(command: str, nranks: int, backend: str | None) -> None:
    """On a terminal, at once: what the seconds before the ranks' first line are spent on."""
    if not sys.stderr.isatty():
        return
    gpu = backend in ("nccl", "torch")
    work = "import their libraries, then CUDA and NCCL init" if gpu else "import torch and meet"
    print(f"{command}: starting {nranks} local rank(s) on {backend or 'the default backend'}; they {work}",
          file=sys.stderr, flush=True)


def launch(nranks: int, launch_argv: list[str], command: str, verbose: bool, result: str | None = None,
           backend: str | None = None, torch_free: bool = False, **kw) -> int:
    """Start `nranks` local ranks of `python launch_argv...` (the command `command`) and wait for them all."""
    store_timeout_default()  # a bad setting is the driver's one line, before any rank starts
    startmarks.check()
    stem = logs.fix_stem(result, command, verbose)
    say_starting(command, nranks, backend)
    code = launcher.self_launch(nranks, launch_argv, preload=launcher.preload(torch_free), **kw)
    if code == EXIT_FAILED and stem is not None:
        print(f"library logs (c10d, gloo, NCCL): {logs.pattern(stem)}", file=sys.stderr, flush=True)
    return code
