"""A rank's part of the job every command runs: an entry point guarded (bad input one line and exit 2, no
traceback), the job joined (its store, its peers), the worker run, and the exit. The driver, which starts the
ranks, is nccl_bench.job.driver."""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from datetime import timedelta
from dataclasses import dataclass
from typing import Callable, NoReturn

from nccl_bench import (SELF_LAUNCH_ENV, STOP_GRACE_S, Terminated, interrupted, said_stop, stop_within, stopping,
                        terminated)
from nccl_bench.core import launch
from nccl_bench.core import startmarks
from nccl_bench.core.startmarks import mark
from nccl_bench.job import reaping
from nccl_bench.job import logs
from nccl_bench.core.errors import (EXIT_FAILED, EXIT_USAGE, BarrierTimeout, CommError, NeverJoined, StoreSilent,
                                    StoreUnreachable, UsageError)
from nccl_bench.job.options import JobOptions, store_timeout_default
from nccl_bench.job.spec import JobSpec


@dataclass
class Job:
    """A running worker's view of the job."""

    ident: launch.Identity
    store: "object"  # nccl_bench.job.store.JobStore
    # A worker that knows a rank is gone sets this: the exit barrier need not wait for it.
    leave_timeout: float | None = None

    @property
    def rank(self) -> int:
        return self.ident.rank

    @property
    def nranks(self) -> int:
        return self.ident.world_size

    def say(self, *args, **kw) -> None:
        """Print on rank 0 only."""
        if self.rank == 0:
            print(*args, **kw, flush=True)


INTERRUPTED_LEAVE_S = 1.0
MIN_STORE_WAIT_S = 10.0  # ranks a launcher starts on several nodes arrive seconds apart


