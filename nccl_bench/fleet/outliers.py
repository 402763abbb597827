"""A fleet, node by node: metrics read from many nodes' accept, bench and locate files, each node set
against the fleet by robust statistics and against its own profile's verdicts.

Per metric, over the nodes that have it: the median and the MAD (median absolute deviation, scaled
by 1.4826 to estimate a standard deviation). A node stands out when its value lies more than K (3.5,
Iglewicz and Hoaglin's cut) scaled MADs from the median on the bad side (low bandwidth, high latency)
and at least MIN_DEVIATION (5 %) away, so that a fleet of identical nodes does not flag a node for a
difference nobody would act on. That takes 3 nodes or more; with fewer, nodes are judged only
against their profiles. Apart from any statistics: wrong values, failed stress rounds, locate's
suspects and a FAIL against the profile flag a node on their own.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench.core.errors import UsageError

K = 3.5
MIN_DEVIATION = 0.05
MAD_SCALE = 1.4826
MiB = 1 << 20


@dataclass
class Node:
    name: str
    files: list[str] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)  # metric -> one value per file
    evidence: list[str] = field(default_factory=list)  # reasons of their own (wrong values, profile FAILs)

    def value(self, metric: str) -> float | None:
        vs = sorted(self.values.get(metric) or [])
        return vs[len(vs) // 2] if vs else None


def higher_is_better(metric: str) -> bool:
    return not metric.startswith(("latency", "init", "replay"))


def _size(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def _host(meta: dict, given: str) -> str:
    hosts = meta.get("hosts") or []
    if not hosts:
        raise UsageError(f"{given}: no host named in its metadata (meta.hosts): cannot place it in the fleet")
    return "+".join(sorted(set(hosts)))


def read(paths: list[str]) -> dict[str, Node]:
    """Every file's metrics, by node. Directories are read for *.json; an unknown kind is bad input."""
    files = []
    for p in paths:
        q = Path(p)
        if q.is_dir():
            files += sorted(str(f) for f in q.glob("*.json"))
        elif q.is_file():
            files.append(p)
        else:
            raise UsageError(f"{p}: no such file or folder")
    if not files:
        raise UsageError("no result files given (accept, bench or locate JSON, or folders of them)")
    nodes: dict[str, Node] = {}
    for f in files:
        try:
            doc = json.loads(Path(f).read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise UsageError(f"{f}: not readable JSON ({type(e).__name__})") from None
        kind = doc.get("kind") if isinstance(doc, dict) else None
        take = {"accept": _accept, "locate": _locate, "bench": _bench, "replay": _replay}.get(kind) or (
            _bench if isinstance(doc, dict) and "results" in doc else None)
        if take is None:
            raise UsageError(f"{f}: kind '{kind}' is not one the fleet reads (accept, bench, locate, replay)")
        meta = doc.get("meta") or {}
        if take is _bench and "meta" not in doc:  # written by nccl-tests itself: hosts from its config
            from nccl_bench.measure import benchfile
            meta = benchfile.rows_and_meta(doc)[1]
        node = nodes.setdefault(_host(meta, f), Node(_host(meta, f)))
        node.files.append(f)
        for metric, v in take(doc, node, f).items():
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                node.values.setdefault(metric, []).append(float(v))
    return nodes


def _replay(doc: dict, node: Node, given: str) -> dict:
    """A replay's sequence time per pass, and each call of 1 MiB or more (lower is better)."""
    seq = ((doc.get("meta") or {}).get("sequence") or {}).get("here_median_us")
    out = {"replay sequence us": seq}
    for r in doc.get("rows") or []:
        if r.get("bytes", 0) >= MiB and r.get("time_us"):
            ranks = ",".join(map(str, r["group_ranks"]))
            out[f"replay {r['collective']} {_size(r['bytes'])} {r['dtype']} [{ranks}] us"] = r["time_us"]
    wrong = sum(r.get("nwrong") or 0 for r in doc.get("rows") or [])
    if wrong:
        node.evidence.append(f"{wrong} wrong values in the replay ({Path(given).name})")
    return out


def _accept(doc: dict, node: Node, given: str) -> dict:
    m = (doc.get("meta") or {}).get("measurements") or {}
    out = {f"busbw {k.split(':')[0]} {_size(int(k.split(':')[1]))}": v for k, v in (m.get("busbw") or {}).items()
           if int(k.split(":")[1]) >= MiB}
    out.update({"latency 8 B us": m.get("latency_us_8B"), "init ms": m.get("init_ms_p50"),
                "replay sequence us": m.get("replay_sequence_us"), "network busbw GB/s": m.get("network_busbw")})
    for key, v in (m.get("copy_GBps") or {}).items():
        if key.endswith("_GBps"):
            out[f"copy {key[:-5]} GB/s"] = v
    if m.get("wrong"):
        node.evidence.append(f"{m['wrong']} wrong values in the bench step ({Path(given).name})")
    if m.get("stress_failures"):
        node.evidence.append(f"{m['stress_failures']} failed stress rounds ({Path(given).name})")
    profile = (doc.get("meta") or {}).get("profile", "?")
    for r in doc.get("rows") or []:
        if r.get("status") == "fail" and r.get("check") not in ("wrong results", "stress failures"):
            node.evidence.append(f"FAIL {r['check']}: {r.get('measured')} against {r.get('required')} "
                                 f"(profile {profile})")
    return out


def _bench(doc: dict, node: Node, given: str) -> dict:
    """A bench file (ours or nccl-tests' -J): each collective's largest size, and the 8-byte all_reduce."""
    from nccl_bench.measure import benchfile
    rows = benchfile.rows_and_meta(doc)[0]
    top, out, wrong = {}, {}, 0
    for r in rows:
        coll, size = r.get("collective", "?"), int(r.get("size") or 0)
        wrong += sum(int((r.get(p) or {}).get("nwrong") or 0) for p in ("out_of_place", "in_place"))
        if size >= top.get(coll, (0, None))[0]:
            top[coll] = (size, (r.get("out_of_place") or {}).get("bus_bw"))
        if size == 8 and coll == "all_reduce":
            out["latency 8 B us"] = (r.get("out_of_place") or {}).get("time")
    for coll, (size, bw) in top.items():
        if size >= MiB:
            out[f"busbw {coll} {_size(size)}"] = bw
    if wrong:
        node.evidence.append(f"{wrong} wrong values in a bench run ({Path(given).name})")
    return out


def _locate(doc: dict, node: Node, given: str) -> dict:
    meta = doc.get("meta") or {}
    for s in meta.get("suspects") or []:
        node.evidence.append(f"locate SUSPECT {s.get('who')}: " + "; ".join(s.get("evidence") or []))
    out = {}
    for c in meta.get("checks") or []:
        g = (c or {}).get("gpu") or {}
        for key, name in (("copy_GBps", "copy device GB/s"), ("h2d_GBps", "copy h2d GB/s"),
                          ("d2h_GBps", "copy d2h GB/s")):
            if g.get(key):
                out[name] = min(out.get(name, g[key]), g[key])
    return out


@dataclass
class Finding:
    node: str
    metric: str
    value: float
    median: float
    z: float | None  # robust z (None where the MAD is 0)
    words: str


def outliers(nodes: dict[str, Node], k: float = K, min_dev: float = MIN_DEVIATION) -> tuple[list[Finding], dict]:
    """Nodes far from the fleet on the bad side, per metric; and {metric: (median, scaled MAD, n)}."""
    stats, found = {}, []
    metrics = sorted({m for n in nodes.values() for m in n.values})
    for metric in metrics:
        vals = {name: v for name, n in nodes.items() if (v := n.value(metric)) is not None}
        if len(vals) < 3:
            continue
        xs = sorted(vals.values())
        med = _median(xs)
        mad = MAD_SCALE * _median(sorted(abs(x - med) for x in xs))
        stats[metric] = (med, mad, len(xs))
        good = higher_is_better(metric)
        for name, v in vals.items():
            dev = (v - med) / med if med else 0.0
            bad_side = dev < -min_dev if good else dev > min_dev
            z = (v - med) / mad if mad > 0 else None
            if bad_side and (z is None or abs(z) > k):
                found.append(Finding(name, metric, v, med, z,
                                     f"{metric} {v:.4g}, fleet median {med:.4g} ({abs(dev) * 100:.0f} % "
                                     f"{'below' if good else 'above'}"
                                     + (f", {abs(z):.1f} scaled MADs" if z is not None else ", the fleet agrees "
                                        "to the last digit") + f", {len(xs)} nodes)"))
    return found, stats


def _median(xs: list[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def verdict(nodes: dict[str, Node], k: float = K, min_dev: float = MIN_DEVIATION) -> tuple[dict, dict]:
    """{node: [reasons]} for every flagged node (outliers first, then evidence of its own); fleet stats."""
    found, stats = outliers(nodes, k, min_dev)
    bad: dict[str, list[str]] = {}
    for f in found:
        bad.setdefault(f.node, []).append(f.words)
    for name, n in nodes.items():
        if n.evidence:
            bad.setdefault(name, []).extend(n.evidence)
    return dict(sorted(bad.items())), stats
