"""This process's threads and what each did over the timed loops: CPU time and times it ran.

-I's evidence for where a tail comes from: a timed loop shares the machine with every thread of its
process (the store's server on rank 0, NCCL's proxy and service threads, CUDA's event handler,
ours); one that wakes while the loop runs can take the loop's core or, if it runs Python, the GIL.
From /proc/self/task/<tid>/schedstat (CPU ns and how many times the thread was put on a CPU); where
that is missing, the scheduler's context-switch counts from `status`. Off Linux: an empty census.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

TASKS = "/proc/self/task"
# who a native thread belongs to, by the name its library gives it; Python's threads are ours
OWNERS = (("NCCL", "nccl"), ("gloo", "gloo"), ("pt_gloo", "gloo"), ("pt_nccl", "torch"), ("pt_", "torch"),
          ("cuda", "cuda"))


def owner(name: str, python: bool) -> str:
    if python:
        return "ours"
    return next((who for prefix, who in OWNERS if name.startswith(prefix)), "other")


def _read(tid: str) -> tuple[str, int, int] | None:
    """(name, CPU ns, times run) of one thread, None when it is gone."""
    base = f"{TASKS}/{tid}"
    try:
        with open(f"{base}/comm") as f:
            name = f.read().strip()
        try:
            with open(f"{base}/schedstat") as f:
                cpu, _, runs = (int(v) for v in f.read().split()[:3])
        except OSError:  # no schedstats in this kernel: switches count the times it ran
            with open(f"{base}/status") as f:
                fields = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
            runs = sum(int(v) for v in fields.values())
            cpu = 0
        return name, cpu, runs
    except (OSError, ValueError):
        return None


def snapshot() -> dict[int, tuple[str, int, int]]:
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return {}
    return {int(t): got for t in tids if (got := _read(t)) is not None}


class Census:
    """CPU time and runs per thread summed over spans (the timed loops); rows() per second of span."""

    def __init__(self):
        self.cpu: dict[int, int] = {}
        self.runs: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.python: dict[int, str] = {}  # Python's name of each thread seen alive at a span's ends
        self.seconds = 0.0

    @contextmanager
    def span(self):
        self._python()
        before, t0 = snapshot(), time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - t0
            self._python()
            for tid, (name, cpu, runs) in snapshot().items():
                was = before.get(tid, (name, 0, 0))  # a thread born in the span counts from zero
                self.names[tid] = name
                self.cpu[tid] = self.cpu.get(tid, 0) + cpu - was[1]
                self.runs[tid] = self.runs.get(tid, 0) + runs - was[2]

    def _python(self) -> None:
        self.python.update((t.native_id, t.name) for t in threading.enumerate() if t.native_id is not None)

    def rows(self) -> list[dict]:
        """One row per thread: its name (Python's where it has one), CPU ms and runs per second of the
        spans; the thread that ran the loops is marked. Busiest first."""
        if not self.seconds:
            return []
        py = self.python
        me = threading.get_native_id()
        out = [{"tid": tid, "name": py.get(tid) or self.names[tid], "timed_loop": tid == me,
                "owner": owner(self.names[tid], tid in py),
                "cpu_ms_per_s": self.cpu[tid] / 1e6 / self.seconds, "runs_per_s": self.runs[tid] / self.seconds}
               for tid in self.names]
        return sorted(out, key=lambda r: (not r["timed_loop"], -r["runs_per_s"]))


def line(per_rank: list[list[dict]]) -> str:
    """One line for the terminal: which threads ran during the timed loops besides the loop's own,
    ours (Python's) first, then the libraries' busiest."""
    awake = [(rank, r) for rank, rows in enumerate(per_rank) for r in rows
             if not r["timed_loop"] and r["runs_per_s"] >= 1]
    ours = [x for x in awake if x[1]["owner"] == "ours"]
    theirs = sorted((x for x in awake if x[1]["owner"] != "ours"), key=lambda x: -x[1]["runs_per_s"])
    say = lambda xs: "; ".join(f"rank {k} {r['name']} {r['runs_per_s']:.0f}/s ({r['cpu_ms_per_s']:.2f} ms CPU/s)"  # noqa: E731
                               for k, r in xs[:3]) + (f"; {len(xs) - 3} more" if len(xs) > 3 else "")
    return ("# -I: during the timed loops, threads of ours awake: " + (say(ours) if ours else "none")
            + "; the libraries': " + (say(theirs) if theirs else "none") + " (JSON: bench.threads_awake)")
