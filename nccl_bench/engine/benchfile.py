"""The bench -J file: nccl-tests' layout (src/util.cu, JSON version 2) with ours beside it.

    {version, start_time, args, env, nccl_version, config{..., devices}, results[], out_of_bounds,
     average_bus_bandwidth, errors, end_time,   <- nccl-tests' keys, in its order and types
     kind, schema, meta}                         <- ours: what this is, and the one metadata block

`results` are the flat rows: each carries nccl-tests' keys first (size, count, type, redop,
root as "%6i", out_of_place, [out_of_place_per_iter], in_place, [in_place_per_iter],
actual_iterations, experiment_name), then ours (collective, algo, init, backend, nranks, cycle,
algo_confirmed, [timestamp]). nccl-tests writes booleans of `config` and of the two verdict
blocks as the strings "true"/"false"; so do we. `env` lists only the variables meta.env
records (NCCL_*, CUDA_*, TORCH_* ...), never the whole environment: result files get shared.

Reading (`rows_and_meta`) takes this layout, the same layout written by nccl-tests itself (no
kind: the collective is named from args[0], e.g. all_reduce_perf), and our schema-1 files
({kind, schema, meta, rows}); rows come back in one shape: root an int, a skipped placement
(null) as zeros with nwrong None, "cpu_time" (nccl-tests -C 1) read as the time.
"""
from __future__ import annotations

import os
import re
import time

VERSION = 2  # nccl-tests' JSON_FILE_VERSION
SCHEMA = 2  # our bench schema in this layout (schema 1: {kind, schema, meta, rows})
HEAD = ("size", "count", "type", "redop", "root", "out_of_place", "out_of_place_per_iter", "in_place",
        "in_place_per_iter", "actual_iterations", "experiment_name")
PLACES = ("out_of_place", "in_place")
STAMP = "%Y-%m-%d %H:%M:%S"


def now() -> str:
    return time.strftime(STAMP)


def flag(value) -> str:
    """nccl-tests' booleans in JSON: the strings "true" / "false"."""
    return "true" if value else "false"


def nccl_version_code(version: str | None) -> int | None:
    """'2.28.9' -> 22809 (NCCL_VERSION_CODE); None when unknown."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version or "")
    if not m:
        return None
    major, minor, patch = map(int, m.groups())
    return major * 10000 + minor * 100 + patch if (major, minor) >= (2, 9) else major * 1000 + minor * 100 + patch


def result_object(row: dict, experiment: str) -> dict:
    """One row in nccl-tests' key order, root as its "%6i" string, then our fields."""
    out = {}
    for key in HEAD:
        if key == "root":
            out[key] = f"{row['root']:6d}"
        elif key == "experiment_name":
            out[key] = experiment
        elif key in row:
            out[key] = row[key]
    out.update((k, v) for k, v in row.items() if k not in out)
    return out


def totals(rows: list[dict]) -> tuple[int, float]:
    """nccl-tests' run totals: wrong values over every row and place, and the average busbw."""
    wrong = sum((r[p]["nwrong"] or 0) for r in rows for p in PLACES)
    bws = [r[p]["bus_bw"] for r in rows for p in PLACES]
    return wrong, sum(bws) / len(bws) if bws else 0.0


def document(rows: list[dict], meta: dict, config: dict, devices: list[dict], start_time: str,
             args: list[str], errors: list[str]) -> dict:
    """The whole file, nccl-tests' keys first."""
    wrong, average = totals(rows)
    experiment = os.environ.get("NCCL_TESTS_EXPERIMENT_NAME", "")
    return {
        "version": VERSION, "start_time": start_time, "args": args,
        "env": [f"{k}={v}" for k, v in (meta.get("env") or {}).items()],
        "nccl_version": nccl_version_code((meta.get("versions") or {}).get("nccl")),
        "config": {**config, "devices": devices},
        "results": [result_object(r, experiment) for r in rows],
        "out_of_bounds": {"count": wrong, "okay": flag(not wrong)},
        "average_bus_bandwidth": {"bandwidth": average, "okay": "unchecked"},
        "errors": errors, "end_time": now(),
        "kind": "bench", "schema": SCHEMA, "meta": meta,
    }


# --- reading ------------------------------------------------------------------------------------------
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
    if not isinstance(p, dict):  # nccl-tests writes null for a placement it did not run
        return {"time": 0.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None, "skipped": True}
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
    return [normal_row(r, defaults) for r in doc["results"] if isinstance(r, dict)], meta


def rows(doc: dict) -> list[dict]:
    """Raw rows of a bench file in any layout (for code that reads a file it just had written)."""
    return rows_and_meta(doc)[0]
