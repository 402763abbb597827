"""The launcher of our own: with no launcher in the environment, a command runs `nranks` local ranks
(nccl_bench.job.workers: torchrun's environment, without importing torch here), forked from a warm server
that imports what the ranks need once while this process goes on (or, for ranks that load no torch, from this
process itself); and how a rank started that way runs its module and ends."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import uuid

from nccl_bench import (NOHUP_ENV, SAID_ENV, SELF_LAUNCH_ENV, Terminated, interrupted, keep_stops_from_callbacks,
                        said_stop, stopping, terminated)
from nccl_bench.core import cudadriver, private, scratch
from nccl_bench.core.errors import EXIT_FAILED, EXIT_USAGE, UsageError
from nccl_bench.core.startmarks import mark
from nccl_bench.job import reaping, workers


# How local ranks start: "forkserver" (default) forks each from a server process that imported
# PRELOAD once; "exec" starts `python argv...` afresh per rank, as torchrun does. A job without torch
# (preload(True)) forks its ranks from the launcher itself where CUDA was never loaded here: nothing is
# worth importing once in a server, and the ranks find the command's modules loaded (docs/validation.md).
START_ENV = "NCCL_BENCH_RANK_START"
PRELOAD = ("nccl_bench.job.serverside", "torch", "torch.distributed", "numpy", "nccl_bench.comm.base",
           "nccl_bench.job.store")
# Ranks that load no torch (a --backend nccl bench): the server imports only our light modules. NCCL's
# bindings and numpy load in each rank after the fork, while a thread of it initialises CUDA (which no process
# may do before forking ranks that use it): the two overlap there, where here they would come one after the other.
PRELOAD_TORCH_FREE = ("nccl_bench.job.serverside", "nccl_bench.job.ownstore", "nccl_bench.job.store",
                      "nccl_bench.job.runner", "nccl_bench.comm.nccl")


def preload(torch_free: bool) -> tuple[str, ...]:
    """What the warm server imports once for the ranks."""
    return PRELOAD_TORCH_FREE if torch_free else PRELOAD

STOPS = {signal.SIGINT, signal.SIGTERM}  # blocked while the forkserver starts (self_launch)
_stop_noted: int | None = None
# Ctrl-C, SIGTERM or a failed rank: the others get this long to end the work in flight (stress: the round)
# before SIGKILL; a rank blocked inside a collective whose peer is gone never ends by itself (torchrun: 30 s)
SHUTDOWN_GRACE_S = 10
RANKS_CATCH_S = 0.5  # how long a stopped launcher looks for a rank that caught the same signal
HELPERS_GRACE_S = 5  # after the ranks: what is left (the forkserver still importing torch) may end by itself


def note_stop(signum: int) -> None:
    """A rank's signal handler that lets the run finish first calls this: once the module returns,
    the rank ends by that signal after all. A forked rank that returns normally hands its result to
    the launcher and waits for it to be read, which a launcher that is itself stopping never does (it
    gives up after 30 s); a rank ended by the signal is reaped at once. The launcher is told too, by a
    file in the run's folder: a stop is the job's outcome however its ranks end (stopped_by)."""
    global _stop_noted
    _stop_noted = signum
    said = os.environ.get(SAID_ENV)
    if said:
        try:
            os.close(os.open(os.path.join(os.path.dirname(said), f"{STOP_NOTE}{signum}"), os.O_CREAT | os.O_WRONLY))
        except OSError:
            pass  # the run's folder is gone: the launcher is ending anyway


STOP_NOTE = "stopped-by-"


def stopped_by(folder: str) -> int | None:
    """The signal a rank of this run noted as the stop it carried out (note_stop), or None."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return next((int(n[len(STOP_NOTE):]) for n in sorted(names) if n.startswith(STOP_NOTE)), None)


def run_module(argv: list[str]) -> None:
    """A rank forked from the warm server or from the launcher runs its part here, its `argv` the one a new
    process would have: `-m nccl_bench.job.rank FILE` (nccl_bench.job.driver); a non-zero exit leaves the process
    with that code (the launcher reads it)."""
    keep_stops_from_callbacks()  # a Ctrl-C inside an import's weakref callback is delivered again, not lost
    # the server ignores these (nccl_bench.job.serverside); a rank must not, unless its command runs under nohup
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_IGN if os.environ.get(NOHUP_ENV) else signal.SIG_DFL)
    # Born with SIGINT and SIGTERM blocked (self_launch): a SIGINT sent before now is dropped (the launcher
    # stops the ranks then), not raised here, where no handler would make it the one line.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Each process forked from the server holds its "alive" pipe, which keeps the server up while
    # any child lives. Let go of it, so the server ends with the launcher and the ranks with the
    # server (PR_SET_PDEATHSIG): a kill -9 of the launcher leaves nothing behind.
    private.let_go_of_forkserver()
    module, args = argv[1], argv[2:]
    sys.argv = [module, *args]
    try:
        from nccl_bench.job import rank
        code = rank.main(args)
    except (KeyboardInterrupt, RuntimeError) as e:  # before the rank's own handler (while importing)
        code = said_stop(e)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_FAILED)
    finally:
        # Done: the launcher may now hold this process until the others are (its handshake), and stops
        # it with SIGTERM when one failed; our handlers, made for the run, must not delay that.
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        if _stop_noted is not None:  # asked to stop and done: end as the signal would have, lines flushed
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os.kill(os.getpid(), _stop_noted)
    if code:
        raise SystemExit(code)


