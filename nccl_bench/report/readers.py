"""Load and validate result files for the report: this project's kinds and asv's results.

Every file is checked before anything is drawn or written: a file that is not a result of
this project, a schema version this code cannot read, an empty file, or rows without the
fields the report needs are bad input: UsageError naming the file (one line, exit 2).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

from nccl_bench.measure import benchfile
from nccl_bench.core import stats
from nccl_bench.core.errors import UsageError
from nccl_bench.core.results import SCHEMA_VERSION

JOURNAL_SCHEMA = "nccl_bench.stress.journal/1"  # stress/journal.py's SCHEMA
ASV_RESULTS_VERSION = 2  # asv.results.Results.api_version
# asv's statistics of a benchmark's samples (asv_runner.statistics.compute_stats) -> our row's keys
STATS = {"stats_ci_99_a": "ci_lo", "stats_ci_99_b": "ci_hi", "stats_q_25": "q25", "stats_q_75": "q75"}
# kind -> fields every row must have (dotted names look inside a nested dict)
ROW_FIELDS = {
    "bench": ("collective", "size", "out_of_place.time", "out_of_place.bus_bw", "in_place.time", "in_place.bus_bw"),
    "init": ("mode", "round", "rank", "warmup", "outcome", "exchange_s", "create_s", "init_s",
             "first_collective_s", "destroy_s"),
    "init-simulate": ("mode", "ranks_per_root", "nroots", "init", "wall_s", "stale_ranks"),
    "stress": ("seq", "mode", "round", "verdict"),
    "stress-summary": ("mode", "rounds", "ok"),
    "doctor": (),
    "accept": (),
    "locate": ("src", "dst", "busbw"),
}
KINDS = tuple(ROW_FIELDS) + ("asv",)
ASV_INFO = ("asv-machine", "asv-benchmarks")  # asv's machine.json and benchmarks.json: read for what they say
EMPTY_OK = ("locate",)  # one rank: no pair rows, the per-GPU check in the metadata
ASV_MACHINE_FIELDS = {"machine", "arch", "cpu", "num_cpu", "os", "ram", "version"}  # asv.machine.Machine's


@dataclass
class Result:
    """One input file: its kind, metadata block and flat rows."""

    path: Path
    given: str  # the name as the user typed it (the report names inputs this way)
    kind: str
    meta: dict
    rows: list[dict]
    notes: list[dict] = field(default_factory=list)  # stress journal: baseline, resume and end lines
    damaged: list[int] = field(default_factory=list)  # stress journal: lines a kill cut short (1-based)

    def reading(self) -> list[str]:
        """What reading this file found worth saying: lines cut short, and the rounds read."""
        if self.kind != "stress":
            return []
        return [f"{self.given} line {n}: cut short (a write interrupted), skipped" for n in self.damaged] + [
            f"{self.given}: {len(self.rows)} round(s) read"]

    @property
    def machine(self) -> str:
        return self.meta.get("machine") or "?"

    @property
    def backend(self) -> str | None:
        return self.meta.get("backend")

    @property
    def nranks(self) -> int | None:
        for block in ("bench", "params", "options"):
            n = (self.meta.get(block) or {}).get("nranks")
            if n:
                return n
        return None

    def versions(self) -> str:
        """'torch 2.11.0+cu130, NCCL 2.28.9' (what is known)."""
        v = self.meta.get("versions") or {}
        parts = [f"torch {v['torch']}" if v.get("torch") else None,
                 f"NCCL {v['nccl']}" if v.get("nccl") else None,
                 f"nccl4py {v['nccl4py']}" if v.get("nccl4py") else None,
                 f"driver {v['driver']}" if v.get("driver") else None]
        return ", ".join(p for p in parts if p) or "versions unknown"

    def title(self) -> str:
        """Machine, backend x ranks and versions, for plot titles."""
        who = self.machine + (f" ({self.backend} x{self.nranks})" if self.backend and self.nranks
                              else f" ({self.backend})" if self.backend else "")
        return f"{who} · {self.versions()}"


def load(given: str) -> Result:
    path = Path(given)
    if not path.is_file():
        raise UsageError(f"{given}: no such file" if not path.exists() else f"{given}: not a file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{given}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise UsageError(f"{given}: empty file, not a result")
    first = text.lstrip().split("\n", 1)[0]
    head = _json(first)
    if isinstance(head, dict) and head.get("type") == "header":
        return _journal(path, given, head, text)
    doc = _json(text)
    if doc is None:
        raise UsageError(f"{given}: not a result of nccl-bench (not JSON, nor a stress journal)")
    if isinstance(doc, dict) and {"commit_hash", "results", "result_columns"} <= doc.keys():
        return _asv(path, given, doc)
    if (info := _asv_info(path, given, doc)) is not None:
        return info
    if benchfile.is_layout(doc):  # bench -J: ours (kind bench) or written by nccl-tests itself
        return _bench(path, given, doc)
    if not (isinstance(doc, dict) and {"kind", "schema", "rows"} <= doc.keys()):
        raise UsageError(f"{given}: not a result of nccl-bench (no kind/schema/rows)")
    kind, schema = doc["kind"], doc["schema"]
    if kind not in ROW_FIELDS:
        raise UsageError(f"{given}: kind '{kind}' is not a result kind this report reads ({', '.join(KINDS)})")
    if kind == "bench" and schema == SCHEMA_VERSION:  # schema 1: before bench took nccl-tests' layout
        return _bench(path, given, doc)
    if schema != SCHEMA_VERSION:
        raise UsageError(f"{given}: schema version {schema!r} of kind '{kind}'; this report reads version "
                         f"{SCHEMA_VERSION}")
    rows, meta = doc["rows"], doc.get("meta") or {}
    _check_rows(given, kind, rows)
    if not isinstance(meta, dict):
        raise UsageError(f"{given}: its metadata block is not an object")
    return Result(path, given, kind, meta, rows)


def _bench(path: Path, given: str, doc: dict) -> Result:
    """A bench file in any layout it was ever written in: one row per point (median over -N cycles)."""
    if doc.get("kind", "bench") != "bench":
        raise UsageError(f"{given}: kind '{doc['kind']}' in nccl-tests' layout; only bench files have it")
    if doc.get("kind") == "bench" and doc.get("schema") not in (SCHEMA_VERSION, benchfile.SCHEMA):
        raise UsageError(f"{given}: schema version {doc.get('schema')!r} of kind 'bench'; this report reads "
                         f"versions {SCHEMA_VERSION} and {benchfile.SCHEMA}")
    key = "results" if benchfile.is_layout(doc) else "rows"
    if not isinstance(doc[key], list) or not all(isinstance(r, dict) for r in doc[key]):
        raise UsageError(f"{given}: '{key}' is not a list of objects")
    rows, meta = benchfile.rows_and_meta(doc)
    if not isinstance(meta, dict):
        raise UsageError(f"{given}: its metadata block is not an object")
    _check_rows(given, "bench", rows, key)
    return Result(path, given, "bench", meta, median_over_cycles(rows))


PLACES = benchfile.PLACES  # a bench row's two measurements; sweep writes them
PER_CYCLE = {*PLACES, *(p + "_per_iter" for p in PLACES), "cycle", "timestamp", "host_us"}  # differ between cycles


def median_over_cycles(rows: list[dict]) -> list[dict]:
    """bench -N: one row per point with the median time and bandwidths of its cycles (wrong values
    summed) and `cycles` = how many; single-cycle files come back unchanged."""
    if all(r.get("cycle", 0) == 0 for r in rows):
        return rows
    groups: dict[str, list[dict]] = {}
    for r in rows:
        key = json.dumps({k: v for k, v in r.items() if k not in PER_CYCLE}, sort_keys=True)
        groups.setdefault(key, []).append(r)
    out = []
    for same in groups.values():
        row = {k: v for k, v in same[0].items() if k not in PER_CYCLE}
        row["cycles"] = len(same)
        if "spread_pct" not in row:  # written before bench kept the spread: from the cycles here
            row["spread_pct"] = {p: stats.spread_pct(r[p]["time"] for r in same) for p in PLACES}
        for place in PLACES:
            wrong = [r[place].get("nwrong") for r in same]
            row[place] = {m: stats.percentile((r[place][m] for r in same), 0.5) for m in ("time", "alg_bw", "bus_bw")}
            row[place]["nwrong"] = None if all(w is None for w in wrong) else sum(w or 0 for w in wrong)
        if all("host_us" in r for r in same):
            row["host_us"] = {p: stats.percentile((r["host_us"][p] for r in same), 0.5) for p in PLACES}
        out.append(row)
    return out


def load_all(names: list[str]) -> list[Result]:
    """Each FILE, and each asv results folder as its files (see asv_folder)."""
    return [load(f) for n in names for f in (asv_folder(n) if Path(n).is_dir() else [n])]


def asv_folder(given: str) -> list[str]:
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


def asv_units(given: list[Result], asv_results: list[Result]) -> dict[str, str | None]:
    """Each asv benchmark's unit, from a benchmarks.json among `given` or beside the machine folders
    of `asv_results`; {} where there is none (units only make the history read better)."""
    infos = [r for r in given if r.kind == "asv-benchmarks"]
    for path in dict.fromkeys(r.path.parent.parent / "benchmarks.json" for r in asv_results):
        if not infos and path.is_file():
            try:
                infos.append(load(str(path)))
            except UsageError:
                pass
    return {k: v for r in infos if r.kind == "asv-benchmarks" for k, v in r.meta["units"].items()}


def _asv_info(path: Path, given: str, doc) -> Result | None:
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


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _check_rows(given: str, kind: str, rows, key: str = "rows") -> None:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{given}: '{key}' is not a list of objects")
    if not rows and kind not in EMPTY_OK:
        raise UsageError(f"{given}: a {kind} result with no rows (nothing to report)")
    for i, row in enumerate(rows):
        for name in ROW_FIELDS[kind]:
            value = row
            for part in name.split("."):
                if not isinstance(value, dict) or part not in value:
                    raise UsageError(f"{given}: row {i} of this {kind} result lacks '{name}'")
                value = value[part]


def slim(row: dict) -> dict:
    """A journal round as the report needs it: every rank's record dropped (a soak's journal holds
    millions of them), the resource samples kept as {rank: sample}."""
    out = {k: v for k, v in row.items() if k != "ranks"}
    samples = {rec["rank"]: rec["sample"] for rec in row.get("ranks") or [] if rec and rec.get("sample")}
    if samples:
        out["samples"] = samples
    return out


def _journal(path: Path, given: str, head: dict, text: str) -> Result:
    schema = head.get("schema")
    if not isinstance(schema, str) or not schema.startswith("nccl_bench.stress.journal/"):
        raise UsageError(f"{given}: not a result of nccl-bench (a header line, but not a stress journal's)")
    if schema != JOURNAL_SCHEMA:
        raise UsageError(f"{given}: stress journal schema '{schema}'; this report reads '{JOURNAL_SCHEMA}'")
    rows, notes, damaged = [], [], []
    for n, line in enumerate(text.splitlines()[1:], start=2):
        obj = _json(line)
        if not isinstance(obj, dict):
            damaged.append(n)  # cut by a kill: the journal's own rule is to skip it, and we say so
            continue
        (rows if obj.get("type") == "round" else notes).append(slim(obj) if obj.get("type") == "round" else obj)
    if not rows:
        raise UsageError(f"{given}: a stress journal with no complete round (nothing to report)")
    _check_rows(given, "stress", rows)
    meta = dict(head.get("meta") or {})
    meta["options"] = head.get("options") or {}
    return Result(path, given, "stress", meta, rows, notes, damaged)


def _asv(path: Path, given: str, doc: dict) -> Result:
    """asv's results/<machine>/<commit>-<env>.json: one row per benchmark and parameter combination."""
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
