"""Result files: flat rows plus one metadata block; never overwrite an existing file."""
from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from nccl_bench.core.errors import UsageError
from nccl_bench.core.sysinfo import REPO, machine_name

SCHEMA_VERSION = 1
# A run's default outputs, ignored by git; committed reference results live in results/<machine>/.
# From a checkout (or an editable install), the checkout's; from an installed package, the current
# folder's (site-packages is no place for results).
RUNS = (REPO if (REPO / "pyproject.toml").is_file() else Path.cwd()) / "results" / "runs"


def default_path(kind: str, suffix: str = ".json") -> Path:
    """results/runs/<kind>-<machine>-<time><suffix>"""
    return RUNS / f"{kind}-{machine_name()}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}"


def latest_run(folder: Path = RUNS) -> Path | None:
    """The newest result file a run wrote under results/runs/ (what `report` reads by default)."""
    found = [p for p in folder.glob("*.json*") if p.suffix in (".json", ".jsonl") and p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def check_writable(path: str | Path | None, option: str = "--json", kind: str | None = None) -> None:
    """Prove before any work that the output can be written (exit 2 if not): the file is new, its folder
    exists, and a placeholder made there is removed again. No path but a `kind`: the default folder
    (results/runs/), made if missing, proven the same way."""
    if path is None:
        # the folder alone: the file's name asks NVML for the machine, at the start of every command
        if kind is not None:
            check_folder(RUNS, f"the default folder for {kind} results", make=True)
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {p}: a folder, where a file is expected")
    if p.exists() or p.is_symlink():
        raise UsageError(f"{p} already exists; results are never overwritten (choose another {option} path)")
    if not p.parent.is_dir():
        raise UsageError(f"folder {p.parent} does not exist (for {option} {p})")
    check_folder(p.parent, f"{option} {p}")


def check_folder(folder: Path, what: str, make: bool = False) -> None:
    """A file can be made in `folder` (made first where `make`), or UsageError naming `what`."""
    try:
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".nccl-bench-probe-{os.getpid()}"
        with open(probe, "x"):
            pass
        probe.unlink()
    except OSError as e:
        raise UsageError(f"{what}: cannot write in {folder} ({e.strerror or e})") from None


def check_out_folder(out: str | Path, option: str = "--out") -> None:
    """A folder a command fills (report, fleet): new or empty, and writable."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(f"{option} {out} is not empty; nothing is written over files")
    if not out.exists() and not out.parent.is_dir():
        raise UsageError(f"{option} {out}: folder {out.parent} does not exist")
    check_folder(out if out.is_dir() else out.parent, f"{option} {out}")


def write(kind: str, rows: list[dict], meta: dict, path: str | Path | None = None) -> Path:
    """Write {kind, schema, meta, rows}; a taken name gets a numeric suffix, never overwritten."""
    return write_doc(kind, {"kind": kind, "schema": SCHEMA_VERSION, "meta": meta, "rows": rows}, path)


def strict(value):
    """The document as strict JSON reads it: a number that is not finite (NaN, infinity) becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


class Refused(RuntimeError):
    """A document its own kind's reader would refuse: kept aside, not written where asked (a bug of ours)."""


def write_doc(kind: str, doc: dict, path: str | Path | None = None,
              problem: Callable[[dict], str | None] | None = None) -> Path:
    """Write a whole document, never overwriting. Where the disk refuses it at the end (full, gone read-only),
    what was computed is kept: the document goes to a fallback file in the temporary folder, and a line on
    stderr names both. `problem(doc)`, as it would be read back, says why a reader would refuse it: then it goes
    to that fallback file and Refused says why and where."""
    p = Path(path) if path else default_path(kind)
    clean = strict(doc)
    text = json.dumps(clean, indent=1, allow_nan=False) + "\n"
    if problem is not None and (why := problem(clean)) is not None:
        kept = _write_new(_fallback(kind), text, explicit=False)
        raise Refused(f"{why}: a reader would refuse it, so it was not written to {p}; what was computed is kept in "
                      f"{kept}")
    try:
        return _write_new(p, text, explicit=bool(path))
    except OSError as e:
        fallback = _write_new(_fallback(kind), text, explicit=False)
        print(f"cannot write {p} ({e.strerror or e}); the result is kept in {fallback}", file=sys.stderr, flush=True)
        return fallback


def _fallback(kind: str) -> Path:
    return Path(tempfile.gettempdir()) / f"nccl-bench-{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"


def _write_new(p: Path, text: str, explicit: bool) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = p, 1
    while True:
        try:
            f = open(candidate, "x")
        except FileExistsError:
            if explicit:  # an explicit path that appeared meanwhile: do not invent another name
                raise UsageError(f"{candidate} already exists; results are never overwritten") from None
            candidate = p.with_name(f"{p.stem}-{n}{p.suffix}")
            n += 1
            continue
        try:
            with f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            candidate.unlink(missing_ok=True)  # half a file is no result
            raise
        return candidate
