"""Verdicts and diagnoses from every rank's evidence, gathered through the store after a round.

Each root publishes one ID per init; every rank records the fingerprints it used. A rank
whose fingerprint for root k differs from what root k published this round read a stale
key; the history of published fingerprints names the round it came from.
"""
from __future__ import annotations

from nccl_bench.bootstrap import root_ranks

VERDICTS = ("ok", "hang", "error", "wrong", "stale")
FAILURES = VERDICTS[1:]


class History:
    """Every fingerprint published so far in this run: fingerprint -> (mode, round, root)."""

    def __init__(self) -> None:
        self.by_fp: dict[str, tuple[str, int, int]] = {}

    def add(self, mode: str, round_: int, records: list[dict | None]) -> None:
        for root, fp in published(records).items():
            self.by_fp.setdefault(fp, (mode, round_, root))

    def origin(self, fp: str, mode: str) -> str:
        if fp in ("-", "?", ""):
            return "no ID at all (key missing)"
        if fp not in self.by_fp:
            return "an earlier init not in this run"
        m, r, _ = self.by_fp[fp]
        return f"round {r}" if m == mode else f"{m} round {r}"


def published(records: list[dict | None]) -> dict[int, str]:
    """root -> fingerprint it published this round (from the roots' own evidence)."""
    out = {}
    for rec in records:
        ev = (rec or {}).get("evidence")
        if ev and ev.get("published_root", -1) >= 0 and ev.get("published"):
            out[ev["published_root"]] = ev["published"]
    return out


def stale_reads(records: list[dict | None], nranks: int, history: History, mode: str) -> list[dict]:
    """Every (rank, root) where the rank used an ID its root did not publish this round."""
    pub = published(records)
    evidence = [(rec["rank"], rec["evidence"]) for rec in records if rec and rec.get("evidence")]
    roots = root_ranks(nranks, max([len(ev["fingerprints"]) for _, ev in evidence] + [1]))
    out = []
    for rank, ev in evidence:
        for k, fp in enumerate(ev["fingerprints"]):
            if k in pub and fp != pub[k]:
                out.append({"rank": rank, "root": k, "root_rank": roots[k] if k < len(roots) else None,
                            "used": fp, "current": pub[k], "from": history.origin(fp, mode)})
    return out


def verdict(records: list[dict | None], missing: list) -> str:
    kinds = {rec["verdict"] for rec in records if rec}
    for v in ("error", "hang", "wrong", "stale"):
        if v in kinds or (v == "hang" and missing):
            return v
    return "ok"


def judge(mode: str, round_: int, nranks: int, records: list[dict | None], missing: list[tuple[int, str]],
          history: History) -> dict:
    """The round's verdict and, for a failure, the diagnosis in words; then remember its IDs."""
    v = verdict(records, missing)
    stale = stale_reads(records, nranks, history, mode)
    errors = [rec["error"] for rec in records if rec and rec.get("error")]
    first = next((e for e in errors if e["kind"] == "error"), errors[0] if errors else None)
    row = {"verdict": v, "wrong": sum(rec["wrong"] for rec in records if rec), "stale": stale,
           "missing": [r for r, _ in missing], "error": first, "diagnosis": None}
    if v != "ok":
        row["diagnosis"] = explain(v, records, missing, stale, first, row["wrong"])
    history.add(mode, round_, records)
    return row


def explain(v: str, records, missing, stale, first, wrong: int) -> str:
    parts = []
    if stale:
        caught = " caught before init" if v == "stale" else ""
        reads = "; ".join(
            f"rank {s['rank']} {'held' if caught else 'used'} root {s['root']}'s ID from {s['from']}"
            + (f" (root {s['root']} is rank {s['root_rank']})" if s["root_rank"] not in (None, s["root"]) else "")
            for s in stale)
        parts.append(f"stale ID{caught}: {reads}")
    else:
        fps = {tuple((rec.get("evidence") or {}).get("fingerprints") or ()) for rec in records if rec}
        fps.discard(())
        if len(fps) > 1:
            parts.append("ranks used different IDs: " + "; ".join(
                f"rank {rec['rank']} {rec['evidence']['fingerprints']}" for rec in records
                if rec and rec.get("evidence")))
        elif fps:
            parts.append(f"no stale ID (every rank used {list(next(iter(fps)))})")
    if missing:
        parts.append("never arrived: " + ", ".join(f"rank {r} ({h or 'host unknown'})" for r, h in missing))
    if v == "wrong":
        bad = [f"rank {rec['rank']}: {rec['wrong']}" for rec in records if rec and rec["wrong"]]
        parts.append(f"{wrong} wrong elements ({', '.join(bad)})")
    if first is not None and v in ("error", "hang"):
        detail = f": {first['detail']}" if first.get("detail") else ""
        parts.append(f"{first['kind']} on rank {first['rank']} in {first['op']}: {first['lib_error']}{detail}")
    hung = sorted(rec["rank"] for rec in records if rec and rec["verdict"] == "hang")
    if hung and v != "hang" or (v == "hang" and len(hung) > 1):
        parts.append("deadline passed on ranks " + ", ".join(map(str, hung)))
    return "; ".join(parts)
