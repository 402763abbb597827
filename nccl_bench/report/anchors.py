"""The reference lines a bench figure draws: the link's peak and nccl-tests' anchors for the
machine (anchordata/<machine>_*.csv beside this module; their source: docs/validation.md#anchors)."""
from __future__ import annotations

import csv
from pathlib import Path

LINK_GBPS = {"H100": 26.56, "H200": 26.56, "GH200": 26.56}
ANCHORS = Path(__file__).resolve().parent / "anchordata"
ANCHOR_STYLE = {"nccl-tests": (0, (1, 1.2)), "nccl-tests ring": (0, (1, 1.2)), "nccl-tests tree": (0, (4, 1.5, 1, 1.5)),
                "nccl-tests graph": (0, (5, 2))}


def link_peak(meta: dict) -> tuple[float, str] | None:
    """(GB/s, label) of the slowest GPU pair's NVLinks, per direction; None when not known."""
    if meta.get("backend") not in ("nccl", "torch"):
        return None
    models = {(d.get("name") or "").replace("NVIDIA", "").split()[0] for d in meta.get("gpus") or [] if d.get("name")}
    rates = {LINK_GBPS.get(m) for m in models}
    links = [lk.get("link") for lk in meta.get("links") or []]
    if len(rates) != 1 or None in rates or not links or not all(str(lk).startswith("NV") for lk in links):
        return None
    k = min(int(str(lk)[2:]) for lk in links)
    rate = rates.pop()
    return k * rate, f"link peak NV{k} x {rate:g} GB/s = {k * rate:.0f} GB/s per direction"


def anchors(machine: str) -> dict[tuple[str, str], dict[int, tuple[float, float]]]:
    """nccl-tests' reference sweeps for this machine: (collective, label) -> size -> (us, busbw GB/s)."""
    out: dict = {}
    ar, co = ANCHORS / f"{machine}_allreduce.csv", ANCHORS / f"{machine}_collectives.csv"
    if ar.is_file():
        for row in csv.DictReader(ar.read_text().splitlines()):
            for algo in ("ring", "tree"):
                out.setdefault(("all_reduce", f"nccl-tests {algo}"), {})[int(row["bytes"])] = (
                    float(row[f"{algo}_oop_us"]), float(row[f"{algo}_oop_busbw_GBps"]))
    if co.is_file():
        for row in csv.DictReader(co.read_text().splitlines()):
            name, size = row["collective"], int(row["bytes"])
            if size <= 0:
                continue
            if name == "all_reduce_graph":
                name, label = "all_reduce", "nccl-tests graph"
            else:
                label = "nccl-tests"
            out.setdefault((name, label), {})[size] = (float(row["oop_us"]), float(row["oop_busbw_GBps"]))
    return out


def anchor_lines(machine: str, collective: str, lo: float, hi: float, graph: bool):
    """[(label, sizes, (us, busbw) per size)] of the anchors within the drawn size range."""
    out = []
    for (name, label), by_size in sorted(anchors(machine).items()):
        if name != collective or ("graph" in label and not graph):
            continue
        xs = [s for s in sorted(by_size) if lo / 2 <= s <= hi * 2]
        if xs:
            out.append((label, xs, [by_size[s] for s in xs]))
    return out
