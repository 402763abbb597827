"""Communicator teardown off the critical path: destroy (or abort) on background threads.

ncclCommDestroy joins NCCL's proxy service threads, which poll with a 500 ms timeout
(src/proxy.cc), so destroying even the smallest communicator costs about half a second.
A caller that is done with a communicator hands it to a Reaper and goes on; the outcome
(seconds, ok, error) is read later by the key it was handed over with.

Each teardown runs on its own thread, so collective teardowns (ncclCommFinalize/Destroy)
never wait for each other whatever order the ranks hand them over in; the caller bounds
how many are behind it by reading outcomes (stress reads round N's before starting round
N + K + 1). A teardown past its deadline is reported as a hang and left on its daemon
thread (a stuck NCCL call cannot be interrupted): the process exit ends it.

nccl4py calls ncclCommFinalize, ncclCommDestroy and ncclCommAbort `with nogil`, so the
caller's Python keeps running meanwhile. Correctness does not depend on that, only speed.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from nccl_bench.core import markers
from nccl_bench.core.errors import CommError

# NCCL's proxy threads poll with this timeout and destroy joins them (NCCL 2.28 src/proxy.cc)
NCCL_PROXY_POLL_MS = 500


@dataclass
class Outcome:
    """How one teardown ended: `seconds` is None while it was still running at its deadline."""

    op: str  # destroy | abort
    seconds: float | None
    ok: bool
    error: dict | None = None


def teardown(comm, ok: bool) -> None:
    """The harness's rule: destroy after success (abort if that fails, and re-raise), abort after failure."""
    if ok:
        try:
            comm.destroy()
        except BaseException:  # any way out of destroy (Ctrl-C too) aborts, then goes on out
            comm.abort()
            raise
    else:
        comm.abort()


class _Teardown:
    def __init__(self, comm, ok: bool, deadline_s: float, payload: dict):
        self.comm, self.ok, self.payload = comm, ok, payload
        self.op = "destroy" if ok else "abort"
        self.start = time.monotonic()
        self.deadline_s = deadline_s
        self.outcome: Outcome | None = None
        self.thread = threading.Thread(target=self._run, name="nccl_bench-teardown", daemon=True)

    def _run(self) -> None:
        t0 = time.perf_counter()
        error = None
        try:
            device = getattr(self.comm, "device", None)
            if device is not None and device.type == "cuda":  # this thread's current device is its own
                import torch
                torch.cuda.set_device(device)
            with markers.span(self.op, **self.payload):
                teardown(self.comm, self.ok)
        except CommError as e:
            error = e.as_dict()
        except Exception as e:  # a teardown's own error is its outcome, recorded for its round
            error = {"kind": "error", "op": self.op, "lib_error": type(e).__name__,
                     "detail": str(e).strip().splitlines()[0][:300] if str(e).strip() else "",
                     "rank": getattr(self.comm, "rank", -1), "host": getattr(self.comm, "host", "")}
        if error is not None:
            error["phase"] = "destroy"
        self.outcome = Outcome(self.op, time.perf_counter() - t0, error is None, error)

    def wait(self) -> Outcome:
        self.thread.join(max(0.0, self.start + self.deadline_s - time.monotonic()))
        if self.outcome is not None:
            return self.outcome
        c = self.comm
        return Outcome(self.op, None, False, {
            "kind": "hang", "op": self.op, "lib_error": f"{self.op} did not finish",
            "detail": f"still running {self.deadline_s:g}s after it began (left to the process exit)",
            "rank": getattr(c, "rank", -1), "host": getattr(c, "host", ""), "phase": "destroy"})


class Reaper:
    """Tears communicators down in the background; `outcome(key)` waits for one (up to its deadline)."""

    def __init__(self, deadline_s: float):
        self.deadline_s = deadline_s
        self._pending: dict[object, _Teardown] = {}

    def submit(self, key, comm, ok: bool, **payload) -> None:
        """Destroy (ok) or abort `comm` on a new thread; `payload` names it in NVTX ranges."""
        job = _Teardown(comm, ok, self.deadline_s, payload)
        self._pending[key] = job
        job.thread.start()

    def outcome(self, key) -> Outcome | None:
        """The teardown's outcome, waiting for it up to its deadline; None if `key` was never submitted."""
        job = self._pending.pop(key, None)
        return None if job is None else job.wait()

    def finished(self, key) -> bool:
        """Whether the teardown handed over under `key` has ended (its outcome is ready)."""
        job = self._pending.get(key)
        return job is not None and not job.thread.is_alive()

    def pending(self) -> list:
        """Keys handed over whose outcome was not read yet, in hand-over order."""
        return list(self._pending)
