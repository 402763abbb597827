"""One writer per journal: the process that writes a journal holds it for the whole run.

Two guards, because a lock alone is not enough on every file system:
- an OS lock (flock) on a sidecar file `<journal>.lock`, released by the kernel when its holder
  dies, whatever killed it;
- an owner record in that file (host, pid, the pid's start time, boot id, start time) whose
  mtime a heartbeat thread refreshes every HEARTBEAT_S. A shared file system that does not
  honour locks lets a second host take the flock; it still finds a record from another host
  with a fresh heartbeat and is refused.

A record whose owner is gone is stale and taken over without a flag: on this host, when the pid
is dead, belongs to another process (another start time) or the node rebooted (another boot
id); from another host, when its heartbeat is older than STALE_AFTER_S. The workers a launcher
starts inherit its ownership through OWNER_ENV rather than locking again.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from pathlib import Path

from nccl_bench.core.errors import UsageError

HEARTBEAT_S = 10.0
STALE_AFTER_S = 60.0  # another host's record this much older than its last heartbeat is stale
OWNER_ENV = "NCCL_BENCH_JOURNAL_OWNER"  # "<host>:<pid>" of the launcher that holds the journal


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """A pid's start time in clock ticks since boot (tells a reused pid apart), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def my_record() -> dict:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_start": _start_ticks(pid), "boot_id": _boot_id(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S")}


def holds_it(record: dict, heartbeat_age: float) -> bool:
    """Is the owner named by this record still writing? (See the module's rules.)"""
    if record.get("host") != socket.gethostname():
        return heartbeat_age < STALE_AFTER_S
    if record.get("boot_id") and record["boot_id"] != _boot_id():
        return False  # the node rebooted since
    pid = record.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return False
    ticks = _start_ticks(pid)
    return record.get("pid_start") is None or ticks is None or ticks == record["pid_start"]


def describe(journal: str | Path, record: dict) -> str:
    since = str(record.get("since", "?")).split(" ")[-1]
    return (f"journal {journal} is being written by pid {record.get('pid', '?')} on {record.get('host', '?')} "
            f"since {since}; wait for it or stop it")


class JournalOwner:
    """Held for a whole run: `with JournalOwner(path): ...`; refuses (exit 2) while another holds it."""

    def __init__(self, journal: str | Path):
        self.journal = Path(journal)
        self.path = self.journal.with_name(self.journal.name + ".lock")
        self._fd: int | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> "JournalOwner":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _read(self, fd: int) -> tuple[dict | None, float]:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 4096)
        age = time.time() - os.fstat(fd).st_mtime
        try:
            rec = json.loads(raw) if raw.strip() else None
        except ValueError:
            rec = None  # cut by a kill while it was written: nobody can claim it
        return (rec if isinstance(rec, dict) else None), age

    def acquire(self) -> None:
        if self.journal.is_dir():
            raise UsageError(f"--journal {self.journal}: a folder, where a file is expected")
        if not self.path.parent.is_dir():
            raise UsageError(f"folder {self.path.parent} does not exist (for --journal {self.journal})")
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:  # read-only storage, /proc, /sys: nothing of the run could be kept there
                raise UsageError(f"--journal {self.journal}: cannot write in {self.path.parent} "
                                 f"({e.strerror or e})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                rec, _ = self._read(fd)
                os.close(fd)
                raise UsageError(describe(self.journal, rec or {})) from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the last holder removed the file between our open and our lock: again
                os.close(fd)
                continue
            rec, age = self._read(fd)
            if rec and rec.get("pid") != os.getpid() and holds_it(rec, age):
                os.close(fd)  # a live owner the lock did not show (a file system without locks)
                raise UsageError(describe(self.journal, rec))
            self._fd = fd
            break
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps({**my_record(), "journal": str(self.journal)}) + "\n").encode())
        os.fsync(fd)
        os.environ[OWNER_ENV] = f"{socket.gethostname()}:{os.getpid()}"
        self._beat = threading.Thread(target=self._heartbeat, name="journal-heartbeat", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                pass

    def release(self) -> None:
        if self._fd is None:
            return
        self._stop.set()
        os.environ.pop(OWNER_ENV, None)
        try:
            os.unlink(self.path)  # before unlocking: a newcomer then locks a new file, never this one
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None


def inherited() -> bool:
    """Started by a live launcher on this host that holds the journal: do not lock it again."""
    host, _, pid = os.environ.get(OWNER_ENV, "").rpartition(":")
    return host == socket.gethostname() and pid.isdigit() and _alive(int(pid))
