"""Where a process's start goes: with NCCL_BENCH_START_MARKS=FILE every process of a command appends one line
per milestone of its start (`pid rank milestone unix-seconds`) to FILE, so that a start-up timeline across
ranks and launchers can be drawn from outside (tests/gpu/startup.py). Unset, a mark costs one comparison."""
from __future__ import annotations

import os
import time

ENV = "NCCL_BENCH_START_MARKS"
_PATH = os.environ.get(ENV) or None
_RANK_NAMES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")


def mark(milestone: str) -> None:
    """One line for `milestone`, now; the rank as the launcher's environment names it ('-': the driver)."""
    if _PATH is None:
        return
    rank = next((os.environ[n] for n in _RANK_NAMES if n in os.environ), "-")
    try:
        with open(_PATH, "a") as f:  # one short write per line: lines of concurrent processes stay whole
            f.write(f"{os.getpid()} {rank} {milestone} {time.time():.6f}\n")
    except OSError:
        pass  # a diagnostic: never the command's failure
