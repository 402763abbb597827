"""Hardware profiles: acceptance thresholds as data, one JSON file per hardware.

A profile file (see profiles/h200x2.json) holds:

  name                   str   the profile's name (built-in files are named <name>.json)
  description, source    str   what it is for and where the numbers come from (optional)
  match                  obj   when to pick it: backends [str], gpu_model (substring of the
                               NVML name, optional), gpu_count (int, optional)
  busbw_min_GBps         [obj] {collective, bytes, min}: out-of-place busbw floor in GB/s
  latency_8B_max_us      num   largest 8-byte all_reduce time per operation, microseconds
  init_max_ms            num   largest median communicator init (ID exchange + init), ms
  wrong_max              int   wrong elements allowed in checked results (0)
  stress_failures_max    int   failed rounds allowed in the short stress run (0)
  counters_max_increase  obj   counter name (core.gpucounters.COUNTERS) -> allowed increase during accept
  origin                 str   built-in | derived | baseline | file: where the floors come from (optional;
                               a file of yours that says none is "file")
  copy_min_GBps          obj   per-GPU copy floors {device, h2d, d2h} in GB/s (optional)
  derivation             obj   how the floors were made: inputs, formula, spread (derived, baseline)

match may also hold nvls (bool): the profile fits only with NVLink SHARP on (true) or off (false).
busbw_min_GBps may be empty: one GPU has no collective to judge. Every field is checked on load;
a bad one is a UsageError naming the file and the field. `to_doc` writes a profile back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.core.gpucounters import COUNTERS

BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
BACKENDS = ("nccl", "torch", "gloo")
ORIGINS = ("built-in", "derived", "baseline", "file")
COPIES = ("device", "h2d", "d2h")


@dataclass(frozen=True)
class BusbwFloor:
    collective: str
    bytes: int
    min_GBps: float


@dataclass(frozen=True)
class Match:
    backends: tuple[str, ...]
    gpu_model: str | None = None
    gpu_count: int | None = None
    nvls: bool | None = None

    def fits(self, backend: str, gpu_names: list[str], nvls: bool | None = None) -> bool:
        if backend not in self.backends:
            return False
        if self.nvls is not None and nvls is not None and self.nvls != nvls:
            return False
        if self.gpu_count is not None and len(gpu_names) != self.gpu_count:
            return False
        if self.gpu_model is not None:
            return bool(gpu_names) and all(self.gpu_model.lower() in n.lower() for n in gpu_names)
        return True


@dataclass(frozen=True)
class Profile:
    name: str
    match: Match
    busbw: tuple[BusbwFloor, ...]
    latency_8B_max_us: float
    init_max_ms: float
    wrong_max: int
    stress_failures_max: int
    counters_max_increase: dict = field(default_factory=dict)
    description: str = ""
    source: str = ""
    path: str = ""
    origin: str = "built-in"
    copy_min_GBps: dict = field(default_factory=dict)
    derivation: dict = field(default_factory=dict)
    # a golden node's replay of one workload: {"workload": digest of its files, "sequence_max_us": limit}
    replay: dict = field(default_factory=dict)

    def sizes(self, collective: str) -> list[int]:
        """Message sizes (bytes) accept must measure for `collective`."""
        return sorted({f.bytes for f in self.busbw if f.collective == collective})

    def collectives(self) -> list[str]:
        return [c for c in COLLECTIVES if any(f.collective == c for f in self.busbw)]


# --- field validation: every message names the file and the field -------------------------------
class _Fields:
    def __init__(self, doc, where: str, prefix: str = ""):
        self.doc, self.where, self.prefix = doc, where, prefix

    def bad(self, key: str, want: str, got=None, missing: bool = False) -> UsageError:
        name = f"{self.prefix}{key}"
        if missing:
            return UsageError(f"profile {self.where}: missing field '{name}' ({want})")
        return UsageError(f"profile {self.where}: field '{name}' must be {want}, got {json.dumps(got)}")

    def get(self, key: str, kind: str, want: str, optional: bool = False, default=None):
        if key not in self.doc:
            if optional:
                return default
            raise self.bad(key, want, missing=True)
        v = self.doc[key]
        ok = {"str": isinstance(v, str) and v != "",
              "int": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
              "posint": isinstance(v, int) and not isinstance(v, bool) and v > 0,
              "num": isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
              "list": isinstance(v, list) and len(v) > 0,
              "list0": isinstance(v, list),
              "bool": isinstance(v, bool),
              "obj": isinstance(v, dict)}[kind]
        if not ok:
            raise self.bad(key, want, v)
        return v

    def no_extras(self, allowed: tuple[str, ...]) -> None:
        extra = sorted(set(self.doc) - set(allowed))
        if extra:
            raise UsageError(f"profile {self.where}: unknown field '{self.prefix}{extra[0]}' "
                             f"(allowed: {', '.join(allowed)})")


TOP_FIELDS = ("name", "description", "source", "match", "busbw_min_GBps", "latency_8B_max_us", "init_max_ms",
              "wrong_max", "stress_failures_max", "counters_max_increase", "origin", "copy_min_GBps", "derivation",
              "replay")


def parse(doc, where: str) -> Profile:
    """A Profile from a decoded JSON document; UsageError names the first bad field."""
    if not isinstance(doc, dict):
        raise UsageError(f"profile {where}: must be a JSON object, got {type(doc).__name__}")
    f = _Fields(doc, where)
    f.no_extras(TOP_FIELDS)
    m = _Fields(f.get("match", "obj", "an object {backends, gpu_model, gpu_count}"), where, "match.")
    m.no_extras(("backends", "gpu_model", "gpu_count", "nvls"))
    backends = m.get("backends", "list", f"a non-empty list of {', '.join(BACKENDS)}")
    for i, b in enumerate(backends):
        if b not in BACKENDS:
            raise m.bad(f"backends[{i}]", f"one of {', '.join(BACKENDS)}", b)
    match = Match(tuple(backends), m.get("gpu_model", "str", "a GPU model name", optional=True),
                  m.get("gpu_count", "posint", "a positive integer", optional=True),
                  m.get("nvls", "bool", "true or false", optional=True))
    floors = []
    for i, row in enumerate(f.get("busbw_min_GBps", "list0", "a list of {collective, bytes, min}")):
        r = _Fields(row if isinstance(row, dict) else {}, where, f"busbw_min_GBps[{i}].")
        if not isinstance(row, dict):
            raise f.bad(f"busbw_min_GBps[{i}]", "an object {collective, bytes, min}", row)
        r.no_extras(("collective", "bytes", "min"))
        coll = r.get("collective", "str", f"one of {', '.join(COLLECTIVES)}")
        if coll not in COLLECTIVES:
            raise r.bad("collective", f"one of {', '.join(COLLECTIVES)}", coll)
        floors.append(BusbwFloor(coll, r.get("bytes", "posint", "a positive integer (bytes)"),
                                 float(r.get("min", "num", "a number of GB/s above 0"))))
    counters = f.get("counters_max_increase", "obj", "an object {counter: allowed increase}")
    c = _Fields(counters, where, "counters_max_increase.")
    c.no_extras(COUNTERS)
    for k in counters:
        c.get(k, "int", "an integer >= 0")
    origin = f.get("origin", "str", f"one of {', '.join(ORIGINS)}", optional=True, default="built-in")
    if origin not in ORIGINS:
        raise f.bad("origin", f"one of {', '.join(ORIGINS)}", origin)
    copies = f.get("copy_min_GBps", "obj", "an object {device, h2d, d2h} of GB/s", optional=True, default={})
    cp = _Fields(copies, where, "copy_min_GBps.")
    cp.no_extras(COPIES)
    for k in copies:
        cp.get(k, "num", "a number of GB/s above 0")
    replay = f.get("replay", "obj", "an object {workload, sequence_max_us}", optional=True, default={})
    rp = _Fields(replay, where, "replay.")
    rp.no_extras(("workload", "sequence_max_us"))
    if replay:
        rp.get("workload", "str", "the workload's digest")
        rp.get("sequence_max_us", "num", "a number of microseconds above 0")
    return Profile(
        name=f.get("name", "str", "a non-empty string"), match=match, busbw=tuple(floors),
        latency_8B_max_us=float(f.get("latency_8B_max_us", "num", "a number of microseconds above 0")),
        init_max_ms=float(f.get("init_max_ms", "num", "a number of milliseconds above 0")),
        wrong_max=f.get("wrong_max", "int", "an integer >= 0"),
        stress_failures_max=f.get("stress_failures_max", "int", "an integer >= 0"),
        counters_max_increase=dict(counters),
        description=f.get("description", "str", "a string", optional=True, default=""),
        source=f.get("source", "str", "a string", optional=True, default=""), path=where, origin=origin,
        copy_min_GBps={k: float(v) for k, v in copies.items()},
        derivation=f.get("derivation", "obj", "an object", optional=True, default={}), replay=dict(replay))


def to_doc(p: Profile) -> dict:
    """The profile as its JSON file holds it (parse(to_doc(p)) gives p back)."""
    match = {"backends": list(p.match.backends)}
    for k in ("gpu_model", "gpu_count", "nvls"):
        if getattr(p.match, k) is not None:
            match[k] = getattr(p.match, k)
    doc = {"name": p.name, "description": p.description or "-", "source": p.source or "-", "origin": p.origin,
           "match": match, "busbw_min_GBps": [{"collective": f.collective, "bytes": f.bytes, "min": f.min_GBps}
                                              for f in p.busbw],
           "latency_8B_max_us": p.latency_8B_max_us, "init_max_ms": p.init_max_ms, "wrong_max": p.wrong_max,
           "stress_failures_max": p.stress_failures_max, "counters_max_increase": dict(p.counters_max_increase)}
    if p.copy_min_GBps:
        doc["copy_min_GBps"] = dict(p.copy_min_GBps)
    if p.derivation:
        doc["derivation"] = p.derivation
    if p.replay:
        doc["replay"] = dict(p.replay)
    return doc


MAX_FILE = 16 << 20  # a profile is a few kilobytes


def load_file(path: str | Path) -> Profile:
    """A profile file; one of the user's that says no origin is theirs ('file'), not a built-in one."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"profile {p}: a folder, where a JSON file is expected")
    try:
        if p.stat().st_size > MAX_FILE:
            raise UsageError(f"profile {p}: {p.stat().st_size} bytes, more than a profile holds ({MAX_FILE >> 20} MiB)")
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"profile {p}: cannot read it ({e.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"profile {p}: not text (a profile is a JSON file)") from None
    try:
        doc = json.loads(text, parse_constant=lambda c: _no_constant(p, c))
    except json.JSONDecodeError as e:
        raise UsageError(f"profile {p}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise UsageError(f"profile {p}: nested deeper than any profile is") from None
    profile = parse(doc, str(p))
    if p.resolve().parent != BUILTIN_DIR and isinstance(doc, dict) and "origin" not in doc:
        profile = replace(profile, origin="file")
    return profile


def _no_constant(p: Path, constant: str):
    raise UsageError(f"profile {p}: holds {constant}, which no threshold is")


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.json"))


def load(spec: str) -> Profile:
    """--profile NAME (built in) or PATH (a JSON file)."""
    if spec.endswith(".json") or "/" in spec or Path(spec).is_file():
        return load_file(spec)
    if spec not in builtin_names():
        raise UsageError(f"unknown profile '{spec}' (built in: {', '.join(builtin_names())}; "
                         "or pass a path to a JSON profile file)")
    return load_file(BUILTIN_DIR / f"{spec}.json")
