"""Result files: flat rows plus one metadata block; never overwrite an existing file."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

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


def check_writable(path: str | Path | None, option: str = "--json") -> None:
    """Fail early (exit 2) if a requested output file exists or its folder is missing."""
    if path is None:
        return
    p = Path(path)
    if p.exists():
        raise UsageError(f"{p} already exists; results are never overwritten (choose another {option} path)")
    if not p.parent.is_dir():
        raise UsageError(f"folder {p.parent} does not exist (for {option} {p})")


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


def write_doc(kind: str, doc: dict, path: str | Path | None = None) -> Path:
    """Write a whole document (bench: nccl-tests' layout, nccl_bench.records.bench), never overwriting."""
    p = Path(path) if path else default_path(kind)
    p.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = p, 1
    while True:
        try:
            with open(candidate, "x") as f:
                json.dump(strict(doc), f, indent=1, allow_nan=False)
                f.write("\n")
            return candidate
        except FileExistsError:
            if path:  # an explicit path that appeared meanwhile: do not invent another name
                raise UsageError(f"{candidate} already exists; results are never overwritten") from None
            candidate = p.with_name(f"{p.stem}-{n}{p.suffix}")
            n += 1
