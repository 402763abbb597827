"""The live progress line (redrawn on a terminal; elsewhere a plain line every 10 s) and the final table per
init mode."""
from __future__ import annotations

import sys
import time

from tabulate import tabulate

from stress.tally import COLUMNS, cells


class Progress:
    """`[stock] 37/1000 ███░░ 12 failed  3.2 rounds/s` on stderr, redrawn in place."""

    EVERY_S = 10.0  # off a terminal (a log, a pipe): one plain line this often, so a long run is never silent

    def __init__(self, stream=None, width: int = 24):
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._shown = False
        self._last = time.monotonic()

    def update(self, mode: str, done: int, total: int, failures: int, rate: float) -> None:
        if not self.enabled:
            if time.monotonic() - self._last >= self.EVERY_S:
                self._last = time.monotonic()
                print(f"[{mode}] {done}/{total} rounds, {failures} failed, {rate:.2f} rounds/s", flush=True)
            return
        fill = int(self.width * done / max(total, 1))
        bar = "#" * fill + "." * (self.width - fill)
        self.stream.write(f"\r[{mode}] {done}/{total} {bar} {failures} failed  {rate:.2f} rounds/s ")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Move off the progress line before other output."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


def render(summary: list[dict]) -> str:
    def fmt(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"
    return tabulate([cells(s, fmt) for s in summary], headers=COLUMNS, tablefmt="simple", disable_numparse=True)


def failure_line(row: dict) -> str:
    return f"[{row['mode']} round {row['round']}] {row['verdict'].upper()}: {row['diagnosis']}"


class Rate:
    """Rounds per second over this run so far."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.n = 0

    def tick(self) -> float:
        self.n += 1
        return self.n / max(time.perf_counter() - self.start, 1e-9)