@contextlib.contextmanager
def _stops_ignored():
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _sigint_deferred():
    """A Ctrl-C while the launcher starts the warm server is noted, not raised there (inside
    multiprocessing's start it would be lost, and the job would start regardless), then raised on leaving."""
    noted = []
    previous = signal.signal(signal.SIGINT, lambda *_: noted.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if noted:
        raise KeyboardInterrupt


def self_launch(nranks: int, argv: list[str], env_extra: dict | None = None,
                max_restarts: int = 0, failures: list | None = None, preload: tuple[str, ...] = PRELOAD) -> int:
    """Run `python argv...` as `nranks` local ranks (nccl_bench.job.workers).

    Returns the job's exit code: 0 if every rank succeeded, 2 if any rank reported bad input, else 1
    (a stop signal: 130 or 143 and the one line). Whatever the way out (success, failure, Ctrl-C, SIGTERM),
    it returns only once every process it started (the forkserver, the ranks, their children) has ended:
    the launcher adopts its orphans (nccl_bench.job.reaping) and stops what a grace leaves alive.
    A `failures` list receives how each failed rank ended (rank, pid, exitcode, signal name or None).
    """
    _prepare_environment(env_extra)
    start = _start_method(argv, preload)
    warm = start == "forkserver"
    reaping.adopt_orphans()
    folder = os.path.dirname(os.environ[SAID_ENV])  # the run's own folder: the job store's address goes there too
    try:
        with _sigint_deferred():
            if warm:
                _start_forkserver(preload)
        return _run(nranks, argv, start, max_restarts, failures, folder)
    except KeyboardInterrupt:  # before the ranks started
        return interrupted()
    except Terminated as e:
        return terminated(e.signum)
    finally:
        with _stops_ignored():  # a second Ctrl-C must not cut the reaping short: it is the stop under way
            if start != "exec":
                stop_helpers(HELPERS_GRACE_S)
            reaping.reap_all(HELPERS_GRACE_S)


def _shutdown_grace() -> float:
    try:  # the name torchrun's agent reads, so that a caller's setting still holds
        return float(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", SHUTDOWN_GRACE_S))
    except ValueError:
        return SHUTDOWN_GRACE_S


def _start_method(argv: list[str], preload: tuple[str, ...]) -> str:
    """"forkserver", "fork" (a job without torch, neither CUDA nor NVML loaded in this process) or "exec"."""
    method = os.environ.get(START_ENV) or "forkserver"
    if method not in ("forkserver", "exec"):
        raise UsageError(f"{START_ENV}={method}: choose forkserver (the default) or exec")
    if method != "forkserver" or argv[:1] != ["-m"]:
        return "exec"
    if preload == PRELOAD_TORCH_FREE and cudadriver.fork_safe():  # neither CUDA's state nor NVML's survives a fork
        return "fork"
    return method


def _run(nranks: int, argv: list[str], start: str, max_restarts: int, failures: list | None, folder: str) -> int:
    """Start the ranks, watch them, stop them; again after a failure while restarts are left."""
    run_id, grace = str(uuid.uuid4()), _shutdown_grace()
    for restart in range(max_restarts + 1):
        store_file = os.path.join(folder, f"store.{restart}")
        ranks: list[workers.Rank] = []
        try:
            mark("forking")
            workers.start(ranks, nranks, argv,
                          lambda r: workers.rank_env(r, nranks, run_id, restart, max_restarts, store_file),
                          None if start == "exec" else _rank_entry, start)
            failed = workers.watch(ranks)
        except (KeyboardInterrupt, Terminated) as e:
            sig = signal.SIGINT if isinstance(e, KeyboardInterrupt) else e.signum
            with _stops_ignored():  # the ranks get the same signal, and the grace to end their work
                # Sent to the process group (a terminal's Ctrl-C), the signal reached the ranks too, and the
                # first to catch it says the line: a second one would cut that short
                already = stopping(wait=RANKS_CATCH_S)
                workers.stop(ranks, None if already else sig, grace)
            return stopped(sig)
        workers.stop(ranks, signal.SIGTERM, grace)  # after a failure: the others; else nothing is left
        if not failed:  # every rank ended well: a stop one of them carried out is still the job's end
            sig = stopped_by(folder)
            return 0 if sig is None else stopped(sig)
        if restart == max_restarts:
            if failures is not None:
                failures.extend(f.as_dict() for f in failed)
            return _failed_code([f.exitcode for f in failed])


def _rank_entry(env: dict, argv: list[str]) -> None:
    """A rank forked from the warm server: its environment (the server's is the launcher's at its start),
    then its module."""
    os.environ.update(env)
    mark("forked")
    run_module(argv)


def _prepare_environment(env_extra: dict | None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # what torchrun would set, without its warning
    os.environ[SELF_LAUNCH_ENV] = str(os.getpid())  # set: self-launched; its value: by which launcher
    _say_once_marker()
    for k, v in (env_extra or {}).items():
        os.environ[k] = v
    # multiprocessing's resource tracker outlives a launcher killed with SIGKILL and then warns, on the
    # terminal, of the semaphores it cleans up (the ranks' queues): a library's line, not ours.
    quiet = "ignore:resource_tracker:UserWarning"
    if quiet not in os.environ.get("PYTHONWARNINGS", ""):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))


def _start_forkserver(preload: tuple[str, ...] = PRELOAD) -> None:
    """The warm server the ranks fork from: started now (the environment set), it imports torch while this
    process imports the launcher. It is born with SIGINT and SIGTERM blocked (a mask survives fork and exec),
    so a stop signal while it starts Python or imports torch neither ends it with a traceback nor before the
    ranks can stop (it needs none: it ends with the launcher); once imported it ignores both itself. They
    wait, pending, for the deferring handler (SIGINT) and the launcher's own (SIGTERM, nccl_bench.entry).
    multiprocessing's resource tracker starts first: starting it unblocks SIGINT, which inside the window
    would leave the launcher deaf to a Ctrl-C (docs/validation.md)."""
    import multiprocessing
    from multiprocessing import forkserver, resource_tracker
    multiprocessing.set_forkserver_preload(list(preload))
    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)


