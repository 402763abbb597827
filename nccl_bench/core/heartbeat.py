"""A line at least every few seconds while long work runs, saying where it stands: a wait is never silent."""
from __future__ import annotations

import threading
import time


class Heartbeat:
    """`with Heartbeat("replay") as hb: hb.now = "pass 3/20"` prints `replay: pass 3/20 (41 s)` every `every`
    seconds until the block ends; nothing when the work ends sooner."""

    def __init__(self, what: str, every: float = 10.0, enabled: bool = True):
        self.what, self.every, self.enabled = what, every, enabled
        self.now = "starting"
        self._done = threading.Event()
        self._t0 = time.monotonic()

    def __enter__(self) -> "Heartbeat":
        if self.enabled:
            threading.Thread(target=self._beat, name=f"{self.what}-heartbeat", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()

    def _beat(self) -> None:
        while not self._done.wait(self.every):
            print(f"{self.what}: {self.now} ({time.monotonic() - self._t0:.0f} s)", flush=True)