def guarded(fn: Callable[[], int]) -> int:
    """Run an entry point: bad input is one line and exit 2; nothing else leaks a traceback."""
    try:
        return fn()
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader went away (`nccl-bench --help | head`): nothing more to say, and nowhere to say it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # Ending anyway: a second Ctrl-C (the launcher forwards the terminal's) must not cut this short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return interrupted()
    except Terminated as e:
        signal.signal(e.signum, signal.SIG_IGN)
        return terminated(e.signum)
    except (CommError, BarrierTimeout) as e:
        if not stopping(STOP_GRACE_S):  # a peer that a Ctrl-C ended is not news
            print(f"failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as e:  # anything else a command raised: one line (a traceback with NCCL_BENCH_DEBUG)
        if stop_within(e) is not None:  # a Ctrl-C that Python handed on as another error (stop_within)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            return said_stop(e)
        if os.environ.get("NCCL_BENCH_DEBUG"):
            traceback.print_exc()
        if not stopping(STOP_GRACE_S):
            print(f"failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED


def run_rank(spec: JobSpec) -> int:
    """A rank's part: join the job (its store, its peers), run the worker, leave."""
    ident = launch.detect()
    if ident is None:
        raise UsageError("a rank needs a launcher's RANK and WORLD_SIZE (it is started by its driver)")
    opts, command, result = spec.job, spec.command, spec.result
    if spec.argv:  # a rank of ours: the command line its driver was given, for what records it
        sys.argv = list(spec.argv)
    worker = spec.worker.build()  # first: a worker may start what takes long in a thread (bench's CUDA)
    if not launch.self_launched(ident):  # ranks of ours: their launcher checked it
        startmarks.check()
    store_timeout = _store_wait(ident, opts) if spec.store_timeout is None else spec.store_timeout
    if opts.nranks and opts.nranks != ident.world_size:
        raise UsageError(f"--nranks {opts.nranks} disagrees with the launcher's world size {ident.world_size}")
    reaping.die_with_parent()  # no orphan of ours holds a GPU
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(EXIT_FAILED)
    logs.capture(ident.rank, result, command, opts.verbose, ident.run_id)
    from nccl_bench.job.store import JobStore
    try:
        store = JobStore(ident, timeout=store_timeout, torch_free=spec.torch_free)
        mark("store")
    except StoreUnreachable as e:
        if ident.rank == 0 or not os.environ.get(SELF_LAUNCH_ENV):
            print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except StoreSilent as e:  # a peer that never came
        print(f"failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    try:
        if spec.meeting:
            meet(store, store_timeout)
            mark("met")
    except NeverJoined as e:
        if ident.rank == 0 or not os.environ.get(SELF_LAUNCH_ENV):
            print(f"failed: {e}", file=sys.stderr)
        store.close()
        return EXIT_FAILED
    except KeyboardInterrupt:  # stopped while meeting (meet): nothing ran yet, the store is ours to close
        store.close()
        raise
    job = Job(ident, store)
    code = EXIT_FAILED
    try:
        code = guarded(lambda: worker(job))
        if code == 130:  # interrupted: another rank may be blocked in a collective with us, so do not wait
            job.leave_timeout = INTERRUPTED_LEAVE_S  # for it; our exit closes its connections and frees it
    finally:
        leave(store, min(store_timeout, 30.0) if job.leave_timeout is None else job.leave_timeout)
    return code


def end_rank_process(code: int) -> NoReturn:
    """End a rank's process with `code` once its part is done, as multiprocessing ends the ranks our launcher forks:
    Python's exit functions run and every stream is flushed, C's too, but C's exit handlers do not run. Those tear
    libraries down after the work is done and its results written, and one of them can abort the process: PyTorch's
    profiler (replay's profiled passes) frees CUPTI activity buffers that CUPTI still owns, and CUPTI writes to one
    as CUDA's primary context is released at exit (pytorch/pytorch#195471). Ranks of torchrun then ended on SIGABRT,
    glibc's 'double free or corruption', in 9 of 17 replays on one H200 (docs/validation.md)."""
    import atexit
    import ctypes
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # closed, or gone
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # C's streams: a library's lines written with stdio
    except (AttributeError, OSError):
        pass
    os._exit(code)


def _store_wait(ident, opts: JobOptions) -> float:
    """How long a rank waits for the job store and its peers, where the command sets no wait of its own."""
    wait = store_timeout_default()
    if ident is not None and not os.environ.get(SELF_LAUNCH_ENV) and "NCCL_BENCH_STORE_TIMEOUT" not in os.environ:
        # a user's launcher: the wait for the job store is --timeout, but at least what ranks of one job started
        # seconds apart need
        wait = min(wait, max(opts.timeout, MIN_STORE_WAIT_S))
    return wait


SAY_EVERY_S = 5.0  # a wait for ranks says on whom it waits this often
MEET_POLL_S = 0.5  # and looks this often whether the run was stopped meanwhile


def meet(store, timeout: float) -> None:
    """Every rank of the job has joined its store, or NeverJoined names who has not after `timeout`: the one
    wait for a peer, before any work, so that no later wait of the command waits for a rank that never came.
    Meanwhile rank 0 says every SAY_EVERY_S seconds on whom it waits. A run stopped meanwhile (its stop line
    said by another of its processes) ends the wait as a Ctrl-C here would: a rank born just before a Ctrl-C
    drops it (launcher.run_module), and the peers it waits for have ended by it."""
    store.arrive("job/joined")
    t0 = time.monotonic()
    said_at = SAY_EVERY_S
    while True:
        left = timeout - (time.monotonic() - t0)
        try:
            store.wait_for("job/joined", min(MEET_POLL_S, max(left, 0.001)))
            return
        except BarrierTimeout as e:
            if stopping():
                raise KeyboardInterrupt from None  # its one line was said: this rank ends without one
            waited = time.monotonic() - t0
            if waited >= timeout - 0.01:
                raise NeverJoined("job/joined", e.missing, timeout) from None
            if store.ident.rank == 0 and waited >= said_at:
                said_at += SAY_EVERY_S
                print(f"waiting for {e.who()} to join the job at {store.address}: {waited:.0f} s of {timeout:g} s",
                      file=sys.stderr, flush=True)


def leave(store, timeout: float) -> None:
    """Rank 0 hosts the store: it closes only after every rank is done with it."""
    n, me = store.ident.world_size, store.ident.rank
    try:
        store.barrier("exit", timeout=timeout)
        if me != 0:
            store.raw.set(f"exit/left/{me}", b"1")
        elif n > 1:
            store.raw.wait([f"exit/left/{r}" for r in range(1, n)], timedelta(seconds=5))
    except Exception:
        pass  # a rank that is gone cannot be waited for; the job's verdict is already made
    store.close()
