"""Reading a bench file in any layout it was ever written in: ours in nccl-tests' layout (records.bench),
the same layout written by nccl-tests itself (no kind: the collective is named from args[0], e.g.
all_reduce_perf), and our schema-1 files ({kind, schema, meta, rows}). Rows come back in one shape: root
an int, a skipped placement (null) as zeros with nwrong None, "cpu_time" (nccl-tests -C 1) read as the
time; a -N file's cycles folded to their medians (`Result.rows`), every cycle kept (`Result.cycles`)."""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from nccl_bench.core import stats
from nccl_bench.core.errors import UsageError
from nccl_bench.records.bench import PLACES, SCHEMA
from nccl_bench.records.kinds import SCHEMA_VERSION, check_rows
from nccl_bench.records.result import Result


def is_layout(doc) -> bool:
    """nccl-tests' layout (ours or theirs)."""
    return isinstance(doc, dict) and "version" in doc and isinstance(doc.get("results"), list)


def _number(v):
    """nccl-tests writes NaN as the string "nan"."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _place(p) -> dict:
    if p is None:  # nccl-tests writes null for a placement it did not run
        return {"time": 0.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None, "skipped": True}
    if not isinstance(p, dict):
        return p  # not a placement: the row's check names it
    out = {k: _number(v) for k, v in p.items()}
    if "time" not in out and "cpu_time" in out:
        out["time"] = out["cpu_time"]
    return out


def normal_row(r: dict, defaults: dict) -> dict:
    row = {**defaults, **r}
    root = row.get("root", -1)
    row["root"] = int(root.strip()) if isinstance(root, str) and root.strip().lstrip("-").isdigit() else root
    for p in PLACES:
        if p in row:
            row[p] = _place(row[p])
    return row


def collective_of(args) -> str:
    """nccl-tests' binary name: ['./build/all_reduce_perf', ...] -> all_reduce."""
    name = os.path.basename(str(args[0])) if args else ""
    return name[:-len("_perf")] if name.endswith("_perf") else (name or "?")


def theirs_meta(doc: dict) -> tuple[dict, dict]:
    """(meta, row defaults) for a file that nccl-tests wrote."""
    cfg = doc.get("config") or {}
    devices = cfg.get("devices") or []
    hosts = sorted({d.get("hostname") for d in devices if isinstance(d, dict) and d.get("hostname")})
    env = dict(e.split("=", 1) for e in doc.get("env") or [] if isinstance(e, str) and "=" in e)
    code = doc.get("nccl_version")
    nccl = f"{code // 10000}.{code // 100 % 100}.{code % 100}" if isinstance(code, int) and code >= 20900 else None
    names = sorted({d.get("device_info") for d in devices if isinstance(d, dict) and d.get("device_info")})
    meta = {"machine": hosts[0] if len(hosts) == 1 else ",".join(hosts) or None, "hosts": hosts,
            "backend": "nccl", "source": "nccl-tests", "versions": {"nccl": nccl},
            "gpus": [{"name": n} for n in names], "start_time": doc.get("start_time"),
            "bench": {"nranks": len(devices) or None, "cudagraph": cfg.get("graph") or 0,
                      "iters": cfg.get("iterations"), "warmup_iters": cfg.get("warmup_iters"),
                      "agg_iters": cfg.get("aggregated_iterations")}}
    defaults = {"collective": collective_of(doc.get("args")), "algo": (env.get("NCCL_ALGO") or "default").lower(),
                "init": "regular", "backend": "nccl", "nranks": len(devices) or None, "cycle": 0}
    return meta, defaults


def rows_and_meta(doc: dict) -> tuple[list[dict], dict]:
    """Raw rows (every cycle) and the metadata block of any bench file this project reads."""
    if not is_layout(doc):
        return [normal_row(r, {}) for r in doc["rows"]], doc.get("meta") or {}
    if doc.get("kind") == "bench":
        return [normal_row(r, {}) for r in doc["results"] if isinstance(r, dict)], doc.get("meta") or {}
    meta, defaults = theirs_meta(doc)
    return numbered_cycles([normal_row(r, defaults) for r in doc["results"] if isinstance(r, dict)]), meta


