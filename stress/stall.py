"""A rank that stops making progress ends itself, with one line.

A store call blocked on a link that went down never returns: c10d's TCPStore reads the reply to a
cancelled wait without a timeout, and TCP gives up on a dead peer only after its keep-alive (hours).
A rank stuck there holds its GPU and its launcher's slot for good (issue 32: a node cut off from
the network). The loop ticks after every round; a daemon thread that sees no tick for `limit`
seconds, far past anything a healthy round waits, says so and ends the process (EXIT_FAILED).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from nccl_bench.core.errors import EXIT_FAILED


class StallGuard:
    def __init__(self, limit: float, rank: int, what: str = "round"):
        self.limit, self.rank, self.what = limit, rank, what
        self.last = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stress-stall-guard", daemon=True)

    def __enter__(self) -> "StallGuard":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def tick(self) -> None:
        self.last = time.monotonic()

    def _watch(self) -> None:
        while not self._done.wait(min(5.0, self.limit / 4)):
            quiet = time.monotonic() - self.last
            if quiet > self.limit:
                print(f"rank {self.rank}: no {self.what} finished for {quiet:.0f} s, far past every deadline (the "
                      "job store unreachable: a link down, its node gone?); this rank ends itself", file=sys.stderr,
                      flush=True)
                os._exit(EXIT_FAILED)
