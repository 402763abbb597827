"""Judge a tests/gpu/bench.sh run: ours against nccl-tests of the same call and the anchors.

usage: python3 tests/gpu/bench_judge.py OUT_DIR
Every point is the median of its cycles, ours (nccl_bench.records) and nccl-tests' (its -N rows).
Targets: busbw >= 99 % for every size >= 64 MiB; 8 B eager time <= 1.1 x; 8 B and
512 KiB graph time <= reference + 0.5 us. The verdict is against nccl-tests of the same call in the
anchors' layout (one process for all GPUs, `1proc`) when that ran, else against the anchors; the
same call's one-process-per-GPU nccl-tests (`mpi`, our layout) is judged beside it. Prints key
sizes and every miss.
"""
from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

from nccl_bench.records import bench_layouts
from nccl_bench import records

ANCHORS = Path("nccl_bench/report/anchordata")
BIG = 64 << 20
KEY = {8, 512 << 10, 64 << 20, 1 << 30, 8 << 30}
PLACES = (("out_of_place", "oop"), ("in_place", "ip"))


def ours(out: Path, name: str) -> list[dict]:
    """Our rows of `name`; where the script alternated the tools (out/repK/name), each point's median
    over the repetitions."""
    reps = sorted(out.glob(f"rep*/{name}"))
    if not reps:
        p = out / name
        return records.load(str(p)).rows if p.exists() else []
    rows = [{**r, "cycle": k} for k, p in enumerate(reps) for r in records.load(str(p)).rows]
    return bench_layouts.median_over_cycles(rows)


def nccl_tests(log: Path, layout: str) -> dict[tuple, dict]:
    """(collective, series, size) -> {oop_us, oop_busbw, ip_us, ip_busbw}, medians of the cycles,
    of the sections `## COLLECTIVE SERIES LAYOUT` in that layout (logs without one are 1proc)."""
    runs: dict[tuple, dict[int, list]] = {}
    section = None
    for line in log.read_text().splitlines() if log.exists() else []:
        if line.startswith("## "):
            words = line[3:].split() + ["1proc"]
            section = tuple(words[:2]) if words[2] == layout else None
            continue
        tok = line.split()
        if len(tok) == 12 and tok[0].isdigit():  # an empty redop column (hypercube_perf prints "")
            tok.insert(3, "none")
        if section and len(tok) >= 13 and tok[0].isdigit():
            try:
                vals = [float(tok[i]) for i in (5, 7, 9, 11)]
            except ValueError:
                continue
            runs.setdefault(section, {}).setdefault(int(tok[0]), []).append(vals)
    out = {}
    for (coll, series), sizes in runs.items():
        for size, cycles in sizes.items():
            med = [statistics.median(c[i] for c in cycles) for i in range(4)]
            out[(coll, series.lower(), size)] = dict(zip(("oop_us", "oop_busbw", "ip_us", "ip_busbw"), med))
    return out


def anchors() -> dict[tuple, dict]:
    """The committed nccl-tests anchors in the same shape."""
    out = {}
    for r in csv.DictReader(open(ANCHORS / "h200x2_allreduce.csv")):
        for algo in ("ring", "tree"):
            out[("all_reduce", algo, int(r["bytes"]))] = {
                f"{k}_{m}": float(r[f"{algo}_{k}_{'us' if m == 'us' else 'busbw_GBps'}"])
                for k in ("oop", "ip") for m in ("us", "busbw")}
    for r in csv.DictReader(open(ANCHORS / "h200x2_collectives.csv")):
        graph = r["collective"] == "all_reduce_graph"
        coll, series = ("all_reduce", "graph") if graph else (r["collective"], "default")
        out[(coll, series, int(r["bytes"]))] = {
            f"{k}_{m}": float(r[f"{k}_{'us' if m == 'us' else 'busbw_GBps'}"])
            for k in ("oop", "ip") for m in ("us", "busbw")}
    return out


