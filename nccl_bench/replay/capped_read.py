"""Files from elsewhere, read within bounds: a trace's bytes (gunzipped as a stream) up to a cap, and JSON whose
nesting cannot exhaust the interpreter's stack. Whatever a file declares or expands to, reading it costs at
most the cap in memory, and a file past it is one line that names it (exit 2)."""
from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

from nccl_bench.core.errors import UsageError

MAX_TRACE_BYTES = 256 << 20  # one dump or trace, as read (gunzipped): a step of a job, not its whole run
# every file of one replay together, as read: 128 traces at the cap, or 4,096 dumps of 8 MiB (2,000 entries with
# their stack frames); past it, a whole run's files, whose reading alone would take many minutes
MAX_READ_ALL = 32 << 30
BLOCK = 1 << 20


class OverBudget(UsageError):
    """The files together passed MAX_READ_ALL: the whole replay's input is refused, never one file passed over."""


class ReadBudget:
    """The bytes the files of one replay may take together (MAX_READ_ALL): their sizes on disk, checked before
    any is read, then what each expands to as it is read; the file that passes it is named."""

    def __init__(self, paths: list[Path], total: int | None = None):
        self.total, self.used = total or MAX_READ_ALL, 0
        try:
            on_disk = sum(p.stat().st_size for p in paths)
        except OSError as e:
            raise UsageError(f"cannot read the files given: {e.strerror or e}") from None
        if on_disk > self.total:
            raise OverBudget(f"{paths[0]}: the {len(paths)} files given hold {on_disk:,} bytes together, more than "
                             f"a replay reads ({self.total >> 30} GiB): give it the steps to replay, not the whole run")

    def charge(self, path: Path, n: int) -> None:
        self.used += n
        if self.used > self.total:
            raise OverBudget(f"{path}: with the files before it, {self.used:,} bytes as read, more than a replay "
                             f"reads ({self.total >> 30} GiB): give it the steps to replay, not the whole run")


def read_capped(path: Path, cap: int = MAX_TRACE_BYTES, budget: ReadBudget | None = None) -> bytearray:
    """The file's bytes, gunzipped as a stream where it is gzip (PyTorch writes `.pt.trace.json.gz`); a file
    or stream that would pass `cap` is refused once it does, before more of it is read; what it took is charged
    to the `budget` of the files read with it."""
    out = bytearray()
    try:
        with path.open("rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            if not gz and os.fstat(f.fileno()).st_size > cap:
                raise UsageError(f"{path}: {os.fstat(f.fileno()).st_size} bytes, more than a trace this replay "
                                 f"reads ({cap >> 20} MiB): give it the steps to replay, not the whole run")
            src = gzip.GzipFile(fileobj=f) if gz else f
            while block := src.read(BLOCK):
                out += block
                if len(out) > cap:
                    raise UsageError(f"{path}: expands to more than {cap >> 20} MiB, more than a trace this replay "
                                     "reads: give it the steps to replay, not the whole run")
    except (OSError, EOFError, zlib.error) as e:
        raise UsageError(f"{path}: cannot read it ({type(e).__name__}: {str(e)[:80]})") from None
    if budget is not None:
        budget.charge(path, len(out))
    return out


def load_json(path: Path, data: bytes | bytearray, what: str):
    """JSON from a file, or one line that says why not (it does not parse, or nests too deep to read)."""
    try:
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise UsageError(f"{path}: nested too deep to be {what}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not {what} (JSON that does not parse: {str(e)[:80]})") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")
