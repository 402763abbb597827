"""The per-mode summary of stress rounds (journal rows -> one row per init mode), shared by
stress's final table and the report."""
from __future__ import annotations

from nccl_bench.core.stats import percentile

VERDICTS = ("ok", "hang", "error", "wrong", "stale")  # a stress round's verdicts, ok first
FAILURES = VERDICTS[1:]
COLUMNS = ("mode", "rounds", "ok", "hangs", "errors", "wrong", "stale caught", "stale proven",
           "init p50 ms", "init p99 ms", "rounds/s")


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
