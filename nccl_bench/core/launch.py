"""Who am I: rank, world size, local rank and master from torchrun, Slurm or Open MPI.

With no launcher in the environment a command launches itself on this node through
PyTorch's own launcher (torch.distributed.run's standalone mode, via elastic_launch).
Multi-node runs go through torchrun or srun as users already run them.
"""
from __future__ import annotations

import ctypes
import contextlib
import logging
import os
import re
import signal
import socket
import sys
import uuid
from dataclasses import dataclass

from nccl_bench import SAID_ENV, SELF_LAUNCH_ENV, Terminated, first_to_say, interrupted, terminated
from nccl_bench.core.errors import EXIT_FAILED, EXIT_USAGE, UsageError


@dataclass(frozen=True)
class Identity:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | slurm | mpi
    host: str
    run_id: str = "local"
    restart: int = 0
    agent_store: bool = False  # the launcher hosts a store at master_addr:master_port

    @property
    def single_node(self) -> bool:
        return self.local_world_size == self.world_size and _is_local(self.master_addr)


def _is_local(addr: str) -> bool:
    if addr in ("localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()):
        return True
    return addr.startswith("127.")


def _int(env, name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise UsageError(f"launcher environment: {name} is missing or not an integer") from None


def first_host(nodelist: str) -> str:
    """First host of a Slurm node list such as 'gpu[003-005,009],login1' -> 'gpu003'."""
    m = re.match(r"\s*([^,\[]+)(?:\[([^\]]+)\])?", nodelist or "")
    if not m:
        raise UsageError(f"cannot parse the Slurm node list '{nodelist}'")
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def detect(env=None) -> Identity | None:
    """The launcher's view of this process, or None when no launcher started it."""
    env = os.environ if env is None else env
    host = socket.gethostname()
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun, our self-launch, or plain env://
        return Identity(
            rank=_int(env, "RANK"), world_size=_int(env, "WORLD_SIZE"),
            local_rank=int(env.get("LOCAL_RANK", 0)),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"), master_port=int(env.get("MASTER_PORT", 29500)),
            launcher="torchrun", host=host, run_id=env.get("TORCHELASTIC_RUN_ID", "env"),
            restart=int(env.get("TORCHELASTIC_RESTART_COUNT", 0)),
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true")
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        master = env.get("MASTER_ADDR") or first_host(
            env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", ""))
        ntasks = _int(env, "SLURM_NTASKS")
        nnodes = int(env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES", 1)))
        return Identity(
            rank=_int(env, "SLURM_PROCID"), world_size=ntasks, local_rank=int(env.get("SLURM_LOCALID", 0)),
            local_world_size=ntasks if nnodes == 1 else -1, master_addr=master,
            master_port=int(env.get("MASTER_PORT", 29500)), launcher="slurm", host=host,
            run_id=f"{env.get('SLURM_JOB_ID', 'slurm')}.{env['SLURM_STEP_ID']}")
    for names in MPI_ENV:  # mpirun / mpiexec: Open MPI, then MPICH and Intel MPI (Hydra)
        if names[0] in env and names[1] in env:
            return _mpi(env, *names, host=host)
    return None


# (rank, size, local rank, local size) as each MPI's launcher names them
MPI_ENV = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
           ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"))


def _mpi(env, rank: str, size: str, local_rank: str, local_size: str, host: str) -> Identity:
    """An MPI launcher's ranks: the job store at MASTER_ADDR (this node when every rank is local)."""
    n = _int(env, size)
    local_n = int(env.get(local_size, n))
    return Identity(
        rank=_int(env, rank), world_size=n, local_rank=int(env.get(local_rank, 0)), local_world_size=local_n,
        master_addr=env.get("MASTER_ADDR", "127.0.0.1" if local_n == n else ""),
        master_port=int(env.get("MASTER_PORT", 29500)), launcher="mpi", host=host)


def describe(env=None) -> str:
    ident = detect(env)
    if ident is None:
        return "none (self-launch through torch.distributed.run, standalone)"
    return f"{ident.launcher} (rank {ident.rank} of {ident.world_size})"


def die_with_parent() -> None:
    """Workers die when their launcher dies, even by SIGKILL: no orphan holds a GPU."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(EXIT_FAILED)


# How local ranks start: "forkserver" (default) forks each from a server process that imported
# PRELOAD once; "exec" starts `python argv...` afresh per rank, as torchrun does.
START_ENV = "NCCL_BENCH_RANK_START"
PRELOAD = ("nccl_bench.core.serverside", "torch", "torch.distributed", "numpy", "nccl_bench.comm.base",
           "nccl_bench.job.store")

STOPS = {signal.SIGINT, signal.SIGTERM}  # blocked while the forkserver starts (self_launch)
_stop_noted: int | None = None
SHUTDOWN_GRACE_S = 10  # PyTorch's launcher waits 30 s for stopped ranks before SIGKILL


def note_stop(signum: int) -> None:
    """A rank's signal handler that lets the run finish first calls this: once the module returns,
    the rank ends by that signal after all. A forked rank that returns normally hands its result to
    the launcher and waits for it to be read, which a launcher that is itself stopping never does (it
    gives up after 30 s); a rank ended by the signal is reaped at once."""
    global _stop_noted
    _stop_noted = signum


def run_module(argv: list[str]) -> None:
    """A rank forked from the warm server runs `python -m MODULE ARGS...` here, as a new process
    would; a non-zero exit leaves the process with that code (the launcher reads it)."""
    import runpy
    from multiprocessing import forkserver
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server ignores it (nccl_bench.core.serverside); a rank must not
    # Born with SIGINT and SIGTERM blocked (self_launch): a SIGINT sent before now is dropped (the launcher
    # stops the ranks then), not raised here, where no handler would make it the one line.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Each process forked from the server holds its "alive" pipe, which keeps the server up while
    # any child lives. Let go of it, so the server ends with the launcher and the ranks with the
    # server (PR_SET_PDEATHSIG): a kill -9 of the launcher leaves nothing behind.
    alive = getattr(forkserver._forkserver, "_forkserver_alive_fd", None)
    if alive is not None:
        os.close(alive)
        forkserver._forkserver._forkserver_alive_fd = None
    module, args = argv[1], argv[2:]
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except KeyboardInterrupt:  # before the module's own handler (while importing): its launcher says it
        raise SystemExit(interrupted()) from None
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_FAILED)
        if code:
            raise SystemExit(code) from None
    finally:
        # Done: the launcher may now hold this process until the others are (its handshake), and stops
        # it with SIGTERM when one failed; our handlers, made for the run, must not delay that.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if _stop_noted is not None:  # asked to stop and done: end as the signal would have, lines flushed
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os.kill(os.getpid(), _stop_noted)


@contextlib.contextmanager
def _sigint_deferred():
    """A Ctrl-C while the launcher imports torch's launcher is noted, not raised there (an import that
    swallows KeyboardInterrupt would lose it, and the job would start regardless), then raised on leaving."""
    noted = []
    previous = signal.signal(signal.SIGINT, lambda *_: noted.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if noted:
        raise KeyboardInterrupt


def self_launch(nranks: int, argv: list[str], env_extra: dict | None = None,
                max_restarts: int = 0, failures: list | None = None) -> int:
    """Run `python argv...` as `nranks` local workers through PyTorch's elastic launcher.

    Returns the job's exit code: 0 if every worker succeeded, 2 if any worker reported
    bad input, else 1. Workers are reaped on success, failure, timeout and Ctrl-C: the
    agent forwards SIGINT/SIGTERM to them and they die with it on SIGKILL. A `failures`
    list receives how each failed worker ended (rank, pid, exitcode, signal name or None).
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # what torchrun would set, without its warning
    os.environ[SELF_LAUNCH_ENV] = str(os.getpid())  # set: self-launched; its value: by which launcher
    _say_once_marker()
    for k, v in (env_extra or {}).items():
        os.environ[k] = v
    warm = os.environ.get(START_ENV, "forkserver") == "forkserver" and argv[:1] == ["-m"]
    # multiprocessing's resource tracker outlives a launcher killed with SIGKILL and then warns, on the
    # terminal, of the semaphores it cleans up (the ranks' queues): a library's line, not ours.
    quiet = "ignore:resource_tracker:UserWarning"
    if quiet not in os.environ.get("PYTHONWARNINGS", ""):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))
    with _sigint_deferred():
        if warm:  # ranks fork from a server that imported torch once, instead of each importing it; started
            # now (the environment set), it imports torch while this process imports the launcher
            import multiprocessing
            from multiprocessing import forkserver, resource_tracker
            multiprocessing.set_forkserver_preload(list(PRELOAD))
            # The server is born with SIGINT and SIGTERM blocked (a mask survives fork and exec): a Ctrl-C or
            # SIGTERM to the process group while it starts Python or imports torch must not end it with a
            # traceback or before the ranks can stop (it needs no signal: it ends with the launcher); once it
            # has imported, it ignores both itself, which drops one left pending. Here they wait, pending,
            # for the deferring handler (SIGINT) and the launcher's own (SIGTERM, nccl_bench.entry).
            # multiprocessing's resource tracker first: starting it blocks and then unblocks SIGINT, which
            # inside our window would leave the launcher deaf to it (with SIG_IGN there, 1 Ctrl-C in 8 at
            # 0.1 s was lost on a loaded 2-core machine).
            resource_tracker.ensure_running()
            signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
            try:
                forkserver.ensure_running()
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # The agent's loggers set their own levels, so quiet each one (our driver reports failures).
    for name in [*logging.root.manager.loggerDict, "torch.multiprocessing.spawn"]:
        if name.startswith(("torch.distributed.elastic", "torch.distributed.launcher", "torch.multiprocessing")):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    extra = {}
    if "shutdown_timeout" in getattr(LaunchConfig, "__dataclass_fields__", {}):
        # Ctrl-C or SIGTERM: the ranks get this long to end the work in flight (stress: the round) before
        # SIGKILL; a rank blocked inside a collective whose peer is gone never ends by itself.
        extra["shutdown_timeout"] = int(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", SHUTDOWN_GRACE_S))
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nranks, run_id=str(uuid.uuid4()),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=max_restarts,
        monitor_interval=0.1, start_method="forkserver" if warm else "spawn", local_addr="127.0.0.1", **extra)
    try:
        if warm:
            elastic_launch(config, run_module)(list(argv))
        else:
            elastic_launch(config, sys.executable)(*argv)
    except ChildFailedError as e:
        codes = [f.exitcode for f in e.failures.values()]
        if failures is not None:
            failures.extend({"rank": r, "pid": f.pid, "exitcode": f.exitcode,
                             "signal": f.signal_name() if f.exitcode < 0 else None}
                            for r, f in sorted(e.failures.items()))
        if EXIT_USAGE in codes:
            return EXIT_USAGE
        # a rank ended by a stop signal (-N), or by its own handler of one (128 + N, as a shell says it)
        stops = {-c if c < 0 else c - 128 for c in codes if c in (-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGINT)}
        if len(stops) == 1 and all(c < 0 or c == 128 + signal.SIGINT for c in codes):
            # every rank that ended badly ended by the one stop signal (sent to a rank alone, which then
            # stopped the job after the round): the job was stopped, as by the shell's 128 + N
            return stopped(stops.pop())
        return EXIT_FAILED
    except KeyboardInterrupt:  # before the agent took the signals over
        return interrupted()
    except Terminated:
        return terminated()
    except Exception as e:  # the agent itself failed (signal, rendezvous)
        name = type(e).__name__
        if name == "SignalException":
            return stopped(int(getattr(e, "sigval", signal.SIGTERM)))
        print(f"launcher failed: {name}: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if warm:
            stop_helpers()
    return 0


def stopped(signum: int) -> int:
    """The launcher's exit code (128 + N) for a job stopped by a signal, with the one line for it: the
    ranks it started stay quiet (nccl_bench.interrupted), whenever the signal caught them."""
    if signum == signal.SIGINT:
        return interrupted()
    if signum == signal.SIGTERM:
        return terminated()
    return 128 + signum


def _say_once_marker() -> None:
    """The run's marker for its stop line (nccl_bench.first_to_say), in a folder of its own, removed at exit."""
    import atexit
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="nccl_bench_said_")
    atexit.register(shutil.rmtree, folder, True)
    os.environ[SAID_ENV] = os.path.join(folder, "said")


def stop_helpers() -> None:
    """Reap the forkserver and multiprocessing's resource tracker now (each would notice our exit
    only after it, and outlive us for a moment)."""
    from multiprocessing import forkserver, resource_tracker
    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        stop = getattr(helper, "_stop", None)
        if stop is not None:
            try:
                stop()
            except (OSError, ChildProcessError):
                pass
