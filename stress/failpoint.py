"""Test-only failpoints: the whole job dies at an exact moment, as a kill -9 of its launcher would
make it, so tests can prove the journal and summary survive a crash at the worst place.

Armed by NCCL_BENCH_KILL_AT=POINT[:N] (tests and tests/gpu scripts only): at the Nth time the
writer reaches POINT it writes part of what it was writing, kills its launcher and itself with SIGKILL.
Points: `append` (a journal line), `summary` (the summary file).
"""
from __future__ import annotations

import os
import signal

ENV = "NCCL_BENCH_KILL_AT"
_hits: dict[str, int] = {}


def armed(point: str) -> bool:
    """True exactly once: at the armed point's Nth hit in this process."""
    name, _, n = os.environ.get(ENV, "").partition(":")
    if name != point:
        return False
    _hits[point] = _hits.get(point, 0) + 1
    return _hits[point] == int(n or 1)


def die() -> None:
    """The job dies now: its launcher first (the other ranks follow it, PR_SET_PDEATHSIG), then us."""
    from nccl_bench import SELF_LAUNCH_ENV
    launcher = os.environ.get(SELF_LAUNCH_ENV, "")
    os.kill(int(launcher) if launcher.isdigit() and int(launcher) > 1 else os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def write_then_die(f, data: str) -> None:
    """Half of `data` reaches the disk, then the job dies: a write cut by the kill."""
    f.write(data[: max(1, len(data) // 2)])
    f.flush()
    os.fsync(f.fileno())
    die()
