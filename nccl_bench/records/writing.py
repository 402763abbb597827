"""Writing a result of a kind: {kind, schema, meta, rows} (bench: nccl-tests' layout, records.bench),
through core.results, which never overwrites a file. Each row is checked by its kind's row class before the file
is written (records.rowtypes, as a reader checks it): a result a reader would refuse is never written where asked."""
from __future__ import annotations

from pathlib import Path

from nccl_bench.core import results
from nccl_bench.core.errors import UsageError
from nccl_bench.records.bench_layouts import rows as bench_rows
from nccl_bench.records.kinds import KINDS, SCHEMA_VERSION, check_rows


def document(kind: str, rows: list[dict], meta: dict, **top) -> dict:
    """The whole file of a kind; `top` are the few kinds' keys beside the rows (a summary's totals)."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not a result kind (records.kinds)")
    return {"kind": kind, "schema": SCHEMA_VERSION, **top, "meta": meta, "rows": rows}


def write(kind: str, rows: list[dict], meta: dict, path: str | Path | None = None, **top) -> Path:
    """Write it where asked (or under results/runs/); a taken default name gets a numeric suffix."""
    return results.write_doc(kind, document(kind, rows, meta, **top), path,
                             problem=lambda doc: _refused(kind, doc["rows"]))


def write_bench(doc: dict, path: str | Path | None = None) -> Path:
    """A bench -J file (records.bench.document) where asked (or under results/runs/), never overwriting."""
    return results.write_doc("bench", doc, path, problem=lambda d: _refused("bench", bench_rows(d)))


def _refused(kind: str, rows: list[dict]) -> str | None:
    try:
        check_rows(f"this {kind} result", kind, rows)
    except UsageError as e:
        return str(e)
    return None
