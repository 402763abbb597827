"""The per-mode summary of stress rounds (journal rows -> one row per init mode), shared by
stress's final table and the report. Rows are folded into a Tally as they come, so a run of a
million rounds summarises in the same memory as a run of ten."""
from __future__ import annotations

from typing import Callable

from nccl_bench.core.streaming import Quantiles

VERDICTS = ("ok", "hang", "error", "wrong", "stale")  # a stress round's verdicts, ok first
FAILURES = VERDICTS[1:]
COLUMNS = ("mode", "rounds", "ok", "hangs", "errors", "wrong", "stale caught", "stale proven",
           "init p50 ms", "init p99 ms", "rounds/s")


class ModeTally:
    """One init mode's rounds, folded: counts, init-latency quantiles, seconds."""

    def __init__(self, mode: str):
        self.mode = mode
        self.rounds = 0
        self.count = {v: 0 for v in VERDICTS}
        self.stale_proven = 0
        self.seconds = 0.0
        self.init_ms = Quantiles()

    def add(self, row: dict) -> None:
        self.rounds += 1
        self.count[row["verdict"]] = self.count.get(row["verdict"], 0) + 1
        self.stale_proven += bool(row.get("stale"))
        self.seconds += row.get("seconds") or 0.0
        self.init_ms.add(row.get("init_ms"))

    def row(self) -> dict:
        c = self.count
        return {"mode": self.mode, "rounds": self.rounds, "ok": c["ok"], "hangs": c["hang"],
                "errors": c["error"], "wrong": c["wrong"], "stale_caught": c["stale"],
                # rounds whose evidence shows a rank used an ID its root did not publish that round
                "stale_proven": self.stale_proven,
                "init_p50_ms": self.init_ms.quantile(0.5), "init_p99_ms": self.init_ms.quantile(0.99),
                "rounds_per_s": self.rounds / self.seconds if self.seconds > 0 else None}


class Tally:
    """Every mode's ModeTally, in the order the modes first appear (or as given)."""

    def __init__(self, modes: list[str] | tuple[str, ...] = ()):
        self.modes: dict[str, ModeTally] = {m: ModeTally(m) for m in modes}
        self.failures = 0
        self.teardown_s = Quantiles()  # every rank's successful teardown, all modes (the destroy line)

    def add(self, row: dict) -> None:
        self.modes.setdefault(row["mode"], ModeTally(row["mode"])).add(row)
        self.failures += row["verdict"] != "ok"
        for rec in row.get("ranks") or []:  # stress.record.RankRecord
            if rec and rec.verdict == "ok" and rec.teardown_s:
                self.teardown_s.add(rec.teardown_s)

    @property
    def rounds(self) -> int:
        return sum(t.rounds for t in self.modes.values())

    def table(self) -> list[dict]:
        """One summary row per mode that ran."""
        return [t.row() for t in self.modes.values() if t.rounds]


def cells(s: dict, num: Callable[[float | None, int], str]) -> list:
    """A mode's summary row (ModeTally.row, or a summary file's) as the cells under COLUMNS, in every table that
    shows one (stress's own, the report's); `num(value, digits)` writes a number in that table's style. A summary
    written before "stale proven" was counted shows '-' there."""
    return [s.get("mode"), s.get("rounds"), s.get("ok"), s.get("hangs"), s.get("errors"), s.get("wrong"),
            s.get("stale_caught"), s.get("stale_proven", "-"), num(s.get("init_p50_ms"), 1),
            num(s.get("init_p99_ms"), 1), num(s.get("rounds_per_s"), 2)]


def mode_row(mode: str, rows: list[dict]) -> dict:
    """One summary row from a mode's journal rows."""
    t = ModeTally(mode)
    for r in rows:
        t.add(r)
    return t.row()


def summarize(modes: list[str], rows: list[dict]) -> list[dict]:
    return [mode_row(m, [r for r in rows if r["mode"] == m]) for m in modes]
