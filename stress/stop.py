"""How a stress run stops when told to: a signal to the launcher, to one rank or to the whole group;
and how a mode ends when its --duration is up (each rank's record says so, and every rank ends the mode
after the same round, as after a signal, then goes on with the next mode).

SIGTERM (the launcher stopping the group, a scheduler's scancel, systemd, `timeout`) or Ctrl-C:
each rank finishes the round in flight, journals it, and ends with a verdict instead of dying
mid-line. Ranks learn of the signal at different moments, so each round's records carry it and
every rank stops after the same round; then each ends by that signal (nccl_bench.job.launcher).
"""
from __future__ import annotations

import os
import signal
import threading
import time

from nccl_bench import NOHUP_ENV
from nccl_bench.job import launcher


class Stop:
    """SIGTERM (the launcher stopping the group, e.g. because a rank died) or Ctrl-C: finish the round
    in flight, journal it, and end with a verdict instead of dying mid-line. Ranks learn of the signal
    at different moments, so each round's records carry it and every rank stops after the same round."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    TIME_UP = "--duration reached"  # a record's stop that ends its mode, not the run (no signal)

    def __init__(self) -> None:
        self.since: float | None = None
        self.signum: int | None = None
        self.until: float | None = None  # when the mode in progress has run its --duration (time.monotonic)

    def arm(self, seconds: float | None) -> None:
        """A mode starts: it has `seconds` (None: no --duration) from now."""
        self.until = None if seconds is None else time.monotonic() + seconds

    @property
    def time_up(self) -> bool:
        return self.until is not None and time.monotonic() >= self.until

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                if sig != signal.SIGHUP or not os.environ.get(NOHUP_ENV):  # under nohup a hangup is no stop
                    signal.signal(sig, self._on)

    def _on(self, signum, frame) -> None:
        if self.since is None:  # a Ctrl-C reaches each rank twice (the terminal, then the launcher)
            self.since, self.signum = time.monotonic(), signum
            launcher.note_stop(signum)

    @property
    def requested(self) -> bool:
        return self.since is not None

    @property
    def reason(self) -> str:
        name = signal.Signals(self.signum).name if self.signum else "a signal"
        return f"{name} (the launcher or the user is stopping the job)"