def _failed_code(codes: list[int]) -> int:
    """The job's exit code from its failed ranks' codes."""
    if EXIT_USAGE in codes:
        return EXIT_USAGE
    # a rank ended by a stop signal (-N), or by its own handler of one (128 + N, as a shell says it)
    stops = {-c if c < 0 else c - 128 for c in codes
             if c in (-signal.SIGTERM, -signal.SIGHUP, -signal.SIGINT, 128 + signal.SIGINT)}
    if len(stops) == 1 and all(c < 0 or c == 128 + signal.SIGINT for c in codes):
        # every rank that ended badly ended by the one stop signal (sent to a rank alone, which then
        # stopped the job after the round): the job was stopped, as by the shell's 128 + N
        return stopped(stops.pop())
    return EXIT_FAILED


def stopped(signum: int) -> int:
    """The launcher's exit code (128 + N) for a job stopped by a signal, with the one line for it: the
    ranks it started stay quiet (nccl_bench.interrupted), whenever the signal caught them."""
    if signum == signal.SIGINT:
        return interrupted()
    if signum in (signal.SIGTERM, signal.SIGHUP):
        return terminated(signum)
    return 128 + signum


def _say_once_marker() -> None:
    """The run's marker for its stop line (nccl_bench.first_to_say), in a folder of the run's own (the job
    store's address file and multiprocessing's sockets go there too), removed at exit; and the folders of runs
    killed before they could remove theirs (core.scratch)."""
    import atexit
    import shutil
    scratch.sweep()
    folder = scratch.make("run")
    atexit.register(shutil.rmtree, folder, True)
    private.put_multiprocessing_files_in(folder)
    os.environ[SAID_ENV] = os.path.join(folder, "said")


def stop_helpers(grace: float) -> None:
    """Stop the forkserver and multiprocessing's resource tracker now (each would notice our exit only
    after it) and wait for each; one still busy after `grace` seconds (the forkserver importing torch) is
    killed, which its children follow (PR_SET_PDEATHSIG) to this process's reaping."""
    import threading
    for pid, stop in private.multiprocessing_helpers():
        if pid is None or stop is None:
            continue
        timer = threading.Timer(grace, _kill, (pid,))
        timer.start()
        try:
            stop()  # closes the helper's pipe (how multiprocessing tells it to end) and waits for it
        except (OSError, ChildProcessError):
            pass  # already gone, or its exit status taken: nothing left to wait for
        finally:
            timer.cancel()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
