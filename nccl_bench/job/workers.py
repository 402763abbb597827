"""The local ranks of one self-launched job, without torch in the launcher: started (forked from the warm
server or from the launcher, or a fresh `python argv...` each), watched until every one ended or one failed,
stopped with a grace, and started again under --max-restarts. What torchrun's standalone agent did for us, in the
environment torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RESTART_COUNT, ...), so
that a rank cannot tell the two apart; the job store's address travels through a file (STORE_FILE_ENV)
instead of the agent's store."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Callable

from nccl_bench import STORE_FILE_ENV



@dataclass
class Failure:
    rank: int
    pid: int
    exitcode: int
    signal: str | None  # the signal's name when the rank was ended by one

    def as_dict(self) -> dict:
        return {"rank": self.rank, "pid": self.pid, "exitcode": self.exitcode, "signal": self.signal}


def rank_env(rank: int, nranks: int, run_id: str, restart: int, max_restarts: int, store_file: str) -> dict:
    """What torchrun sets for a worker of a one-node job, and where the job store's address will be."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nranks), "LOCAL_WORLD_SIZE": str(nranks),
            "GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(nranks), "GROUP_WORLD_SIZE": "1",
            "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1", "TORCHELASTIC_RUN_ID": run_id,
            "TORCHELASTIC_RESTART_COUNT": str(restart), "TORCHELASTIC_MAX_RESTARTS": str(max_restarts),
            "TORCHELASTIC_USE_AGENT_STORE": "False", STORE_FILE_ENV: store_file}


class Rank:
    """One rank's process: a multiprocessing Process forked from the warm server, or a Popen."""

    def __init__(self, rank: int, proc):
        self.rank, self.proc = rank, proc
        self.pid = proc.pid
        # something wait() can select on until the process ends (a Process' sentinel, a Popen's pidfd)
        self.sentinel = proc.sentinel if hasattr(proc, "sentinel") else os.pidfd_open(proc.pid)

    @property
    def exitcode(self) -> int | None:
        return self.proc.exitcode if hasattr(self.proc, "sentinel") else self.proc.poll()

    def send(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass  # ended meanwhile

    def close(self) -> None:
        if not hasattr(self.proc, "sentinel"):
            os.close(self.sentinel)


def start(ranks: list[Rank], nranks: int, argv: list[str], env_of: Callable[[int], dict],
          target: Callable | None, method: str = "forkserver") -> None:
    """Every rank started into `ranks` (each as soon as it runs, so that a stop meanwhile finds it): forked
    (from the warm server, or with `method` "fork" from this process) running `target(env, argv)` when
    given, else `python argv...` with the environment added. A rank forked from here is born with SIGINT
    and SIGTERM blocked, as the server's are (nccl_bench.job.launcher.run_module unblocks them). A stop
    signal meanwhile waits until the rank is started and in `ranks`: raised inside a start from the warm
    server, it cut the rank's start data short, and the rank printed multiprocessing's EOFError traceback."""
    if target is not None:
        import multiprocessing
        ctx = multiprocessing.get_context(method)
        stops = {signal.SIGINT, signal.SIGTERM}
        for r in range(nranks):
            p = ctx.Process(target=target, args=(env_of(r), list(argv)), name=f"rank{r}")
            signal.pthread_sigmask(signal.SIG_BLOCK, stops)
            try:
                p.start()
                ranks.append(Rank(r, p))
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    else:
        for r in range(nranks):
            ranks.append(Rank(r, subprocess.Popen([sys.executable, *argv], env={**os.environ, **env_of(r)})))


def watch(ranks: list[Rank]) -> list[Failure]:
    """Block until every rank ended well ([]) or one failed (the failures seen then)."""
    while True:
        # each rank's exit code read once a pass: read twice, a rank that ended between the reads (None, then 1)
        # was neither failed nor running, and the job ended 0 (docs/validation.md)
        codes = [(r, r.exitcode) for r in ranks]
        failed = [r for r, code in codes if code not in (None, 0)]
        if failed:
            return [failure(r) for r in failed]
        running = [r for r, code in codes if code is None]
        if not running:
            return []
        wait([r.sentinel for r in running], timeout=1.0)


def failure(r: Rank) -> Failure:
    code = r.exitcode
    name = None
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
    return Failure(r.rank, r.pid, code, name)


def stop(ranks: list[Rank], sig: int | None, grace: float) -> None:
    """`sig` to every rank still running (None: they have it already); SIGKILL to any still running `grace`
    seconds later; then each one's exit taken."""
    running = [r for r in ranks if r.exitcode is None]
    for r in running:
        if sig is not None:
            r.send(sig)
    end = time.monotonic() + grace
    while running and time.monotonic() < end:
        wait([r.sentinel for r in running], timeout=max(end - time.monotonic(), 0.0))
        running = [r for r in running if r.exitcode is None]
    for r in running:
        r.send(signal.SIGKILL)
    for r in ranks:
        if hasattr(r.proc, "join"):
            r.proc.join(5.0)
        else:
            try:
                r.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                pass  # the kernel has it; the launcher's reaping takes its status
        r.close()
