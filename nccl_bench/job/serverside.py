"""Imported by the forkserver alone (nccl_bench.job.launcher.PRELOAD names it; nothing else imports it).

A signal to the whole process group (`timeout`, Slurm's scancel, systemd, a terminal) reaches the
forkserver too. By default SIGTERM would end it at once, and the ranks it forked, which die with
it (PR_SET_PDEATHSIG), would never write their stop line, journal end and summary. The server
needs no signal to end: it leaves when the launcher closes its pipe or dies. So it ignores
SIGTERM, and SIGINT (it is started with SIGINT blocked, launcher.self_launch, so none arrives while it
imports; ignoring it drops one left pending, and holds where something else started it), and each rank
sets its own handlers back and unblocks SIGINT (launcher.run_module) before it runs.
"""
import signal
import sys

signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal's, as SIGTERM
signal.signal(signal.SIGINT, signal.SIG_IGN)


def _quiet_once_stopped(kind, value, tb):
    """A rank the server was still starting when the launcher stopped fails to unpickle what the launcher
    already removed (its semaphores): after the run's stop line, that is not news, and no traceback."""
    from nccl_bench import stopping
    if not stopping():
        sys.__excepthook__(kind, value, tb)


sys.excepthook = _quiet_once_stopped  # multiprocessing's forkserver reports a child's failure through it