def numbered_cycles(rows: list[dict]) -> list[dict]:
    """nccl-tests' rows numbered by cycle: its -N repeats the whole sweep and writes no cycle, so a series whose
    size does not grow has started its next cycle (a sweep measures each size once, smallest first)."""
    last: dict[tuple, tuple[int, int]] = {}  # series -> (its cycle now, its last size)
    for r in rows:
        key = _series({**r, "cycle": None})
        cycle, size = last.get(key, (0, -1))
        if isinstance(r.get("size"), int) and r["size"] <= size:
            cycle += 1
        r["cycle"] = cycle
        last[key] = (cycle, r["size"] if isinstance(r.get("size"), int) else size)
    return rows


def rows(doc: dict) -> list[dict]:
    """Raw rows of a bench file in any layout (for code that reads a file it just had written)."""
    return rows_and_meta(doc)[0]


def result(path: Path, given: str, doc: dict, need_rows: bool = False) -> Result:
    """A bench file in any layout it was ever written in: one row per point (median over -N cycles)."""
    if doc.get("kind", "bench") != "bench":
        raise UsageError(f"{given}: kind '{doc['kind']}' in nccl-tests' layout; only bench files have it")
    if doc.get("kind") == "bench" and doc.get("schema") not in (SCHEMA_VERSION, SCHEMA):
        raise UsageError(f"{given}: schema version {doc.get('schema')!r} of kind 'bench'; nccl-bench reads "
                         f"versions {SCHEMA_VERSION} and {SCHEMA}")
    key = "results" if is_layout(doc) else "rows"
    if not isinstance(doc[key], list) or not all(isinstance(r, dict) for r in doc[key]):
        raise UsageError(f"{given}: '{key}' is not a list of objects")
    rows, meta = rows_and_meta(doc)
    if not isinstance(meta, dict):
        raise UsageError(f"{given}: its metadata block is not an object")
    check_rows(given, "bench", rows, key, need_rows)
    rows, said = in_size_order(given, rows)
    top = {k: v for k, v in doc.items() if k not in ("kind", "schema", "meta", "rows", "results")}
    return Result(path, given, "bench", meta, median_over_cycles(rows), top=top, cycles=rows, said=said)


# what makes a row its own point of a sweep; every other field is measured or describes the run
POINT = ("collective", "type", "redop", "root", "algo", "init", "backend", "nranks", "group", "color", "graph",
         "cycle")


def _series(row: dict) -> tuple:
    return tuple(str(row.get(k)) for k in POINT)


def in_size_order(given: str, rows: list[dict]) -> tuple[list[dict], list[str]]:
    """(the rows with each series' sizes ascending, as a sweep measures them; what is worth saying). A point
    twice in one cycle is no sweep's: refused, naming it. Sizes out of order (a file edited or joined by hand)
    are read in order, and said."""
    series: dict[tuple, list[int]] = {}
    for r in rows:
        series.setdefault(_series(r), []).append(r["size"])
    unsorted = []
    for key, sizes in series.items():
        twice = [(size, n) for size, n in Counter(sizes).items() if n > 1]
        if twice:
            cycle = "0" if key[-1] == "None" else key[-1]
            raise UsageError(f"{given}: {key[0]} at {twice[0][0]} B appears {twice[0][1]} times in one sweep "
                             f"(cycle {cycle}): a sweep measures each size once")
        if sizes != sorted(sizes):
            unsorted.append(key[0])
    if not unsorted:
        return rows, []
    first = {key: i for i, key in enumerate(series)}
    return (sorted(rows, key=lambda r: (first[_series(r)], r["size"])),
            [f"{given}: sizes out of order in {', '.join(dict.fromkeys(unsorted))}; read in size order"])


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


