"""The stress journal as a result: a header line (schema, options, metadata), one line per round, and
notes (start, baseline, resume, end). stress.journal writes it (fsynced line by line) and reads it back for
--resume; this reads it for the report and every other reader. A line a kill cut short is skipped and
said. The summary beside it (kind stress-summary) is written by `summary_document`."""
from __future__ import annotations

import json
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.records.kinds import JOURNAL_SCHEMA, check_rows
from nccl_bench.records.result import Result
from nccl_bench.records.writing import document


def header(options: dict, meta: dict, **more) -> dict:
    """The journal's first line."""
    return {"type": "header", "schema": JOURNAL_SCHEMA, "options": options, "meta": meta, **more}


def is_header(obj) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "header" and obj.get("schema") == JOURNAL_SCHEMA


def header_meta(head: dict) -> dict:
    """A journal header's metadata block."""
    meta = head.get("meta")
    return meta if isinstance(meta, dict) else {}


def summary_document(rows: list[dict], meta: dict, rounds: int, failures: int, restarts: int,
                     leaks: list[dict]) -> dict:
    """The stress summary: flat rows (one per mode) plus one metadata block; totals and leaks on top."""
    return document("stress-summary", rows, meta, rounds=rounds, failures=failures, restarts=restarts, leaks=leaks)


def slim(row: dict) -> dict:
    """A journal round as the report needs it: every rank's record dropped (a soak's journal holds
    millions of them), the resource samples kept as {rank: sample}."""
    out = {k: v for k, v in row.items() if k != "ranks"}
    samples = {rec["rank"]: rec["sample"] for rec in row.get("ranks") or [] if rec and rec.get("sample")}
    if samples:
        out["samples"] = samples
    return out


def read(path: Path, given: str, head: dict, text: str) -> Result:
    schema = head.get("schema")
    if not isinstance(schema, str) or not schema.startswith("nccl_bench.stress.journal/"):
        raise UsageError(f"{given}: not a result of nccl-bench (a header line, but not a stress journal's)")
    if schema != JOURNAL_SCHEMA:
        raise UsageError(f"{given}: stress journal schema '{schema}'; nccl-bench reads '{JOURNAL_SCHEMA}'")
    rows, notes, damaged = [], [], []
    for n, line in enumerate(text.splitlines()[1:], start=2):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # cut short by a kill, or not a line this journal wrote
            obj = None
        if not isinstance(obj, dict):
            damaged.append(n)  # cut by a kill: the journal's own rule is to skip it, and we say so
            continue
        if obj.get("type") == "round":
            rows.append(slim(obj))
        else:
            notes.append(obj)
    if not rows:
        raise UsageError(f"{given}: a stress journal with no complete round (nothing to report)")
    check_rows(given, "stress", rows)
    meta = dict(header_meta(head))
    meta["options"] = head.get("options") or {}
    return Result(path, given, "stress", meta, rows, notes, damaged)
