"""Where a process's start goes: with NCCL_BENCH_START_MARKS=FILE every process of a command appends one line
per milestone of its start (`pid rank milestone unix-seconds`) to FILE, so that a start-up timeline across
ranks and launchers can be drawn from outside (tests/gpu/startup.py). Each milestone is written once per
process: a stress of a million rounds adds no more lines than one bench. Unset, a mark costs one comparison."""
from __future__ import annotations

import os
import time

from nccl_bench.core.errors import UsageError

ENV = "NCCL_BENCH_START_MARKS"
_PATH = os.environ.get(ENV) or None
_RANK_NAMES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
_written: set[str] = set()


def check() -> None:
    """A file that cannot be appended to is bad input, said before any work."""
    if _PATH is None:
        return
    try:
        with open(_PATH, "a"):
            pass
    except OSError as e:
        raise UsageError(f"{ENV}={_PATH}: cannot append to it ({e.strerror})") from None


def mark(milestone: str) -> None:
    """One line for `milestone` the first time this process reaches it; the rank as the launcher's environment
    names it ('-': the driver)."""
    if _PATH is None or milestone in _written:
        return
    _written.add(milestone)
    rank = next((os.environ[n] for n in _RANK_NAMES if n in os.environ), "-")
    try:
        with open(_PATH, "a") as f:  # one short write per line: lines of concurrent processes stay whole
            f.write(f"{os.getpid()} {rank} {milestone} {time.time():.6f}\n")
    except OSError:
        pass  # proven writable at the start (check); gone since: a diagnostic is never the command's failure
