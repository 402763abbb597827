"""The result kinds: each one's name, what the report calls it, and its row (records.rowtypes)."""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.core.errors import UsageError
from nccl_bench.records.rowtypes import (BenchPoint, Free, FleetNode, GpuCopies, InitRound, LocatePair, ReplayCall,
                                        RowType, SimulatedInit, StressMode, StressRound)

SCHEMA_VERSION = 1  # {kind, schema, meta, rows} files (bench has its own: records.bench.SCHEMA)
JOURNAL_SCHEMA = "nccl_bench.stress.journal/1"  # the stress journal's header line


@dataclass(frozen=True)
class Kind:
    name: str
    title: str  # the report's section heading
    row: type[RowType] = Free  # what every row holds (records.rowtypes)
    empty_ok: bool = False  # a file of this kind may hold no rows


KINDS = {k.name: k for k in (
    Kind("bench", "Bandwidth (bench)", BenchPoint),
    Kind("init", "Communicator init (init)", InitRound),
    Kind("init-simulate", "Unique-ID exchange at scale (init --simulate-ranks)", SimulatedInit),
    Kind("stress", "Re-init churn (stress journal)", StressRound),
    Kind("stress-summary", "Re-init churn (stress summary)", StressMode),
    Kind("doctor", "Preflight health (doctor)"),
    Kind("accept", "Acceptance verdicts (accept)"),
    Kind("locate", "Suspects (locate)", LocatePair, empty_ok=True),  # one rank: no pairs
    Kind("fleet", "Fleet (fleet)", FleetNode, empty_ok=True),
    # --list writes no rows: what was read is in the metadata
    Kind("replay", "Replay of a job (replay)", ReplayCall, empty_ok=True),
    Kind("leakcheck", "Leak check (init --leak-check)", empty_ok=True),
    Kind("copies", "GPU copies", GpuCopies),
)}
MAX_ROWS = 5_000_000  # rows a file may hold (a soak's journal of five million rounds)
ASV_KINDS = ("asv", "asv-machine", "asv-benchmarks")  # asv's results, machine.json, benchmarks.json
REPORTED = (*KINDS, "asv")


def check_rows(given: str, kind: str, rows, key: str = "rows", need_rows: bool = False) -> None:
    """Every row an object holding its kind's fields, each of its type and range (one line naming the file,
    the row and the field)."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{given}: '{key}' is not a list of objects")
    if len(rows) > MAX_ROWS:
        raise UsageError(f"{given}: {len(rows)} rows, more than a result holds ({MAX_ROWS})")
    if need_rows and not rows and not KINDS[kind].empty_ok:
        raise UsageError(f"{given}: a {kind} result with no rows (nothing to report)")
    row = KINDS[kind].row
    for i, r in enumerate(rows):
        if (why := row.problem(r)) is not None:
            raise UsageError(f"{given}: row {i} of this {kind} result {why}" if why.startswith("lacks")
                             else f"{given}: row {i}, {why}")
