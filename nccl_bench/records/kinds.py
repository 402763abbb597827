"""The result kinds: each one's name, what the report calls it, and the fields every row must have."""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.core.errors import UsageError

SCHEMA_VERSION = 1  # {kind, schema, meta, rows} files (bench has its own: records.bench.SCHEMA)
JOURNAL_SCHEMA = "nccl_bench.stress.journal/1"  # the stress journal's header line


@dataclass(frozen=True)
class Kind:
    name: str
    title: str  # the report's section heading
    row_fields: tuple[str, ...] = ()  # dotted names look inside a nested dict
    empty_ok: bool = False  # a file of this kind may hold no rows


KINDS = {k.name: k for k in (
    Kind("bench", "Bandwidth (bench)", ("collective", "size", "out_of_place.time", "out_of_place.bus_bw",
                                        "in_place.time", "in_place.bus_bw")),
    Kind("init", "Communicator init (init)", ("mode", "round", "rank", "warmup", "outcome", "exchange_s",
                                              "create_s", "init_s", "first_collective_s", "destroy_s")),
    Kind("init-simulate", "Unique-ID exchange at scale (init --simulate-ranks)",
         ("mode", "ranks_per_root", "nroots", "init", "wall_s", "stale_ranks")),
    Kind("stress", "Re-init churn (stress journal)", ("seq", "mode", "round", "verdict")),
    Kind("stress-summary", "Re-init churn (stress summary)", ("mode", "rounds", "ok")),
    Kind("doctor", "Preflight health (doctor)"),
    Kind("accept", "Acceptance verdicts (accept)"),
    Kind("locate", "Suspects (locate)", ("src", "dst", "busbw"), empty_ok=True),  # one rank: no pairs
    Kind("fleet", "Fleet (fleet)", ("node",), empty_ok=True),
    # --list writes no rows: what was read is in the metadata
    Kind("replay", "Replay of a job (replay)", ("collective", "bytes", "dtype", "group_ranks", "calls", "time_us"),
         empty_ok=True),
    Kind("leakcheck", "Leak check (init --leak-check)", empty_ok=True),
    Kind("copies", "GPU copies", ("gpu", "device_GBps", "h2d_GBps", "d2h_GBps")),
)}
ASV_KINDS = ("asv", "asv-machine", "asv-benchmarks")  # asv's results, machine.json, benchmarks.json
REPORTED = (*KINDS, "asv")


def check_rows(given: str, kind: str, rows, key: str = "rows", need_rows: bool = False) -> None:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{given}: '{key}' is not a list of objects")
    if need_rows and not rows and not KINDS[kind].empty_ok:
        raise UsageError(f"{given}: a {kind} result with no rows (nothing to report)")
    for i, row in enumerate(rows):
        for name in KINDS[kind].row_fields:
            value = row
            for part in name.split("."):
                if not isinstance(value, dict) or part not in value:
                    raise UsageError(f"{given}: row {i} of this {kind} result lacks '{name}'")
                value = value[part]
