"""A golden node's run as a profile: `accept --record-baseline FILE` on a node known to be good; the
other nodes are judged against it with `--profile FILE`.

Each floor is what the golden node measured, less a tolerance that grows with how much that point
varied over its -N cycles there: tolerance = BASE_TOL + spread, where spread = (max - min) / median
of the cycles (a point that moved 3 % between cycles gets 8 %). Only bandwidth-bound sizes get a
floor: smaller ones move from run to run by more than their cycles show. Limits (8-byte latency, init) get
the latency tolerance on top of their own spread, since small-message times move more between runs.
"""
from __future__ import annotations

import time

from nccl_bench.accept.derive import ZERO_COUNTERS
from nccl_bench.records.profiles import BusbwFloor, Match, Profile

BASE_TOL = 0.05  # the floor sits 5 % under the golden median, plus the point's own spread
MAX_TOL = 0.5  # however unstable the golden point, its floor keeps half of it (the JSON keeps the spread)
LATENCY_TOL = 0.5  # 8-byte latency and init may be 50 % above the golden median, plus spread
# Floors only where a collective runs at >= this share of its own peak busbw: below it, launch-bound sizes
# differ between runs far more than one run's spread says (docs/accept.md)
BANDWIDTH_BOUND = 0.8


def record(m: dict, spreads: dict, backend: str, gpu_names: list[str], host: str, nvls: bool | None) -> Profile:
    """The profile of golden measurements `m` (accept's shape) with `spreads` {(collective, bytes): %}."""
    floors, tol_used = [], {}
    busbw = m.get("busbw") or {}
    peak = {}
    for (coll, _), v in busbw.items():
        peak[coll] = max(peak.get(coll, 0.0), v or 0.0)
    for (coll, size), v in sorted(busbw.items()):
        if not v or size < (1 << 20) or v < BANDWIDTH_BOUND * peak[coll]:
            continue  # latency-bound sizes move between runs more than within one: no floor there
        tol = min(MAX_TOL, BASE_TOL + (spreads.get((coll, size)) or 0.0) / 100)
        tol_used[f"{coll}:{size}"] = round(tol, 4)
        floors.append(BusbwFloor(coll, size, round(v * (1 - tol), 2)))
    copies = {k[:-len("_GBps")]: round(v * (1 - BASE_TOL), 1) for k, v in (m.get("copy_GBps") or {}).items()
              if v and k.endswith("_GBps")}  # beside them, `<copy>_gpu`: which GPU was slowest
    lat = m.get("latency_us_8B")
    init = m.get("init_ms_p50")
    model = gpu_names[0] if gpu_names else None
    return Profile(
        name=f"baseline-{host}", match=Match((backend,), model, len(gpu_names) or None, nvls), busbw=tuple(floors),
        latency_8B_max_us=round(lat * (1 + LATENCY_TOL), 2) if lat else 1e6,
        init_max_ms=round(init * (1 + LATENCY_TOL), 1) if init else 1e6,
        wrong_max=0, stress_failures_max=0,
        counters_max_increase=dict(ZERO_COUNTERS) if backend != "gloo" else {},
        description=f"golden node {host}: {f'{len(gpu_names)} x {model}' if model else 'the CPU model'}, "
                    f"backend {backend}, recorded {time.strftime('%Y-%m-%d %H:%M')}",
        source=f"baseline: accept --record-baseline on {host}; floor = golden median x (1 - {BASE_TOL:g} - the "
               f"point's spread over its cycles); latency and init limits x (1 + {LATENCY_TOL:g})",
        origin="baseline", copy_min_GBps=copies, replay=_replay(m),
        derivation={"golden": {"host": host, "busbw": {f"{c}:{b}": v for (c, b), v in (m.get("busbw") or {}).items()},
                               "latency_us_8B": lat, "init_ms_p50": init, "copy_GBps": m.get("copy_GBps") or {}},
                    "spread_pct": {f"{c}:{b}": s for (c, b), s in spreads.items()}, "tolerance": tol_used,
                    "base_tolerance": BASE_TOL, "latency_tolerance": LATENCY_TOL})


def _replay(m: dict) -> dict:
    """accept --workload on the golden node: its replay's sequence time, plus 5 % and its own spread."""
    seq = m.get("replay_sequence_us")
    if not seq:
        return {}
    tol = min(MAX_TOL, BASE_TOL + (m.get("replay_spread") or 0.0))
    return {"workload": m["replay_workload"], "sequence_max_us": round(seq * (1 + tol), 1)}
