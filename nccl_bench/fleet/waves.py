"""Slurm steps run in waves: at most `at_once` srun processes at a time, each stopped at its own deadline, each
one's output in its own log. A step past its deadline, and every running step on Ctrl-C, is stopped with SIGTERM,
which srun turns into cancelling its step on the nodes; SIGKILL after a grace, the other steps going on meanwhile.
The caller cancels by job name afterwards whatever Slurm still knows (slurmnodes.cancel)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

GRACE_S = 10.0  # srun's own step abort waits for the step to end (KillWait); past this it is killed
POLL_S = 0.05
LOG_TAIL = 4096  # bytes of a step's log read back for its last line


@dataclass(frozen=True)
class Step:
    key: str  # what the step is, for the journal and its log's name: "accept nbs1", "pair nbs0-nbs1"
    argv: list[str]
    deadline_s: float
    log: Path


@dataclass(frozen=True)
class Outcome:
    step: Step
    code: int | None  # None: stopped at its deadline
    seconds: float

    def last_line(self) -> str:
        """The last line of its log that says something: an error line where there is one."""
        try:
            with open(self.step.log, "rb") as f:
                f.seek(max(0, f.seek(0, 2) - LOG_TAIL))
                lines = [x.strip() for x in f.read().decode(errors="replace").splitlines() if x.strip()]
        except OSError:
            return ""
        errors = [x for x in lines if "error" in x.lower()]
        return (errors or lines or [""])[-1][:300]


def run_all(steps: list[Step], at_once: int, done: Callable[[Outcome], None], env: dict | None = None,
            cwd: str | None = None) -> list[Outcome]:
    """Every step, at most `at_once` at a time; `done` hears each outcome as it comes. A step past its deadline gets
    SIGTERM and, GRACE_S later, SIGKILL, while the others go on: a wave of silent nodes costs one grace, not one
    each. Ctrl-C stops every running step, then is raised on."""
    pending, running, out = deque(steps), {}, []
    stopping: dict[subprocess.Popen, float] = {}  # past its deadline: when it was sent SIGTERM
    try:
        while pending or running:
            while pending and len(running) < at_once:
                step = pending.popleft()
                step.log.parent.mkdir(parents=True, exist_ok=True)
                with open(step.log, "wb") as log:
                    p = subprocess.Popen(step.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=cwd, start_new_session=True)  # our Ctrl-C is ours to pass on
                running[p] = (step, time.monotonic())
            time.sleep(POLL_S)
            now = time.monotonic()
            for p, (step, t0) in list(running.items()):
                if p.poll() is None:
                    if p not in stopping and now - t0 > step.deadline_s:
                        _signal(p, signal.SIGTERM)  # srun cancels its step
                        stopping[p] = now
                    elif p in stopping and now - stopping[p] > GRACE_S:
                        _signal(p, signal.SIGKILL)
                        p.wait()
                    if p.poll() is None:
                        continue
                del running[p]
                outcome = Outcome(step, None if stopping.pop(p, None) is not None else p.returncode, now - t0)
                out.append(outcome)
                done(outcome)
    except BaseException:  # Ctrl-C, or any error of ours: no srun of this run is left behind
        for p in running:
            _signal(p, signal.SIGTERM)
        for p in running:
            stop(p)
        raise
    return out


def stop(p: subprocess.Popen) -> None:
    """SIGTERM (srun cancels its step), then SIGKILL after the grace; reaped either way."""
    _signal(p, signal.SIGTERM)
    try:
        p.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        _signal(p, signal.SIGKILL)
        p.wait()


def _signal(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
