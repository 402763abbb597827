"""A launcher returns only when everything it started has ended: it adopts the orphans of its run (a rank
whose forkserver died is re-parented to it, not to init) and, before it returns, waits for every process
it started, stopping what a grace leaves alive (SIGKILL: a process may ignore SIGINT and SIGTERM)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
KILL_WAIT_S = 5.0  # after SIGKILL: the kernel ends the process; this bounds the wait for its exit status
_before: set[int] = set()  # children that were there before adopt_orphans (not this launch's to end)


def _libc():
    try:  # loaded at import, never in a child between fork and exec (no dlopen there)
        return ctypes.CDLL("libc.so.6", use_errno=True) if sys.platform.startswith("linux") else None
    except OSError:
        return None


_LIBC = _libc()


def die_with_parent() -> None:
    """SIGKILL to this process when its parent dies, by any signal (Linux; elsewhere nothing): no orphan of
    ours holds a GPU. Safe as a child's preexec_fn: it loads and allocates nothing."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def adopt_orphans() -> None:
    """Descendants whose parent dies come to this process (Linux; elsewhere they go to init as before)."""
    _before.update(children())
    if not sys.platform.startswith("linux"):
        return
    if _LIBC is not None:  # else no libc to ask: orphans go to init, as without a subreaper
        _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1)


def children() -> list[int]:
    """This process's children that still exist (zombies included), from /proc."""
    me, out = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone while listed, or not readable: not ours to wait for
        if int(fields[1]) == me:
            out.append(int(name))
    return out


def _collect() -> None:
    """Take the exit status of every child that has ended (no zombie stays behind)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap_all(grace: float) -> None:
    """Wait up to `grace` seconds for this launch's processes (the children it started and the orphans it
    adopted) to end; then SIGKILL the rest and wait for them too."""
    deadline, killed = time.monotonic() + grace, False
    while True:
        _collect()
        left = [p for p in children() if p not in _before]
        if not left:
            return
        if time.monotonic() >= deadline:
            if killed:
                return  # the kernel has them: nothing more a process can do
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline, killed = time.monotonic() + KILL_WAIT_S, True
        time.sleep(0.02)
