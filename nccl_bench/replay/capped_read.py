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
BLOCK = 1 << 20


def read_capped(path: Path, cap: int = MAX_TRACE_BYTES) -> bytearray:
    """The file's bytes, gunzipped as a stream where it is gzip (PyTorch writes `.pt.trace.json.gz`); a file
    or stream that would pass `cap` is refused once it does, before more of it is read."""
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
