"""Each result kind's row as a class: the fields every row of the kind holds, each with its type. The one class
checks a row a file holds (records.reading) and a row a writer hands over (records.writing, records.bench), so
that nothing is written that a reader would refuse. A row may hold more than its class names (what a kind adds
over time); what the class names it must hold, of that type.

Types: str, bool, list; Count, a whole number, and Measure, a number, both finite and from 0 to MAX_NUMBER
(sizes, counts, times and bandwidths are never negative); `X | None` where a row may hold null (a failed init has
no time); a row class for a nested object (bench's places).
"""
from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass, fields

MAX_NUMBER = 1e18  # above any size, count, time or bandwidth a run measures (2^60 bytes)


class Count(int):
    """A whole number from 0 to MAX_NUMBER."""


class Measure(float):
    """A finite number from 0 to MAX_NUMBER."""


class RowType:
    """A kind's row: subclasses are dataclasses whose annotated fields every row holds."""

    @classmethod
    def problem(cls, row, prefix: str = "") -> str | None:
        """Why `row` is not one of these (`lacks 'name'` or `'name': why`, dotted names inside nested rows), or
        None."""
        if not isinstance(row, dict):
            return "is not an object"
        for key, optional, want in _declared(cls):
            if key not in row:
                return f"lacks '{prefix + key}'"
            value = row[key]
            if value is None and optional:
                continue
            if isinstance(want, type) and issubclass(want, RowType):
                if not isinstance(value, dict):  # as for a missing key: what the row lacks is its first field
                    return f"lacks '{prefix}{key}.{_declared(want)[0][0]}'"
                why = want.problem(value, f"{prefix}{key}.")
                if why is not None:
                    return why
            elif (why := _why_not(value, want)) is not None:
                return f"'{prefix + key}': {why}"
        return None


@functools.cache
def _declared(cls) -> tuple:
    """(field, may be null, type) of a row class, resolved once: a journal of millions of rows is checked row by
    row."""
    out = []
    for f in fields(cls):
        want, optional = typing.get_type_hints(cls)[f.name], False
        if isinstance(want, types.UnionType) or typing.get_origin(want) is typing.Union:
            args = typing.get_args(want)
            optional, want = type(None) in args, next(t for t in args if t is not type(None))
        out.append((f.name, optional, want))
    return tuple(out)


def _why_not(value, want) -> str | None:
    """Why `value` is not of type `want` (str, bool, list, Count, Measure), or None."""
    if want is str:
        return None if isinstance(value, str) else f"{value!r:.40} is not a string"
    if want is bool:
        return None if isinstance(value, bool) else f"{value!r:.40} is not true or false"
    if want is list:
        return None if isinstance(value, list) else f"{value!r:.40} is not a list"
    whole = want is Count
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
        return f"{value!r:.40} is not {'a whole number' if whole else 'a number'}"
    if not (0 <= value <= MAX_NUMBER):  # NaN fails this too
        return f"{value!r:.40} is not a finite measurement from 0 to {MAX_NUMBER:g}"
    return None


@dataclass(frozen=True)
class Place(RowType):
    """One placement (out of place, in place) of a bench point."""
    time: Measure
    alg_bw: Measure
    bus_bw: Measure


@dataclass(frozen=True)
class BenchPoint(RowType):
    collective: str
    size: Count
    count: Count | None
    out_of_place: Place
    in_place: Place


@dataclass(frozen=True)
class InitRound(RowType):
    mode: str
    round: Count
    rank: Count
    warmup: bool
    outcome: str
    exchange_s: Measure | None
    create_s: Measure | None
    init_s: Measure | None
    first_collective_s: Measure | None
    destroy_s: Measure | None


@dataclass(frozen=True)
class SimulatedInit(RowType):
    mode: str
    ranks_per_root: Count | None
    nroots: Count
    init: Count
    wall_s: Measure
    stale_ranks: Count


@dataclass(frozen=True)
class StressRound(RowType):
    seq: Count
    mode: str
    round: Count
    verdict: str


@dataclass(frozen=True)
class StressMode(RowType):
    """A stress summary's row: one init mode's tally."""
    mode: str
    rounds: Count
    ok: Count


@dataclass(frozen=True)
class Free(RowType):
    """A kind whose rows are free-form (doctor's checks, accept's verdicts, a leak check's findings)."""


@dataclass(frozen=True)
class LocatePair(RowType):
    src: Count
    dst: Count
    busbw: Measure


@dataclass(frozen=True)
class FleetNode(RowType):
    node: str


@dataclass(frozen=True)
class ReplayCall(RowType):
    collective: str
    bytes: Count
    dtype: str
    group_ranks: list
    calls: Count
    time_us: Measure | None


@dataclass(frozen=True)
class GpuCopies(RowType):
    gpu: Count
    device_GBps: Measure
    h2d_GBps: Measure
    d2h_GBps: Measure
