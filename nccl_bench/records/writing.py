"""Writing a result of a kind: {kind, schema, meta, rows} (bench: nccl-tests' layout, records.bench),
through core.results, which never overwrites a file."""
from __future__ import annotations

from pathlib import Path

from nccl_bench.core import results
from nccl_bench.records.kinds import KINDS, SCHEMA_VERSION


def document(kind: str, rows: list[dict], meta: dict, **top) -> dict:
    """The whole file of a kind; `top` are the few kinds' keys beside the rows (a summary's totals)."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not a result kind (records.kinds)")
    return {"kind": kind, "schema": SCHEMA_VERSION, **top, "meta": meta, "rows": rows}


def write(kind: str, rows: list[dict], meta: dict, path: str | Path | None = None, **top) -> Path:
    """Write it where asked (or under results/runs/); a taken default name gets a numeric suffix."""
    return results.write_doc(kind, document(kind, rows, meta, **top), path)
