"""The live progress line (only on a terminal) and the final table per init mode."""
from __future__ import annotations

import sys
import time

from tabulate import tabulate

from nccl_bench.core.stats import percentile
from stress.diagnose import FAILURES

COLUMNS = ("mode", "rounds", "ok", "hangs", "errors", "wrong", "stale caught", "stale proven",
           "init p50 ms", "init p99 ms", "rounds/s")


class Progress:
    """`[stock] 37/1000 ███░░ 12 failed  3.2 rounds/s` on stderr, redrawn in place."""

    def __init__(self, stream=None, width: int = 24):
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._shown = False

    def update(self, mode: str, done: int, total: int, failures: int, rate: float) -> None:
        if not self.enabled:
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


def mode_row(mode: str, rows: list[dict]) -> dict:
    """One summary row from a mode's journal rows."""
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("ok",) + FAILURES}
    inits = [r["init_ms"] for r in rows if r.get("init_ms") is not None]
    seconds = sum(r.get("seconds") or 0.0 for r in rows)
    return {"mode": mode, "rounds": len(rows), "ok": count["ok"], "hangs": count["hang"],
            "errors": count["error"], "wrong": count["wrong"], "stale_caught": count["stale"],
            # rounds whose evidence shows a rank used an ID its root did not publish that round
            "stale_proven": sum(bool(r.get("stale")) for r in rows),
            "init_p50_ms": percentile(inits, 0.5), "init_p99_ms": percentile(inits, 0.99),
            "rounds_per_s": len(rows) / seconds if seconds > 0 else None}


def summarize(modes: list[str], rows: list[dict]) -> list[dict]:
    return [mode_row(m, [r for r in rows if r["mode"] == m]) for m in modes]


def render(summary: list[dict]) -> str:
    def fmt(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"
    body = [(s["mode"], s["rounds"], s["ok"], s["hangs"], s["errors"], s["wrong"], s["stale_caught"],
             s.get("stale_proven", "-"), fmt(s["init_p50_ms"]), fmt(s["init_p99_ms"]), fmt(s["rounds_per_s"], 2)) for s in summary]
    return tabulate(body, headers=COLUMNS, tablefmt="simple", disable_numparse=True)


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
