"""From a pair matrix and a bisection to named suspects: a rank, a pair or a node, each with its evidence.

Pairs are classed by what joins them (same node: NVLink, PCIe or local; across nodes: network).
An ordered pair is slow when its bandwidth is under `fraction` x the median of its class. A rank
is a suspect when every pair it sends on (or receives on) is slow; a node when all its ranks are
suspects; a node's network link when every pair it sends (or receives) across the network is slow
and its ranks are not; what slow pairs remain, between ranks that are not suspects, are pair suspects.
"""
from __future__ import annotations

import os
import statistics

from nccl_bench.core import launch

FAKE_NODES_ENV = "NCCL_BENCH_FAKE_NODES"  # tests only: "a,a,b,b" per rank, or "4x2" (4 nodes of 2)
INJECT_ENV = "NCCL_BENCH_LOCATE_INJECT"  # tests only: "slow-send:R:S;slow-pair:A:B:S;corrupt:R"


def node_names(n: int, real: list[str], env=os.environ) -> list[str]:
    fake = env.get(FAKE_NODES_ENV, "").strip()
    if not fake:
        return real
    if "x" in fake and "," not in fake:
        nodes, per = (int(v) for v in fake.split("x"))
        return [f"node-{chr(ord('a') + min(r // per, nodes - 1))}" for r in range(n)]
    names = [s.strip() for s in fake.split(",")]
    return [names[r % len(names)] for r in range(n)]


def injections(env=os.environ) -> dict:
    """{'slow_send': {rank: s}, 'slow_pair': {(a, b): s}, 'corrupt': {rank, ...}} from INJECT_ENV."""
    out = {"slow_send": {}, "slow_pair": {}, "corrupt": set()}
    for item in filter(None, (s.strip() for s in env.get(INJECT_ENV, "").split(";"))):
        kind, *args = item.split(":")
        if kind == "slow-send":
            out["slow_send"][int(args[0])] = float(args[1])
        elif kind == "slow-pair":
            out["slow_pair"][tuple(sorted((int(args[0]), int(args[1]))))] = float(args[2])
        elif kind == "corrupt":
            out["corrupt"].add(int(args[0]))
    return out


def pair_class(a: int, b: int, nodes: list[str], local: list[int], links: dict) -> str:
    if nodes[a] != nodes[b]:
        return "network"
    link = links.get(tuple(sorted((local[a], local[b]))))
    return f"same node {link}" if link else "same node"


def where(r: int, nodes: list[str], local: list[int]) -> str:
    return f"rank {r} ({nodes[r]} GPU {local[r]})"


def pair_rows(seconds: dict, lat: dict, nbytes: int, nodes: list[str], local: list[int], links: dict,
              fraction: float) -> list[dict]:
    rows = []
    for (s, d), t in sorted(seconds.items()):
        rows.append({"src": s, "dst": d, "src_node": nodes[s], "dst_node": nodes[d],
                     "class": pair_class(s, d, nodes, local, links), "bytes": nbytes, "time_us": t * 1e6,
                     "busbw": nbytes / t / 1e9 if t > 0 else 0.0,
                     "lat_us": lat[(s, d)] * 1e6 if (s, d) in lat else None})
    medians = {}
    for c in {r["class"] for r in rows}:
        medians[c] = statistics.median(r["busbw"] for r in rows if r["class"] == c)
    for r in rows:
        r["class_median"] = medians[r["class"]]
        r["ratio"] = r["busbw"] / medians[r["class"]] if medians[r["class"]] else 1.0
        r["slow"] = r["ratio"] < fraction
    return rows


def _span(rows: list[dict]) -> str:
    lo, hi = min(r["ratio"] for r in rows), max(r["ratio"] for r in rows)
    return f"{lo:.2f}-{hi:.2f} x" if f"{lo:.2f}" != f"{hi:.2f}" else f"{lo:.2f} x"


def from_pairs(rows: list[dict], n: int, nodes: list[str], local: list[int]) -> list[dict]:
    out, named = [], set()
    for r in range(n):
        sends = [x for x in rows if x["src"] == r]
        recvs = [x for x in rows if x["dst"] == r]
        slow_s = len(sends) > 1 and all(x["slow"] for x in sends)
        slow_r = len(recvs) > 1 and all(x["slow"] for x in recvs)
        if slow_s or slow_r:
            how = "every pair through it" if slow_s and slow_r else "every pair it sends on" if slow_s else \
                "every pair it receives on"
            bad = (sends if slow_s else []) + (recvs if slow_r else [])
            out.append({"what": "rank", "ranks": [r], "who": where(r, nodes, local),
                        "evidence": [f"{how} {_span(bad)} its class median"]})
            named.add(r)
    by_node: dict[str, list[int]] = {}
    for r, node in enumerate(nodes):
        by_node.setdefault(node, []).append(r)
    covered: set[tuple[int, int]] = set()  # slow pairs a node's link explains
    if len(by_node) > 1:
        for node, ranks in by_node.items():
            if len(ranks) > 1 and all(r in named for r in ranks):
                keep = [s for s in out if s["ranks"][0] not in ranks]
                ev = [e for s in out if s["ranks"][0] in ranks for e in s["evidence"]]
                out = keep + [{"what": "node", "ranks": ranks, "who": node, "evidence": [f"all its ranks: {ev[0]}"]}]
            elif not set(ranks) & named:
                out += node_link(node, ranks, rows, covered)
        out = one_path(out)
    pairs: dict[tuple, list[dict]] = {}
    for x in rows:
        if x["slow"] and x["src"] not in named and x["dst"] not in named and (x["src"], x["dst"]) not in covered:
            pairs.setdefault(tuple(sorted((x["src"], x["dst"]))), []).append(x)
    for (a, b), bad in sorted(pairs.items()):
        dirs = "both directions" if len(bad) == 2 else f"{bad[0]['src']} -> {bad[0]['dst']}"
        out.append({"what": "pair", "ranks": [a, b], "who": f"{where(a, nodes, local)} <-> {where(b, nodes, local)}",
                    "evidence": [f"{dirs} {_span(bad)} the {bad[0]['class']} median; "
                                 "their other pairs are not slow"]})
    return out


