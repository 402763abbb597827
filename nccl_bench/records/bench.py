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

records.bench_layouts reads it back, and nccl-tests' own files.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, fields


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


@dataclass
class Placement:
    """One placement of a point (out of place or in place), as nccl-tests reports it."""

    time: float  # us per operation (device time); with -C the host's time per launch (key cpu_time)
    alg_bw: float  # GB/s
    bus_bw: float  # GB/s
    nwrong: int | None  # wrong elements over the ranks; None: not checked
    cpu_time: bool = False  # -C: `time` is the host's and the JSON names it cpu_time

    def to_json(self) -> dict:
        return {"cpu_time" if self.cpu_time else "time": self.time, "alg_bw": self.alg_bw, "bus_bw": self.bus_bw,
                "nwrong": self.nwrong}

    @classmethod
    def from_json(cls, d: dict) -> "Placement":
        cpu = "time" not in d and "cpu_time" in d
        return cls(d["cpu_time" if cpu else "time"], d["alg_bw"], d["bus_bw"], d.get("nwrong"), cpu)


@dataclass
class BenchRow:
    """One point of a sweep: nccl-tests' fields first, then ours; the -J file's `results` entry."""

    collective: str
    size: int  # bytes of the largest buffer (nccl-tests' size)
    count: int  # elements per rank the call is given (nccl-tests' count)
    type: str  # nccl-tests' type name
    redop: str  # the reduction, or "none"
    root: int  # -1 where the collective has none
    out_of_place: Placement
    in_place: Placement
    cycle: int = 0  # -N: which cycle of the sweep
    actual_iterations: int = 0
    host_us: dict = field(default_factory=dict)  # placement -> host time per launch (us), with or without -C
    out_of_place_per_iter: dict | None = None  # -I: nccl-tests' per-iteration block
    in_place_per_iter: dict | None = None
    timestamp: str | None = None  # -S: when the size started
    spread_pct: dict | None = None  # -N > 1: placement -> spread over the cycles (%)
    unstable: bool | None = None  # -N > 1: a spread over stats.UNSTABLE_PCT
    algo: str = "default"
    init: str = "regular"
    backend: str | None = None
    nranks: int | None = None
    group: int | None = None  # --split: this row's group and color
    color: int | None = None
    algo_confirmed: str | None = None  # what NCCL reported it ran ('p2p' where no algorithm applies)

    def place(self, name: str) -> Placement:
        return getattr(self, name)

    def per_iter(self, name: str) -> dict | None:
        return getattr(self, name + "_per_iter")

    def to_json(self, experiment: str | None = None) -> dict:
        """The file's row: nccl-tests' keys in its order (root as its "%6i" string and experiment_name where
        `experiment` is given, as in the -J file), then ours; fields that are unset are left out."""
        out = {}
        for key in HEAD:
            if key == "experiment_name":
                if experiment is not None:
                    out[key] = experiment
            elif key == "root":
                out[key] = f"{self.root:6d}" if experiment is not None else self.root
            elif key in PLACES:
                out[key] = self.place(key).to_json()
            elif getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update((f.name, getattr(self, f.name)) for f in fields(self)
                   if f.name not in out and f.name not in HEAD and getattr(self, f.name) is not None
                   and not (f.name == "host_us" and not self.host_us))
        return out

    @classmethod
    def from_json(cls, d: dict) -> "BenchRow":
        """A row as the file holds it (normal_row: root an int); keys of no field are dropped."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw.update({p: Placement.from_json(d[p]) for p in PLACES})
        if isinstance(kw.get("root"), str):
            kw["root"] = int(kw["root"].strip())
        return cls(**kw)


def totals(rows: list[BenchRow]) -> tuple[int, float]:
    """nccl-tests' run totals: wrong values over every row and place, and the average busbw."""
    wrong = sum((r.place(p).nwrong or 0) for r in rows for p in PLACES)
    bws = [r.place(p).bus_bw for r in rows for p in PLACES]
    return wrong, sum(bws) / len(bws) if bws else 0.0


MIN_BW_SHARE = 0.9  # nccl-tests fails a run whose average busbw is below 0.9 x NCCL_TESTS_MIN_BW


def below_min_bw(rows: list[BenchRow], min_bw: float | None) -> bool | None:
    """Whether the run's average busbw fails nccl-tests' NCCL_TESTS_MIN_BW (None: not checked)."""
    return None if min_bw is None else totals(rows)[1] < min_bw * MIN_BW_SHARE


def document(rows: list[BenchRow], meta: dict, config: dict, devices: list[dict], start_time: str,
             args: list[str], errors: list[str], min_bw: float | None = None) -> dict:
    """The whole file, nccl-tests' keys first."""
    wrong, average = totals(rows)
    below = below_min_bw(rows, min_bw)
    experiment = os.environ.get("NCCL_TESTS_EXPERIMENT_NAME", "")
    return {
        "version": VERSION, "start_time": start_time, "args": args,
        "env": [f"{k}={v}" for k, v in (meta.get("env") or {}).items()],
        "nccl_version": nccl_version_code((meta.get("versions") or {}).get("nccl")),
        "config": {**config, "devices": devices},
        "results": [r.to_json(experiment) for r in rows],
        "out_of_bounds": {"count": wrong, "okay": flag(not wrong)},
        "average_bus_bandwidth": {"bandwidth": average, "okay": "unchecked" if below is None else flag(not below)},
        "errors": errors, "end_time": now(),
        "kind": "bench", "schema": SCHEMA, "meta": meta,
    }

