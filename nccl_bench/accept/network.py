"""Across nodes: the bus bandwidth between nodes, from a bench run across them (`bench` under torchrun or
srun, `--network FILE` to accept), judged against a floor derived from this node's NICs (accept.nics):

    expected = min(active ports, ranks per node) x the slowest active port's rate / 8 x NIC_EFFICIENCY
    floor    = expected x margin

Each GPU's channels leave the node through the NIC nearest it, so at most one NIC per rank counts. Over
NCCL's socket transport (NCCL_IB_DISABLE=1 in the run, or no active InfiniBand/RoCE port here) the value
is measured and said, not judged: sockets tell nothing of a cluster's InfiniBand.
"""
from __future__ import annotations

from pathlib import Path

from nccl_bench.accept import nics
from nccl_bench.accept.verdicts import Verdict
from nccl_bench.records.metrics import size_label
from nccl_bench.core import stats
from nccl_bench.core.errors import UsageError

NIC_EFFICIENCY = 0.92
NIC_SOURCE = ("NVIDIA (nccl-tests#290): NCCL reaches 46-48 GB/s busbw per NDR 400 Gb/s NIC, 0.92 of its rate; "
              "at most one NIC per rank")
MAX_FILE = 64 << 20  # a bench file of a few collectives and sizes is kilobytes


def load(path: str) -> tuple[list[dict], dict]:
    """(rows of every cycle, meta) of a bench file from elsewhere, its size bounded before it is parsed and
    every row checked (nccl_bench.records: a busbw of -5, NaN or a nesting that never ends is one line)."""
    from nccl_bench import records
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise UsageError(f"--network {path}: cannot read it ({e.strerror})") from None
    if size > MAX_FILE:
        raise UsageError(f"--network {path}: {size} bytes, more than a bench file holds ({MAX_FILE >> 20} MiB)")
    try:
        res = records.load(path)
    except UsageError as e:
        raise UsageError(f"--network {e}") from None
    if res.kind != "bench":
        raise UsageError(f"--network {path}: a {res.kind} result, where a bench result across the nodes is needed")
    return res.every_cycle(), res.meta


def measured(rows: list[dict], meta: dict, path: str) -> tuple[int, float, int, int]:
    """(bytes, busbw GB/s, nodes, ranks) of the file's largest all_reduce out of place (median over cycles)."""
    hosts = meta.get("hosts") if isinstance(meta.get("hosts"), list) else []
    if len(hosts) < 2:
        named = ", ".join(map(str, hosts[:4])) or "no hosts in its metadata"
        raise UsageError(f"--network {path}: ran on {len(hosts) or 'an unknown number of'} node(s) ({named}): "
                         "run bench across the nodes")
    ar = [r for r in rows if r.get("collective") == "all_reduce" and isinstance(r.get("size"), int)]
    if not ar:
        raise UsageError(f"--network {path}: no all_reduce rows (run bench --collective all_reduce across the nodes)")
    top = max(r["size"] for r in ar)
    bws = [float((r.get("out_of_place") or {}).get("bus_bw") or 0.0) for r in ar if r["size"] == top]
    ranks = int((meta.get("bench") or {}).get("nranks") or max(int(r.get("nranks") or 0) for r in ar) or len(hosts))
    return top, stats.percentile(bws, 0.5), len(hosts), ranks


def floor(ports: list[nics.Port], per_node: int, env: dict, margin: float) -> tuple[float | None, str]:
    """(floor GB/s, how it was derived) or (None, why the value is not judged)."""
    if str(env.get("NCCL_IB_DISABLE", "0")) not in ("", "0"):
        return None, "NCCL_IB_DISABLE set in the run: NCCL's socket transport, measured, not judged"
    active = [p for p in ports if p.active and p.rate_Gbps]
    if not active:
        seen = ", ".join(p.name() for p in ports[:4]) or "none under /sys/class/infiniband"
        return None, f"no active InfiniBand/RoCE port here ({seen}): NCCL's socket transport, measured, not judged"
    n = min(len(active), max(per_node, 1))
    slowest = min(p.rate_Gbps for p in active)
    expected = n * slowest / 8 * NIC_EFFICIENCY
    return round(expected * margin, 1), (f"{n} of {len(active)} active port(s) at {slowest:g} Gb/s x "
                                         f"{NIC_EFFICIENCY} x margin {margin:g} ({NIC_SOURCE})")


def verdict(path: str, margin: float) -> tuple[Verdict, dict]:
    """The across-node check of `path` against this node's NICs, and what the result file keeps of it."""
    rows, meta = load(path)
    size, busbw, nodes, ranks = measured(rows, meta, path)
    ports = nics.read()
    env = meta.get("env") if isinstance(meta.get("env"), dict) else {}
    low, how = floor(ports, max(ranks // max(nodes, 1), 1), env, margin)
    check = f"network busbw all_reduce {size_label(size)} ({nodes} nodes)"
    keep = {"file": str(path), "bytes": size, "busbw_GBps": busbw, "nodes": nodes, "ranks": ranks,
            "floor_GBps": low, "derivation": how, "ports": [p.as_dict() for p in ports]}
    if low is None:
        return Verdict(check, "skip", round(busbw, 3), "-", how), keep
    return Verdict(check, "pass" if busbw >= low else "fail", round(busbw, 3), f">= {low:g} GB/s", how), keep

