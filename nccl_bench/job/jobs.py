"""Run one command of this project as a bounded job and read its result (nccl_bench.records).

For callers that sit outside a job (asv benchmarks, accept): the job runs in its own
session and is killed as a whole (SIGKILL to its process group; the workers die with
their launcher through PR_SET_PDEATHSIG) when it outlives `timeout`, so nothing
outlives the caller's own timeout. The launcher itself dies with the caller too
(PR_SET_PDEATHSIG), so a caller killed from outside (asv's timeout kills only its own
process group, which a new session leaves) takes its job along.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from nccl_bench import Terminated

from nccl_bench.core import scratch
from nccl_bench.core.errors import UsageError
from nccl_bench.core.sysinfo import REPO
from nccl_bench.job import reaping
from nccl_bench.records import Result, from_doc


# A stopped job's launcher gives its ranks 10 s to end (SHUTDOWN_GRACE_S), then ends itself
STOP_GRACE_S = 15.0
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class JobFailed(RuntimeError):
    """The job exited non-zero or timed out; the message carries its reason."""

    def __init__(self, argv: list[str], reason: str, code: int | None = None, last_line: str = ""):
        self.argv, self.reason, self.code = argv, reason, code
        self.last_line = last_line or reason  # the job's own last line (its one line, on bad input)
        super().__init__(f"{' '.join(argv[:4])} ...: {reason}")


def run_result(argv: list[str], timeout: float, json_flag: str = "--json", env: dict | None = None,
               ok_codes: tuple[int, ...] = (0,)) -> Result:
    """`python -m ARGV --json TMP`, bounded by `timeout` seconds; returns the result it wrote."""
    if timeout <= 0:
        raise JobFailed(argv, "no time left to start it (the caller's budget is spent)")
    with scratch.folder("result") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", *argv, json_flag, str(out)]
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=reaping.die_with_parent)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise JobFailed(argv, f"timed out after {timeout:g}s") from None
        except (KeyboardInterrupt, Terminated) as e:  # the job's own session: the terminal's Ctrl-C missed it
            _stop_group(proc, signal.SIGINT if isinstance(e, KeyboardInterrupt) else e.signum)
            raise
        except BaseException:  # any other way out takes the job's processes along
            _kill_group(proc)
            raise
        if proc.returncode not in ok_codes or not out.exists():
            tail = (stderr or stdout or "").strip().splitlines()[-3:]
            raise JobFailed(argv, f"exit {proc.returncode}: {' | '.join(tail) or 'no output'}", proc.returncode,
                            tail[-1] if tail else "")
        try:
            return from_doc(json.loads(out.read_text()), f"{' '.join(argv[:2])}'s result")
        except (OSError, ValueError, UsageError) as e:
            raise JobFailed(argv, f"exit {proc.returncode} but its result is unreadable: "
                                  f"{type(e).__name__}: {e}", proc.returncode) from None


def _stop_group(proc: subprocess.Popen, sig: int) -> None:
    """A stop the caller received, passed on to the job, which ends as on its own Ctrl-C (its ranks stopped, its
    temporary files removed) within STOP_GRACE_S; then whatever is left is killed. A SIGKILL at once left the
    job's folders behind (accept's steps, tests/test_bad_input.py)."""
    ignored = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in STOPS} if ignored else {}
    try:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
