"""The stress journal as a result: a header line (schema, options, metadata), one line per round, and
notes (start, baseline, resume, end). stress.journal writes it (fsynced line by line) and reads it back for
--resume; this reads it for the report and every other reader. A line a kill cut short is skipped and
said. The summary beside it (kind stress-summary) is written by `summary_document`."""
from __future__ import annotations

import json
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.records.kinds import JOURNAL_SCHEMA, MAX_ROWS, check_rows
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


# What the report reads of a round that went well: a soak's journal holds millions of them, each with every rank's
# record (1.5 KB on 2 ranks, 5 KB on 8): kept whole they took 2.2 KB of memory each, as these about 0.5 KB
OK_FIELDS = ("type", "seq", "mode", "round", "verdict", "init_ms", "seconds")
MAX_BYTES = 64 << 30  # a journal: days of rounds; what it holds is bounded by its rounds (records.kinds.MAX_ROWS)
MAX_LINE = 64 << 20  # one round's line: every rank's record (about 0.6 KB each); a longer one is no round's
MAX_DAMAGED = 1000  # lines that do not read: a kill cuts one a stop; past this many the file is no journal's rounds
# the lines that are not rounds (start, resume, duration, stopped, baseline, end: a few a run, the end line's leak
# fits a few MB at 4,096 ranks): held whole, so bounded in number and bytes
MAX_NOTES = 10_000
MAX_NOTE_BYTES = 64 << 20


def slim(row: dict) -> dict:
    """A journal round as the report needs it: every rank's record dropped, the resource samples kept as
    {rank: sample}; a round that went well only what the report reads of it (OK_FIELDS, a stale ID if any)."""
    if row.get("verdict") == "ok":
        out = {k: row[k] for k in OK_FIELDS if k in row} | ({"stale": row["stale"]} if row.get("stale") else {})
    else:
        out = {k: v for k, v in row.items() if k != "ranks"}
    samples = {rec["rank"]: rec["sample"] for rec in row.get("ranks") or [] if rec and rec.get("sample")}
    if samples:
        out["samples"] = samples
    return out


ROUNDS_BETWEEN_CALLS = 10_000  # `on_rounds` is called this often while a journal is read (about 0.5 s of it)


def read(path: Path, given: str, head: dict, on_rounds=None) -> Result:
    """The journal line by line from its file (not held whole), each round slimmed as it is read; at most
    records.kinds.MAX_ROWS rounds, said before they are all read. `on_rounds(n)`, if given, hears how many
    rounds are read so far, every ROUNDS_BETWEEN_CALLS (a million rounds take 45 s)."""
    schema = head.get("schema")
    if not isinstance(schema, str) or not schema.startswith("nccl_bench.stress.journal/"):
        raise UsageError(f"{given}: not a result of nccl-bench (a header line, but not a stress journal's)")
    if schema != JOURNAL_SCHEMA:
        raise UsageError(f"{given}: stress journal schema '{schema}'; nccl-bench reads '{JOURNAL_SCHEMA}'")
    rows, notes, damaged, note_bytes = [], [], [], 0
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            lines = _lines(f)
            for _, line in lines:  # up to the header (the first line that holds anything), read by the caller
                if not line.isspace():
                    break
            for n, line in lines:
                if line.isspace():
                    continue
                try:
                    obj = json.loads(line) if line else None
                except (ValueError, RecursionError):  # cut short by a kill, or not a line this journal wrote
                    obj = None
                if not isinstance(obj, dict):
                    damaged.append(n)  # cut by a kill: the journal's own rule is to skip it, and we say so
                    if len(damaged) > MAX_DAMAGED:
                        raise UsageError(f"{given}: more than {MAX_DAMAGED:,} lines that do not read (from line "
                                         f"{damaged[0]}): not a stress journal's rounds")
                elif obj.get("type") == "round":
                    if len(rows) == MAX_ROWS:
                        raise UsageError(f"{given}: more than {MAX_ROWS:,} rounds, more than a result holds")
                    rows.append(slim(obj))
                    if on_rounds and len(rows) % ROUNDS_BETWEEN_CALLS == 0:
                        on_rounds(len(rows))
                else:
                    note_bytes += len(line)
                    if len(notes) == MAX_NOTES or note_bytes > MAX_NOTE_BYTES:
                        raise UsageError(f"{given}: more than {MAX_NOTES:,} lines that are not rounds, or more than "
                                         f"{MAX_NOTE_BYTES >> 20} MiB of them: not a stress journal's")
                    notes.append(obj)
    except OSError as e:
        raise UsageError(f"{given}: cannot read: {e.strerror or e}") from None
    if not rows:
        raise UsageError(f"{given}: a stress journal with no complete round (nothing to report)")
    check_rows(given, "stress", rows)
    meta = dict(header_meta(head))
    meta["options"] = head.get("options") or {}
    return Result(path, given, "stress", meta, rows, notes, damaged)


def _lines(f):
    """(line number, line) from the header's on, each read to at most MAX_LINE characters: a longer one is given as
    "" (no round's; its rest skipped), so that a file with no line breaks is never held whole."""
    n = 0
    while line := f.readline(MAX_LINE):
        n += 1
        if len(line) == MAX_LINE and not line.endswith("\n"):
            while (rest := f.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            line = ""
        yield n, line
