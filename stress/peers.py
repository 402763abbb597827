"""Is a rank that never reported still alive? Evidence for 'rank K died' instead of 'never arrived'.

Every rank shares its host and pid at the start of the run. A rank that does not report
after a round is looked up in /proc when it ran on this host: gone, or a zombie (then its
exit status says which signal ended it). On another host nothing can be said from here.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path


def me(job) -> dict:
    return {"host": job.ident.host, "pid": os.getpid()}


def status(pid: int) -> dict | None:
    """None while the process runs; else {'signal': name or None} (gone, or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return {"signal": None}
    fields = text[text.rindex(")") + 2:].split()  # after 'pid (comm) '
    if fields[0] not in ("Z", "X"):
        return None
    sig = None
    if len(fields) >= 50:  # field 52, exit_code, as waitpid reports it (Linux >= 3.5)
        code = int(fields[49])
        if code & 0x7F:
            try:
                sig = signal.Signals(code & 0x7F).name
            except ValueError:
                sig = f"signal {code & 0x7F}"
    return {"signal": sig}


class Peers:
    """Every rank's host and pid, as shared at the start."""

    def __init__(self, mine: dict, everyone: list[dict]):
        self.host = mine["host"]
        self.ranks = everyone
        self.hosts = [p.get("host") or "" for p in everyone]  # by rank: the diagnosis names nodes with them

    def dead(self, ranks: list[int]) -> dict[int, dict]:
        """The ranks among `ranks` that ran on this host and are gone: rank -> pid, host, signal."""
        out = {}
        for r in ranks:
            p = self.ranks[r] if r < len(self.ranks) else {}
            if p.get("host") != self.host or not p.get("pid"):
                continue
            st = status(p["pid"])
            if st is not None:
                out[r] = {"pid": p["pid"], "host": p["host"], **st}
        return out
