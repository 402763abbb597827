"""The command line every command shares: argument parsing that speaks one line on bad input (exit 2), the
options of the job (backend, ranks, init modes, roots, deadline) and how the user called us."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

from nccl_bench.core.errors import UsageError
from nccl_bench.job.options import JobOptions, check_launch, split_list
from nccl_bench.comm.bootstrap import MODES


def prog(command: str | None) -> str:
    """How the user called us, for usage lines and errors: `nccl-bench bench` from the console script,
    `python -m nccl_bench bench` otherwise; `nccl-stress` or `python -m stress` for stress (command None)."""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if command is None:
        if script == "nccl-bench":  # `nccl-bench stress`, the table's way in to the same command
            return "nccl-bench stress"
        if os.path.basename(os.path.dirname(sys.argv[0] or "")) == "nccl_bench":  # python -m nccl_bench stress
            return "python -m nccl_bench stress"
        return "nccl-stress" if script == "nccl-stress" else "python -m stress"
    return f"nccl-bench {command}" if script == "nccl-bench" else f"python -m nccl_bench {command}"


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line and exit 2 (no usage dump), and an option is matched only by its
    whole name (argparse would take --init for --init-rounds)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def add_launch_args(p: argparse.ArgumentParser) -> None:
    """Which backend and how many ranks: every command that starts ranks, or jobs of its own (accept)."""
    p.add_argument("--backend", default=None, help="nccl | torch | gloo (default: nccl with GPUs, gloo without)")
    p.add_argument("--nranks", type=int, default=None, help="ranks to launch locally (default: one per GPU, 2 on CPU)")


def add_job_args(p: argparse.ArgumentParser, init_default: str = "scoped", allow_all: bool = False,
                 ranks_per_root: int = 128, timeout: float | None = 60.0, short_timeout: bool = False,
                 helps: dict[str, str] | None = None) -> None:
    """The job options every command has; `short_timeout` adds nccl-tests' -T for --timeout (bench);
    `timeout` None: the command's own default (job_options' `default_timeout`); `helps` a command's words."""
    helps = helps or {}
    add_launch_args(p)
    p.add_argument("--init", default=init_default,
                   help=helps.get("init", "init mode(s): " + ",".join(MODES) + (" or all" if allow_all else "")))
    p.add_argument("--ranks-per-root", type=int, default=ranks_per_root, help=helps.get(
        "ranks_per_root", f"ranks per unique-ID root, like TORCH_NCCL_RANKS_PER_ROOT (default {ranks_per_root})"))
    if short_timeout:
        p.add_argument("-T", "--timeout", type=float, default=timeout,
                       help=f"seconds (default {timeout:g}) each communicator init, and each wait of a test (a "
                       "timed pass, a check), may take; beyond it the test fails as a hang (exit 1), as "
                       "nccl-tests' -T")
    else:
        p.add_argument("--timeout", type=float, default=timeout,
                       help=helps["timeout"] if "timeout" in helps  # timeout None: the helps say it
                       else f"per-init deadline in seconds (default {timeout:g})")
    add_verbose_arg(p)


def add_verbose_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true",
                   help="show library logs (c10d, gloo, NCCL) on the terminal; by default each rank's "
                        "go to <result file stem>.rank<N>.log")


def job_options(a: argparse.Namespace, allow_all: bool = False,
                default_timeout: Callable[[str], float] | None = None) -> JobOptions:
    """The job's options from the parsed arguments; `default_timeout(backend)` where --timeout was not given."""
    backend = check_launch(a.backend, a.nranks)
    timeout = default_timeout(backend) if a.timeout is None and default_timeout else a.timeout
    return JobOptions(backend=backend, nranks=a.nranks,
                      init=split_list(a.init, MODES, "init mode", "all" if allow_all else None),
                      ranks_per_root=a.ranks_per_root, timeout=timeout, verbose=a.verbose)