def main(out: Path) -> int:
    refs = {"1proc": nccl_tests(out / "nccltests.log", "1proc"),
            "mpi": nccl_tests(out / "nccltests.log", "mpi"), "anchor": anchors()}
    rows, misses = [], dict.fromkeys(refs, 0)

    def judge(what, key, field, value, rule):
        """rule(value, reference) -> bool; returns nothing, records one table row."""
        ref = {k: r.get(key, {}).get(field) for k, r in refs.items()}
        ok = {k: None if v is None else rule(value, v) for k, v in ref.items()}
        for k, v in ok.items():
            misses[k] += v is False
        verdict = ok["1proc"] if ok["1proc"] is not None else ok["anchor"]
        rows.append((what, key[2], value, ref, ok, verdict))

    bw = lambda v, ref: v >= 0.99 * ref  # noqa: E731
    eager = lambda v, ref: v <= 1.1 * ref  # noqa: E731
    graph = lambda v, ref: v <= ref + 0.5  # noqa: E731
    for name in ("bench_allreduce_ring_tree.json", "bench_collectives.json"):
        for r in ours(out, name):
            series = r["algo"] if r["collective"] == "all_reduce" else "default"
            key = (r["collective"], series, r["size"])
            for place, k in PLACES:
                if r["size"] >= BIG:
                    judge(f"{r['collective']} {series} {k} busbw", key, f"{k}_busbw", r[place]["bus_bw"], bw)
                elif r["size"] == 8 and r["collective"] == "all_reduce":
                    judge(f"all_reduce {series} {k} us", key, f"{k}_us", r[place]["time"], eager)
    for r in ours(out, "bench_allreduce_graph.json"):
        key = ("all_reduce", "graph", r["size"])
        for place, k in PLACES:
            if r["size"] in (8, 512 << 10):
                judge(f"all_reduce -G {k} us", key, f"{k}_us", r[place]["time"], graph)
            elif r["size"] >= BIG:
                judge(f"all_reduce -G {k} busbw", key, f"{k}_busbw", r[place]["bus_bw"], bw)

    ran = [k for k in ("1proc", "mpi") if refs[k]]
    print(f"judged {len(rows)} values; nccl-tests in this call: {', '.join(ran) or 'no (anchors only)'}")
    print(f"{'what':34s} {'size':>11s} {'ours':>9s} " + " ".join(f"{k:>9s} {'ratio':>6s}" for k in refs)
          + "  verdict")
    fmt = lambda v: f"{v:9.3f}" if v is not None else f"{'-':>9s}"  # noqa: E731
    for what, size, v, ref, ok, verdict in rows:
        if size in KEY or False in ok.values():
            ratio = lambda r: f"{v / r:6.3f}" if r else f"{'-':>6s}"  # noqa: E731
            word = {True: "ok", False: "MISS", None: "n/a"}[verdict]
            others = [k for k in ("mpi", "anchor") if ok[k] is False]
            print(f"{what:34s} {size:11d} {fmt(v)} " + " ".join(f"{fmt(r)} {ratio(r)}" for r in ref.values())
                  + f"  {word}" + (f"  ({', '.join(others)}: miss)" if others else ""))

    modes: dict[int, dict] = {}
    for r in ours(out, "bench_init_modes.json"):
        modes.setdefault(r["size"], {})[r["init"]] = r["out_of_place"]["bus_bw"]
    print("\ninit modes, all_reduce busbw oop (GB/s): size regular stock scoped spread%")
    for size, m in sorted(modes.items()):
        vals = [m.get(k, float("nan")) for k in ("regular", "stock", "scoped")]
        spread = 100 * (max(vals) - min(vals)) / max(vals) if all(v == v for v in vals) else float("nan")
        print(f"  {size:11d} " + " ".join(f"{v:8.2f}" for v in vals) + f"  {spread:5.2f}")
    wrong = sum((r[p]["nwrong"] or 0) for f in ("bench_allreduce_ring_tree.json", "bench_collectives.json",
                "bench_allreduce_graph.json", "bench_init_modes.json") for r in ours(out, f) for p, _ in PLACES)
    print(f"\nwrong values over all runs: {wrong}")
    judged = sum(r[-1] is not None for r in rows)
    failed = sum(r[-1] is False for r in rows)
    spread_of_busbw(rows)
    print(f"targets missed: {failed} of {judged} (vs nccl-tests of this call, one process: {misses['1proc']}; "
          f"one process per GPU: {misses['mpi']}; vs the committed anchors: {misses['anchor']})")
    return 0


def spread_of_busbw(rows: list) -> None:
    """The 99 % bar against the noise it sits in: ours over each nccl-tests, and nccl-tests in one
    layout over the other (the same binary and settings, so any miss there is noise)."""
    pairs = {"ours / nccl-tests 1proc": lambda v, ref: (v, ref["1proc"]),
             "ours / nccl-tests mpi": lambda v, ref: (v, ref["mpi"]),
             "nccl-tests mpi / 1proc": lambda v, ref: (ref["mpi"], ref["1proc"]),
             "nccl-tests 1proc / mpi": lambda v, ref: (ref["1proc"], ref["mpi"])}
    busbw = [(v, ref) for what, _, v, ref, _, _ in rows if what.endswith("busbw")]
    print("\nbusbw >= 64 MiB, ratio of medians:  points  median   min  below 0.99")
    for name, pick in pairs.items():
        ratios = [a / b for a, b in (pick(v, ref) for v, ref in busbw) if a and b]
        if ratios:
            print(f"  {name:32s} {len(ratios):6d}  {statistics.median(ratios):6.3f} {min(ratios):6.3f}"
                  f"  {sum(r < 0.99 for r in ratios):6d}")


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
