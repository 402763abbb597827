"""asv's files as results: its results/<machine>/<commit>-<env>.json (one row per benchmark and parameter
combination, with asv's statistics of the samples), machine.json (what machine) and benchmarks.json (each
benchmark's unit), and a results folder as its files."""
from __future__ import annotations

import math
from itertools import product
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.records.result import Result

ASV_RESULTS_VERSION = 2  # asv.results.Results.api_version
# asv's statistics of a benchmark's samples (asv_runner.statistics.compute_stats) -> our row's keys
STATS = {"stats_ci_99_a": "ci_lo", "stats_ci_99_b": "ci_hi", "stats_q_25": "q25", "stats_q_75": "q75"}
ASV_MACHINE_FIELDS = {"machine", "arch", "cpu", "num_cpu", "os", "ram", "version"}  # asv.machine.Machine's


def folder(given: str) -> list[str]:
    """An asv results folder's files: a machine's folder (machine.json and one file per commit), or
    the folder above with a machine folder each and benchmarks.json (beside the machine folder too)."""
    top = Path(given)
    machines = [top] if (top / "machine.json").is_file() else sorted(
        d for d in top.iterdir() if (d / "machine.json").is_file())
    if not machines:
        raise UsageError(f"{given}: a folder, but not asv results (no machine.json in it or its folders)")
    bench = top / "benchmarks.json" if (top / "benchmarks.json").is_file() else top.parent / "benchmarks.json"
    files = [bench] if bench.is_file() else []
    for m in machines:
        files += sorted(m.glob("*.json"))
    return [str(f) for f in files]


def info(path: Path, given: str, doc) -> Result | None:
    """asv's machine.json (what machine) or benchmarks.json (each benchmark's unit), or None."""
    if not isinstance(doc, dict):
        return None
    if doc.get("version") == 1 and "machine" in doc and set(doc) <= ASV_MACHINE_FIELDS:
        return Result(path, given, "asv-machine", {"machine": doc["machine"], "asv_machine": doc}, [])
    entries = {k: v for k, v in doc.items() if k != "version"}
    if entries and all(isinstance(v, dict) and "type" in v and "name" in v for v in entries.values()):
        units = {k: v.get("unit") for k, v in entries.items()}
        return Result(path, given, "asv-benchmarks", {"units": units}, [])
    return None


def results(path: Path, given: str, doc: dict) -> Result:
    """asv's results/<machine>/<commit>-<env>.json: one row per benchmark and parameter combination; a file
    whose cells are not what asv writes is one line naming it."""
    try:
        return _results(path, given, doc)
    except (TypeError, ValueError, IndexError, KeyError, AttributeError) as e:
        why = f"{type(e).__name__}: {str(e)[:80]}"
        raise UsageError(f"{given}: asv results whose cells are not asv's ({why})") from None


def _results(path: Path, given: str, doc: dict) -> Result:
    version = doc.get("version")
    if version != ASV_RESULTS_VERSION:
        raise UsageError(f"{given}: asv results version {version!r}; this report reads version "
                         f"{ASV_RESULTS_VERSION}")
    columns = doc["result_columns"]
    if not isinstance(columns, list) or "result" not in columns or not isinstance(doc["results"], dict):
        raise UsageError(f"{given}: asv results without 'result' columns")
    at = {name: columns.index(name) for name in ("result", "params", *STATS) if name in columns}
    rows = []
    for bench, values in sorted(doc["results"].items()):
        cell = lambda key: values[at[key]] if key in at and at[key] < len(values) else None  # noqa: E731
        results = cell("result")
        if results is None:
            continue  # asv keeps a benchmark that never produced a number as None
        names = [[str(x).strip("'\"") for x in choices] for choices in cell("params") or []]  # asv keeps repr()s
        combos = [", ".join(c) for c in product(*names)] if names else [""]
        stats = {key: cell(column) or [] for column, key in STATS.items()}
        for i, value in enumerate(results if isinstance(results, list) else [results]):
            rows.append({"benchmark": bench, "params": combos[i] if i < len(combos) else "?", "value": _number(value),
                         **{key: _number(got[i] if i < len(got) else None) for key, got in stats.items()}})
    params = doc.get("params") or {}
    stamped = doc.get("nccl_bench_versions") or {}  # asvsuite.stamp_versions: what the run measured
    meta = {"machine": params.get("machine"), "commit": doc.get("commit_hash"), "env": doc.get("env_name"),
            "date": doc.get("date"),
            "versions": {"python": doc.get("python"), **{k: v for k, v in stamped.items() if v}},
            "asv_params": params}
    return Result(path, given, "asv", meta, rows)


def _number(v):
    if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
        return v
    return None
