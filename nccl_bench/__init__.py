"""nccl-bench: NCCL bus bandwidth, communicator-init latency, re-init stress, acceptance and replay."""
__version__ = "0.1.0"


SELF_LAUNCH_ENV = "NCCL_BENCH_SELF_LAUNCHED"  # set in a launcher of ours and the ranks it starts
NOHUP_ENV = "NCCL_BENCH_NOHUP"  # set where the command was started with SIGHUP ignored (nohup): its ranks ignore it too
STORE_FILE_ENV = "NCCL_BENCH_STORE_FILE"  # our launcher names a file; its rank 0 writes the job store's address there
SAID_ENV = "NCCL_BENCH_SAID"  # a path our launcher picks: the process of the run that creates it says the stop's line
EXIT_INTERRUPTED = 130  # as a shell reports a job ended by SIGINT
# SIGTERM, SIGHUP: the one line of each; the exit code is 128 + the signal (143, 129), as a shell says it
STOP_WORDS = {15: "terminated", 1: "hangup"}


class Terminated(BaseException):
    """SIGTERM or SIGHUP (a service manager, a scheduler's first signal, a closed terminal) in a process the user
    started, raised where KeyboardInterrupt is for SIGINT."""

    def __init__(self, signum: int = 15):
        super().__init__(signum)
        self.signum = signum


def honour_ctrl_c() -> None:
    """A command the user started listens to Ctrl-C even when its parent ignored SIGINT (a script's `cmd &`
    starts it so): an ignored SIGINT is inherited, and the run would go on to its verdict regardless. Ranks
    our launcher started keep what it gave them."""
    import os
    import signal
    if not os.environ.get(SELF_LAUNCH_ENV) and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_terminated(signum, frame):
    raise Terminated(signum)


def first_to_say() -> bool:
    """Whether this process says a stop's one line. A run our launcher started says it once, whichever of
    its processes caught the signal first (creating the launcher's marker file decides, atomically); under
    another launcher (torchrun, srun, mpirun) rank 0 says it; a process no launcher started always does."""
    import os
    path = os.environ.get(SAID_ENV)
    if path:
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except OSError:
            return False
    return os.environ.get("RANK", "0") == "0"


STOP_GRACE_S = 2.0  # how long a failing rank of our launcher waits for a stop line it may be the echo of


def stopping(wait: float = 0.0) -> bool:
    """Whether this run's stop line was said already: a failure after it (a peer gone) is the stop's doing.
    With `wait`, looks again until then: a rank that a Ctrl-C reached tears its communicator down on the
    way out, and a peer can fail on that (connection reset) before the line is said, on a loaded machine."""
    import os
    import time
    path = os.environ.get(SAID_ENV)
    if not path:
        return False
    end = time.monotonic() + wait
    while not os.path.exists(path):
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


def _stop_line(word: str, code: int) -> int:
    import sys
    if first_to_say():
        print(word, file=sys.stderr, flush=True)
    return code


def interrupted() -> int:
    """A Ctrl-C: its one line (nccl_bench.first_to_say) and the exit code."""
    _forget_unhandled_interrupt()
    return _stop_line("interrupted", EXIT_INTERRUPTED)


def _forget_unhandled_interrupt() -> None:
    """CPython notes a KeyboardInterrupt that leaves code run by exec or eval of a string (dataclasses and
    namedtuple make their methods that way, thousands of times while torch imports) as unhandled, even when
    a caller catches it, and a `python -m` run then ends by killing itself with SIGINT: -2, not our 130
    (docs/validation.md). Each exec of a string clears that note."""
    exec("None")


def terminated(signum: int = 15) -> int:
    """A SIGTERM or SIGHUP: its one line and the exit code (128 + the signal)."""
    return _stop_line(STOP_WORDS.get(signum, "terminated"), 128 + signum)


def stop_within(e: BaseException | None) -> BaseException | None:
    """The Ctrl-C (KeyboardInterrupt) or SIGTERM (Terminated) that `e` is or was raised from. Python 3.11 hands
    on an exception raised while a class's dataclass fields are named (`__set_name__`) as a RuntimeError caused
    by it, so a Ctrl-C while a module imports can arrive as one."""
    for _ in range(8):  # a chain's first links: a stop is where it began
        if e is None or isinstance(e, (KeyboardInterrupt, Terminated)):
            return e
        e = e.__cause__ or e.__context__
    return None


def said_stop(e: BaseException) -> int:
    """`e`'s stop as its one line and exit code (interrupted, terminated); `e` again where it carries none."""
    stop = stop_within(e)
    if stop is None:
        raise e
    return interrupted() if isinstance(stop, KeyboardInterrupt) else terminated(stop.signum)


REDELIVER_AFTER_S = 0.02  # a stop sent again arrives once the callback that lost it has returned


def _stop_delivered_again(unraisable) -> None:
    """sys.unraisablehook: a stop (Ctrl-C, SIGTERM) raised inside a callback Python runs for itself (an import's
    module-lock weakref, a finalizer) is 'ignored' there, its traceback on stderr, and the stop lost. The same
    signal is sent again instead, from a thread a moment later (sent from here it would be raised here again),
    to arrive where this process's handlers make it the one line."""
    import os
    import signal
    import sys
    import threading
    import time
    stop = unraisable.exc_value
    signum = signal.SIGINT if isinstance(stop, KeyboardInterrupt) else getattr(stop, "signum", None)
    if not isinstance(stop, (KeyboardInterrupt, Terminated)) or signum is None:
        sys.__unraisablehook__(unraisable)
        return
    pid = os.getpid()

    def again():
        time.sleep(REDELIVER_AFTER_S)
        os.kill(pid, signum)
    threading.Thread(target=again, name="stop-again", daemon=True).start()


def keep_stops_from_callbacks() -> None:
    import sys
    sys.unraisablehook = _stop_delivered_again


def entry(module: str, name: str) -> int:
    """Run `module.name()` as a command's entry point (`python -m nccl_bench`, `python -m stress`): a
    Ctrl-C or SIGTERM while the module imports is the one line and 130/143, as everywhere else, not a
    traceback."""
    import importlib
    import os
    import signal
    keep_stops_from_callbacks()
    if "RANK" not in os.environ and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        os.environ[NOHUP_ENV] = "1"  # started under nohup: a hangup is not a stop, for any process of the run
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if "RANK" not in os.environ and signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _raise_terminated)  # the one line for it too (a rank's launcher says it)
    try:
        main = getattr(importlib.import_module(module), name)
    except (KeyboardInterrupt, Terminated, RuntimeError) as e:
        return said_stop(e)
    return main()
