"""What a fleet compares of a result: per kind, the metrics of one node (lower is better for latency,
init and replay times; higher for bandwidths) and the evidence that flags a node on its own (wrong
values, failed stress rounds, a FAIL against its profile, locate's suspects)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.records.result import Result

MiB = 1 << 20
KINDS = ("accept", "bench", "locate", "replay")  # the kinds a fleet reads


@dataclass
class Metrics:
    values: dict[str, float | None] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    nulls: list[str] = field(default_factory=list)  # measured keys the file holds as null


def higher_is_better(metric: str) -> bool:
    return not metric.startswith(("latency", "init", "replay"))


def size_label(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def node_of(res: Result) -> str:
    """The node a result speaks for: its hosts, joined."""
    if not res.hosts:
        raise UsageError(f"{res.given}: no host named in its metadata (meta.hosts): cannot place it in the fleet")
    return "+".join(sorted(set(res.hosts)))


def of(res: Result) -> Metrics:
    """The node's metrics in this file; one that is there but no finite number is evidence of its own (a
    verdict never passes what it could not judge)."""
    take = {"accept": _accept, "bench": _bench, "locate": _locate, "replay": _replay}.get(res.kind)
    if take is None:
        raise UsageError(f"{res.given}: kind '{res.kind}' is not one the fleet reads ({', '.join(KINDS)})")
    out = Metrics()
    try:
        take(res, out)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
        raise UsageError(f"{res.given}: its {res.kind} metrics are not numbers where they should be "
                         f"({type(e).__name__}: {str(e)[:80]})") from None
    unjudged = [k for k, v in out.values.items() if v is not None and not _finite(v)]
    unjudged += [k for k in out.nulls]
    if unjudged:
        out.evidence.append(f"no finite value for {', '.join(sorted(unjudged)[:4])}"
                            f"{' ...' if len(unjudged) > 4 else ''} ({Path(res.given).name}): not judged, so flagged")
    out.values = {k: v for k, v in out.values.items() if v is not None and _finite(v)}
    if not out.values and not out.evidence and not _asked_for_none(res):
        out.evidence.append(f"no metric at all in {Path(res.given).name}: nothing to judge the node by")
    return out


def _asked_for_none(res: Result) -> bool:
    """An accept whose --steps left out every step that measures (`accept --steps doctor`): it has no metric
    because none was asked for, and its own verdict judges it."""
    steps = res.meta.get("steps") if res.kind == "accept" else None
    return isinstance(steps, list) and any(isinstance(s, dict) and s.get("status") == "not run" for s in steps)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _replay(res: Result, out: Metrics) -> None:
    """A replay's sequence time per pass, and each call of 1 MiB or more."""
    out.values["replay sequence us"] = res.block("sequence").get("here_median_us")
    for r in res.rows:
        if r.get("bytes", 0) >= MiB and r.get("time_us"):
            ranks = ",".join(map(str, r["group_ranks"]))
            out.values[f"replay {r['collective']} {size_label(r['bytes'])} {r['dtype']} [{ranks}] us"] = r["time_us"]
    wrong = sum(r.get("nwrong") or 0 for r in res.rows)
    if wrong:
        out.evidence.append(f"{wrong} wrong values in the replay ({Path(res.given).name})")


@functools.lru_cache(maxsize=4096)  # a fleet's files share their keys: each is parsed once
def _busbw_metric(key: str) -> str | None:
    """"all_reduce:17179869184" -> "busbw all_reduce 16 GiB"; None below 1 MiB (latency's sizes)."""
    coll, _, size = key.partition(":")
    return f"busbw {coll} {size_label(int(size))}" if int(size) >= MiB else None


def _accept(res: Result, out: Metrics) -> None:
    m = res.block("measurements")
    out.nulls += [k for k in ("latency_us_8B", "init_ms_p50") if k in m and m[k] is None]
    out.nulls += [f"busbw {k}" for k, v in (m.get("busbw") or {}).items() if v is None]
    for k, v in (m.get("busbw") or {}).items():
        if (metric := _busbw_metric(k)) is not None:
            out.values[metric] = v
    out.values.update({"latency 8 B us": m.get("latency_us_8B"), "init ms": m.get("init_ms_p50"),
                       "replay sequence us": m.get("replay_sequence_us"),
                       "network busbw GB/s": m.get("network_busbw")})
    for key, v in (m.get("copy_GBps") or {}).items():
        if key.endswith("_GBps"):
            out.values[f"copy {key[:-5]} GB/s"] = v
    name = Path(res.given).name
    if m.get("wrong"):
        out.evidence.append(f"{m['wrong']} wrong values in the bench step ({name})")
    if m.get("stress_failures"):
        out.evidence.append(f"{m['stress_failures']} failed stress rounds ({name})")
    profile = res.meta.get("profile", "?")
    for r in res.rows:
        if r.get("status") == "fail" and r.get("check") not in ("wrong results", "stress failures"):
            out.evidence.append(f"FAIL {r['check']}: {r.get('measured')} against {r.get('required')} "
                                f"(profile {profile})")


def _bench(res: Result, out: Metrics) -> None:
    """A bench file (ours or nccl-tests' -J): each collective's largest size, and the 8-byte all_reduce."""
    top, wrong = {}, 0
    for r in res.rows:
        coll, size = r.get("collective", "?"), int(r.get("size") or 0)
        wrong += sum(int((r.get(p) or {}).get("nwrong") or 0) for p in ("out_of_place", "in_place"))
        if size >= top.get(coll, (0, None))[0]:
            top[coll] = (size, (r.get("out_of_place") or {}).get("bus_bw"))
        if size == 8 and coll == "all_reduce":
            out.values["latency 8 B us"] = (r.get("out_of_place") or {}).get("time")
    for coll, (size, bw) in top.items():
        if size >= MiB:
            out.values[f"busbw {coll} {size_label(size)}"] = bw
    if wrong:
        out.evidence.append(f"{wrong} wrong values in a bench run ({Path(res.given).name})")


def _locate(res: Result, out: Metrics) -> None:
    for s in res.meta.get("suspects") or []:
        out.evidence.append(f"locate SUSPECT {s.get('who')}: " + "; ".join(s.get("evidence") or []))
    for c in res.meta.get("checks") or []:
        g = (c or {}).get("gpu") or {}
        for key, name in (("copy_GBps", "copy device GB/s"), ("h2d_GBps", "copy h2d GB/s"),
                          ("d2h_GBps", "copy d2h GB/s")):
            if g.get(key):
                out.values[name] = min(out.values.get(name, g[key]), g[key])
