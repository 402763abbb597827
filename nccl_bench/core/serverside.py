"""Imported by the forkserver alone (nccl_bench.core.launch.PRELOAD names it; nothing else imports it).

A signal to the whole process group (`timeout`, Slurm's scancel, systemd, a terminal) reaches the
forkserver too. By default SIGTERM would end it at once, and the ranks it forked, which die with
it (PR_SET_PDEATHSIG), would never write their stop line, journal end and summary. The server
needs no signal to end: it leaves when the launcher closes its pipe or dies. So it ignores
SIGTERM, and SIGINT (it is started ignoring it, launch.self_launch; this holds where something else
started it), and each rank sets its own handlers back (launch.run_module) before it runs.
"""
import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
