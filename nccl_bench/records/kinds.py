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


# A row field is "name:type", dotted names looking inside a nested dict. Types: str; int and num, finite and
# within 0..MAX_NUMBER (sizes, counts, times, bandwidths are never negative); num? also null (a failed init has
# no time); int? likewise; bool; list; any.
_BENCH_PLACE = ("time:num", "alg_bw:num", "bus_bw:num")
KINDS = {k.name: k for k in (
    Kind("bench", "Bandwidth (bench)", ("collective:str", "size:int", "count:int?",
                                        *(f"{p}.{f}" for p in ("out_of_place", "in_place") for f in _BENCH_PLACE))),
    Kind("init", "Communicator init (init)", ("mode:str", "round:int", "rank:int", "warmup:bool", "outcome:str",
                                              "exchange_s:num?", "create_s:num?", "init_s:num?",
                                              "first_collective_s:num?", "destroy_s:num?")),
    Kind("init-simulate", "Unique-ID exchange at scale (init --simulate-ranks)",
         ("mode:str", "ranks_per_root:int?", "nroots:int", "init:int", "wall_s:num", "stale_ranks:int")),
    Kind("stress", "Re-init churn (stress journal)", ("seq:int", "mode:str", "round:int", "verdict:str")),
    Kind("stress-summary", "Re-init churn (stress summary)", ("mode:str", "rounds:int", "ok:int")),
    Kind("doctor", "Preflight health (doctor)"),
    Kind("accept", "Acceptance verdicts (accept)"),
    Kind("locate", "Suspects (locate)", ("src:int", "dst:int", "busbw:num"), empty_ok=True),  # one rank: no pairs
    Kind("fleet", "Fleet (fleet)", ("node:str",), empty_ok=True),
    # --list writes no rows: what was read is in the metadata
    Kind("replay", "Replay of a job (replay)", ("collective:str", "bytes:int", "dtype:str", "group_ranks:list",
                                                "calls:int", "time_us:num?"), empty_ok=True),
    Kind("leakcheck", "Leak check (init --leak-check)", empty_ok=True),
    Kind("copies", "GPU copies", ("gpu:int", "device_GBps:num", "h2d_GBps:num", "d2h_GBps:num")),
)}
MAX_NUMBER = 1e18  # above any size, count, time or bandwidth a run measures (2^60 bytes)
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
    fields = [f.split(":") for f in KINDS[kind].row_fields]
    for i, row in enumerate(rows):
        for name, want in fields:
            value = row
            for part in name.split("."):
                if not isinstance(value, dict) or part not in value:
                    raise UsageError(f"{given}: row {i} of this {kind} result lacks '{name}'")
                value = value[part]
            if (why := wrong_type(value, want)):
                raise UsageError(f"{given}: row {i}, '{name}': {why}")


def wrong_type(value, want: str) -> str | None:
    """Why `value` is not of type `want` (see KINDS), or None."""
    if want.endswith("?"):
        if value is None:
            return None
        want = want[:-1]
    if want == "any":
        return None
    if want == "str":
        return None if isinstance(value, str) else f"{value!r:.40} is not a string"
    if want == "bool":
        return None if isinstance(value, bool) else f"{value!r:.40} is not true or false"
    if want == "list":
        return None if isinstance(value, list) else f"{value!r:.40} is not a list"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (want == "int" and not isinstance(value, int)):
        return f"{value!r:.40} is not {'a whole number' if want == 'int' else 'a number'}"
    if not (0 <= value <= MAX_NUMBER):  # NaN fails this too
        return f"{value!r:.40} is not a finite measurement from 0 to {MAX_NUMBER:g}"
    return None
