"""Scratch folders of one process of ours (a run's job spec; its stop marker, store address and multiprocessing's
sockets; replay's call files): the process that made one removes it as it ends, and where it could not (killed
with SIGKILL: nothing of ours runs then), the next run of ours on the machine does (`sweep`, as a launcher starts).
Each is named by its maker, nccl_bench_<what>_<pid namespace>_<pid>_<random> in the temporary folder, so a later
run removes only those whose maker is gone from its own pid namespace: a pid says nothing across containers that
share /tmp, and a live run's folder is never taken."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile

NAME = re.compile(r"nccl_bench_[a-z]+_(\d+)_(\d+)_")


def make(what: str) -> str:
    """A new folder, only this user's (mkdtemp), named by this process."""
    return tempfile.mkdtemp(prefix=f"nccl_bench_{what}_{_namespace()}_{os.getpid()}_")


@contextlib.contextmanager
def folder(what: str):
    """make(), removed when the block ends, however it ends."""
    path = make(what)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sweep() -> int:
    """Remove this user's scratch folders whose maker is gone; how many. Where the pid namespace cannot be
    read, none: a folder it cannot place is left."""
    ns = _namespace()
    if ns == "0":
        return 0
    uid, removed = os.getuid(), 0
    try:
        entries = os.scandir(tempfile.gettempdir())
    except OSError:
        return 0
    with entries:
        for e in entries:
            m = NAME.match(e.name)
            if not m or m.group(1) != ns or _alive(int(m.group(2))):
                continue
            try:
                if not e.is_dir(follow_symlinks=False) or e.stat(follow_symlinks=False).st_uid != uid:
                    continue
            except OSError:
                continue
            shutil.rmtree(e.path, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    """Whether a process of that pid is there (a zombie counts, and so does another one given the pid since:
    its folder is left, never a live one's taken)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"
