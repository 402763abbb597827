"""A crash-safe journal: one JSON line per round, flushed and fsynced before the next round.

The first line is a header (schema, options, metadata). A round is written once it is
complete, its teardown included (stress.inflight), so a kill -9 of the whole job loses at most
the round in flight and the `--destroys-in-flight` rounds behind it; a torn last line is
ignored on reading. `--resume` continues
after the last complete round of a journal written with the same options; anything else
(unreadable, foreign, other options) is bad input, and an existing journal is never
truncated or rewritten, only appended to.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from nccl_bench.core.errors import UsageError
from nccl_bench.core import results
from nccl_bench.records.stress_journal import MAX_NOTES, is_header
from nccl_bench.records.kinds import JOURNAL_SCHEMA
from stress import failpoint
from stress.record import record_or_none

SCHEMA = JOURNAL_SCHEMA  # the format is defined once, in nccl_bench.records


def default_path() -> Path:
    """results/runs/stress-<machine>-<time>-<pid>.jsonl: a journal is held for the whole run and never
    continued by a new one, so two runs started in the same second each need a name of their own (a whole
    result document instead takes the next free name when it is written)."""
    plain = results.default_path("stress", "")
    return plain.with_name(f"{plain.name}-{os.getpid()}.jsonl")


@dataclass
class Contents:
    """What a journal holds: its header, its round lines in order (unless they were handed to a
    callback as they were read), and its other lines."""

    header: dict
    rounds: list[dict] = field(default_factory=list)
    count: int = 0  # complete round lines, kept or not
    torn: int = 0  # lines that did not parse (a round cut by a kill)
    notes: list[dict] = field(default_factory=list)  # resume, baseline, stopped, end, launcher lines
    ended: bool = False  # an `end` line after the last resume: the run finished

    def restarts(self) -> list[dict]:
        """Resume lines written by a worker group the launcher restarted."""
        return [n for n in self.notes if n.get("type") == "resume" and n.get("restart")]

    def done(self) -> set[tuple[str, int]]:
        return {(r["mode"], r["round"]) for r in self.rounds}


def read(path: str | Path, on_round: Callable[[dict], None] | None = None) -> Contents:
    """Parse a journal line by line, or raise UsageError saying why it cannot be continued. With
    `on_round`, each round line goes to it and is not kept: a soak's journal is read in O(1) memory."""
    p = Path(path)
    try:
        f = open(p, encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--resume: journal {p} does not exist") from None
    except OSError as e:
        raise UsageError(f"--resume: cannot read journal {p}: {e.strerror or e}") from None
    with f:
        try:
            first = f.readline()
            header = json.loads(first) if first else None
        except (ValueError, UnicodeDecodeError):
            header = None
        if not is_header(header):
            raise UsageError(f"--resume: {p} is not a stress journal (no '{SCHEMA}' header on its first line)")
        out = Contents(header)
        try:
            for line in f:
                _take(out, line, on_round)
                if len(out.notes) > MAX_NOTES:  # held whole: a few a run
                    raise UsageError(f"--resume: {p} holds more than {MAX_NOTES:,} lines that are not rounds: "
                                     "not a stress journal's")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--resume: cannot read journal {p}: {getattr(e, 'strerror', None) or e}") from None
    return out


def _take(out: Contents, line: str, on_round) -> None:
    try:
        row = json.loads(line)
    except ValueError:
        out.torn += 1
        return
    if isinstance(row, dict) and row.get("type") == "round":
        out.count += 1
        row["ranks"] = [record_or_none(r) for r in row.get("ranks") or []]
        if on_round is None:
            out.rounds.append(row)
        else:
            on_round(row)
    elif isinstance(row, dict):
        out.notes.append(row)
        if row.get("type") in ("resume", "end"):
            out.ended = row["type"] == "end"


def check_new(path: str | Path) -> None:
    """A fresh run never touches an existing file, needs its folder, and proves it can write there."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--journal {p}: a folder, where a file is expected")
    if p.exists():
        raise UsageError(f"journal {p} already exists; pass --resume to continue it "
                         "(a journal is never overwritten)")
    if not p.parent.is_dir():
        raise UsageError(f"folder {p.parent} does not exist (for --journal {p})")
    results.check_folder(p.parent, f"--journal {p}")


def check_appendable(path: str | Path) -> None:
    """--resume appends: the journal must take a write (read-only storage would lose every new round)."""
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise UsageError(f"--resume: cannot write to journal {path} ({e.strerror or e})") from None


def check_resumable(contents: Contents, identity: dict, path) -> None:
    """The options that shape a round must match the journal's."""
    from stress.options import RESUME_KEYS
    theirs = contents.header.get("options", {})
    diff = [k for k in RESUME_KEYS if theirs.get(k) != identity.get(k)]
    if diff:
        k = diff[0]
        raise UsageError(f"--resume: {path} was written with {k}={theirs.get(k)!r}, this run has "
                         f"{k}={identity.get(k)!r}; resume with the same options")


class JournalWriteError(RuntimeError):
    """The journal refused a line (a full disk): said with its path, the rounds before kept."""


class Writer:
    """Appends lines; each is flushed and fsynced before write() returns."""

    def __init__(self, path: str | Path, header: dict | None = None):
        self.path = Path(path)
        if header is not None:
            try:  # never clobber: a fresh journal is a new file
                self._f = open(self.path, "x")
            except FileExistsError:
                raise UsageError(f"journal {self.path} already exists; pass --resume to continue it") from None
            self._line({"type": "header", "schema": SCHEMA, **header})
        else:
            self._f = open(self.path, "a")
            if self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
                self._f.write("\n")  # after a torn line, start clean

    def _line(self, obj: dict) -> None:
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        if failpoint.armed("append"):
            failpoint.write_then_die(self._f, line)
        try:
            self._f.write(line)
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as e:  # a full disk: the journal so far and the rest of the run go on elsewhere
            self._move(line, e)

    def _move(self, line: str, error: OSError) -> None:
        """The journal so far (less a line the disk cut) and `line` in a new file in the temporary folder,
        where the run goes on; one line names both. Only where that fails too does the run end
        (JournalWriteError): the rounds written before stay, and --resume continues from them."""
        import tempfile
        import time
        old = self.path
        try:
            self._f.close()
        except OSError:
            pass  # its last bytes are what the full disk refused
        stem = old.name[:-len(old.suffix)] if old.suffix else old.name
        new = Path(tempfile.gettempdir()) / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{old.suffix}"
        try:
            with open(old, "rb") as src, open(new, "xb") as dst:  # streamed: a soak's journal is large
                shutil.copyfileobj(src, dst, 1 << 20)
                if dst.tell() and (src.seek(-1, os.SEEK_END), src.read(1))[1] != b"\n":
                    dst.write(b"\n")  # a line the disk cut: readers skip it and say so
            self._f = open(new, "a")
            self._f.write(line)
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as e:
            raise JournalWriteError(f"journal {old}: cannot write ({error.strerror or error}), nor {new} "
                                    f"({e.strerror or e}); the rounds before are kept in {old}, --resume "
                                    "continues it once there is room") from None
        self.path = new
        print(f"journal {old}: cannot write ({error.strerror or error}); every round so far and the rest of the "
              f"run go to {new}", file=sys.stderr, flush=True)

    def round(self, row: dict) -> None:
        ranks = [r.to_json() if r else None for r in row.get("ranks") or []]
        self._line({"type": "round", **row, "ranks": ranks})

    def note(self, obj: dict) -> None:
        """A non-round line (a resume marker, the baseline, the end)."""
        self._line(obj)

    def close(self) -> None:
        self._f.close()