def node_link(node: str, ranks: list[int], rows: list[dict], covered: set) -> list[dict]:
    """A node's network link: every pair its ranks send (or receive) across the network is slow, while
    its ranks' pairs inside the node are not (else they are rank suspects) and some network pair
    elsewhere is not: the GPUs are fine, the way out of the node is not. Its pairs go into `covered`."""
    net = [x for x in rows if x["class"] == "network"]
    evidence, slow = [], set()
    for way, side in (("sends", "src"), ("receives", "dst")):
        mine = [x for x in net if x[side] in ranks]
        if mine and all(x["slow"] for x in mine) and not all(x["slow"] for x in net):
            slow.update((x["src"], x["dst"]) for x in mine)
            evidence.append(f"every pair it {way} across the network {_span(mine)} the network median")
    if not evidence:
        return []
    covered.update(slow)
    if any(x["src"] in ranks and x["dst"] in ranks for x in rows):
        evidence.append("its pairs inside the node are not slow")
    return [{"what": "link", "ranks": ranks, "who": f"{node}'s network link", "evidence": evidence, "_pairs": slow,
             "_node": node}]


def one_path(found: list[dict]) -> list[dict]:
    """Two nodes whose link suspects cover the same pairs (one sends slowly, the other receives slowly):
    from two nodes alone, which end is at fault cannot be told. One suspect, the path, says so."""
    links = [s for s in found if s["what"] == "link"]
    if len(links) == 2 and links[0]["_pairs"] == links[1]["_pairs"]:
        a, b = links
        src = a if any(e.startswith("every pair it sends") for e in a["evidence"]) else b
        dst = b if src is a else a
        found = [s for s in found if s["what"] != "link"] + [{
            "what": "link", "ranks": sorted(a["ranks"] + b["ranks"]),
            "who": f"the network path {src['_node']} -> {dst['_node']}",
            "evidence": src["evidence"][:1] + ["from two nodes, the sender's link and the receiver's cannot be told "
                                                "apart: a third node tells which"]}]
    for s in found:
        s.pop("_pairs", None)
        s.pop("_node", None)
    return found


def add_bisection(found: list[dict], steps: list[dict], group: list[int] | None, why: str,
                  nodes: list[str], local: list[int]) -> list[dict]:
    """Fold the bisection's finding into the suspects: confirm one, or name what it led to."""
    if group is None:
        return found
    last = steps[-1]["groups"]
    text = f"bisection ({why}): followed to ranks {group}"
    if len(last) == 2 and last[0]["busbw"] and last[1]["busbw"] and any(g["members"] == group for g in last):
        slow, fast = sorted(last, key=lambda g: g["busbw"])
        text += f" (its half {slow['busbw']:.3g} GB/s, the other {fast['busbw']:.3g})"
    hit = [s for s in found if set(s["ranks"]) & set(group)]
    for s in hit:
        s["evidence"].append(text)
    if not hit:
        wrong = any(g["wrong"] for st in steps for g in st["groups"])
        who = where(group[0], nodes, local) if len(group) == 1 else "ranks " + ", ".join(map(str, group))
        found.append({"what": "rank" if len(group) == 1 else "group", "ranks": group, "who": who,
                      "evidence": [text + ("; its all_reduce results were wrong" if wrong else "")]})
    return found


def gpu_check(local_rank: int) -> dict:
    """This rank's GPU on its own: device copy bandwidth (GB/s, read + write) and its host copies over
    PCIe (nccl_bench.measure.copies), for a suspect or for a node of one GPU."""
    import torch
    if not torch.cuda.is_available():
        return {"copy_GBps": None, "why": "no GPU"}
    from nccl_bench.measure.copies import measure
    got = measure(launch.local_device(local_rank, torch.cuda.device_count()), 256 << 20)
    return {"copy_GBps": got["device_GBps"], "h2d_GBps": got["h2d_GBps"], "d2h_GBps": got["d2h_GBps"]}


def counter_changes(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after
            if isinstance(after[k], (int, float)) and after[k] - before.get(k, 0) > 0}
