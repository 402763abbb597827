"""Library logs go to one file per rank; the terminal keeps our own lines.

c10d (`[W ... socket.cpp ... waitForInput ... timed out]`), gloo (`ERROR failed to connect`),
NCCL's warnings and torch's Python warnings all write to file descriptor 2. Early in each
worker, fd 2 is pointed at `<stem>.rank<N>.log` beside the command's result file, so every
library line lands there, while `sys.stderr` keeps writing to the terminal through a copy
of the original fd 2: our own error and progress lines stay visible. Python's warnings and
logging's last-resort handler follow fd 2 (they are library output too). NCCL writes its
NCCL_DEBUG lines to stdout, so when NCCL_DEBUG is set (and NCCL_DEBUG_FILE is not) they go to
`<stem>.rank<N>.nccl.log` (NCCL truncates its file, so it gets one of its own). `--verbose`
leaves everything as it was.

The driver fixes the stem before it launches the workers (environment NCCL_BENCH_LOG_STEM),
so every rank writes beside the same result file.
"""
from __future__ import annotations

import atexit
import io
import logging
import os
import sys
import time
import warnings
from pathlib import Path

STEM_ENV = "NCCL_BENCH_LOG_STEM"
VERBOSE_ENV = "NCCL_BENCH_VERBOSE"


def stem_for(result: str | Path | None, command: str, tag: str | None = None) -> Path:
    """`results/x.jsonl` -> `results/x`; without a result file, `results/runs/logs/<command>-<tag>` (tag: the
    launcher's run id, which every rank shares, else the time). No machine name in it: asking NVML for one held
    the launcher up before it could start its ranks, on the way to the first row (docs/validation.md)."""
    if result:
        p = Path(result)
        return p.with_name(p.name[:-len(p.suffix)] if p.suffix else p.name)
    from nccl_bench.core.results import RUNS
    return RUNS / "logs" / f"{command}-{tag or time.strftime('%Y%m%d-%H%M%S')}"


def rank_log(stem: str | Path, rank: int) -> Path:
    stem = Path(stem)
    return stem.with_name(f"{stem.name}.rank{rank}.log")


def pattern(stem: str | Path) -> str:
    """What to tell a user: where the per-rank logs are."""
    stem = Path(stem)
    return str(stem.with_name(f"{stem.name}.rank*.log"))


def fix_stem(result: str | Path | None, command: str, verbose: bool) -> Path | None:
    """In the driver, before launching: the stem every worker will use (None with --verbose)."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
        return None
    stem = stem_for(result, command) if result else Path(os.environ.get(STEM_ENV) or stem_for(None, command))
    os.environ[STEM_ENV] = str(stem)
    return stem


def capture(rank: int, result: str | Path | None = None, command: str = "job",
            verbose: bool = False, run_id: str | None = None) -> Path | None:
    """In a worker: send fd 2 to this rank's log file; keep sys.stderr on the terminal.

    Returns the log's path, or None when nothing was redirected (--verbose, or it failed:
    losing the terminal is worse than a noisy one).
    """
    if verbose or os.environ.get(VERBOSE_ENV):
        return None
    stem = Path(os.environ.get(STEM_ENV) or stem_for(result, command, run_id))
    path = rank_log(stem, rank)
    if os.environ.get("NCCL_DEBUG") and not os.environ.get("NCCL_DEBUG_FILE"):  # read at NCCL's first call
        os.environ["NCCL_DEBUG_FILE"] = str(path.with_name(f"{stem.name}.rank{rank}.nccl.log"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stderr.flush()
        terminal_fd = os.dup(2)
        os.dup2(log_fd, 2)
        os.close(log_fd)
    except OSError:
        return None
    library = sys.__stderr__  # still writes to fd 2, now the log; handlers made at import hold it too
    sys.stderr = io.TextIOWrapper(os.fdopen(terminal_fd, "wb", buffering=0), encoding="utf-8",
                                  errors="replace", line_buffering=True, write_through=True)
    logging.lastResort = logging.StreamHandler(library)
    logging.lastResort.setLevel(logging.WARNING)

    def to_log(message, category, filename, lineno, file=None, line=None):
        library.write(warnings.formatwarning(message, category, filename, lineno, line))
        library.flush()

    warnings.showwarning = to_log
    atexit.register(_drop_if_empty, path)
    return path


def _drop_if_empty(path: Path) -> None:
    """A rank whose libraries said nothing leaves no empty log behind."""
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass
