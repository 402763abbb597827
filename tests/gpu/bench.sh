#!/usr/bin/env bash
# Bench validation on 2 x H200 (issue 3): busbw and latency against nccl-tests' anchors.
# Runs (-n 20 -w 5 everywhere, nccl-tests' settings for the anchors; -c 1):
#   1. all_reduce 8 B..8 GiB, --algo ring,tree (one communicator each; NCCL_ALGO confirmed by a probe job)
#   2. all_gather reduce_scatter broadcast reduce alltoall sendrecv, 8 B..8 GiB, NCCL's default algorithm
#   3. all_reduce -G 20 (CUDA graph), 8 B..1 GiB
#   4. all_reduce 64 MiB..8 GiB per init mode: regular, stock, scoped (2 roots: --ranks-per-root 1)
# JSON under $OUT/bench_*.json (the full runs are the ones to commit under results/), logs in $OUT/bench.log,
# and last a table: size, ours, anchor, ratio, with a verdict per target.
set -u
source tests/gpu/env.sh
L=$OUT/bench.log
B="timeout 300 python3 -m nccl_bench bench --backend nccl -n 20 -w 5 -c 1"
{
nvidia-smi --query-gpu=index,name,memory.used --format=csv
echo "== 1. all_reduce ring,tree 8..8G"; $B --collective all_reduce --algo ring,tree -b 8 -e 8G -f 2 -J $OUT/bench_allreduce_ring_tree.json; echo "exit $?"
echo "== 2. other collectives 8..8G"; $B --collective all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv -b 8 -e 8G -f 2 -J $OUT/bench_collectives.json; echo "exit $?"
echo "== 3. all_reduce -G 20, 8..1G"; $B --collective all_reduce -G 20 -b 8 -e 1G -f 2 --no-algo-confirm -J $OUT/bench_allreduce_graph.json; echo "exit $?"
echo "== 4. all_reduce per init mode 64M..8G"; $B --collective all_reduce --init regular,stock,scoped --ranks-per-root 1 -b 64M -e 8G -f 2 --no-algo-confirm -J $OUT/bench_init_modes.json; echo "exit $?"
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} > $L 2>&1
grep -E "^== |^exit|FAILED|failed|error|not confirmed|skipped" $L | head -40
python3 - "$OUT" <<'PY'
import csv, json, sys
from pathlib import Path
out = Path(sys.argv[1]); anc = Path("tests/gpu/anchors")

def load(name):
    p = out / name
    return json.loads(p.read_text())["rows"] if p.exists() else []

ar = {int(r["bytes"]): r for r in csv.DictReader(open(anc / "h200x2_allreduce.csv"))}
co = {}
for r in csv.DictReader(open(anc / "h200x2_collectives.csv")):
    co.setdefault(r["collective"], {})[int(r["bytes"])] = r
rows, fails = [], []

def add(what, size, ours, anchor, better, limit):
    """better: 'high' (bandwidth) or 'low' (latency); limit: the target the issue sets."""
    ratio = ours / anchor if anchor else float("nan")
    ok = (ours >= limit) if better == "high" else (ours <= limit)
    rows.append((what, size, ours, anchor, ratio, limit, "ok" if ok else "MISS"))
    if not ok:
        fails.append(what)

big = lambda s: s >= 64 << 20
for r in load("bench_allreduce_ring_tree.json"):
    a = ar.get(r["size"]); algo = r["algo"]
    if not a or algo not in ("ring", "tree"):
        continue
    for place, key in (("out_of_place", "oop"), ("in_place", "ip")):
        if big(r["size"]):
            anc_bw = float(a[f"{algo}_{key}_busbw_GBps"])
            add(f"all_reduce {algo} {key} busbw", r["size"], r[place]["bus_bw"], anc_bw, "high", 0.99 * anc_bw)
        elif r["size"] == 8:
            anc_t = float(a[f"{algo}_{key}_us"])
            add(f"all_reduce {algo} {key} us", 8, r[place]["time"], anc_t, "low", 1.1 * anc_t)
    if r["algo_confirmed"] and r["algo_confirmed"].lower() != algo:
        fails.append(f"algo {algo} not confirmed ({r['algo_confirmed']})")
for r in load("bench_collectives.json"):
    a = co.get(r["collective"], {}).get(r["size"])
    if a and big(r["size"]):
        for place, key in (("out_of_place", "oop"), ("in_place", "ip")):
            anc_bw = float(a[f"{key}_busbw_GBps"])
            add(f"{r['collective']} {key} busbw", r["size"], r[place]["bus_bw"], anc_bw, "high", 0.99 * anc_bw)
for r in load("bench_allreduce_graph.json"):
    a = co.get("all_reduce_graph", {}).get(r["size"])
    if a and r["size"] in (8, 512 << 10):
        for place, key in (("out_of_place", "oop"), ("in_place", "ip")):
            anc_t = float(a[f"{key}_us"])
            add(f"all_reduce -G {key} us", r["size"], r[place]["time"], anc_t, "low", anc_t + 0.5)
    elif a and big(r["size"]):
        anc_bw = float(a["oop_busbw_GBps"])
        add("all_reduce -G oop busbw", r["size"], r["out_of_place"]["bus_bw"], anc_bw, "high", 0.99 * anc_bw)
modes = {}
for r in load("bench_init_modes.json"):
    modes.setdefault(r["size"], {})[r["init"]] = r["out_of_place"]["bus_bw"]
wrong = sum((r[p]["nwrong"] or 0) for f in ("bench_allreduce_ring_tree.json", "bench_collectives.json",
            "bench_allreduce_graph.json", "bench_init_modes.json") for r in load(f) for p in ("out_of_place", "in_place"))
print(f"judged {len(rows)} values (shown: key sizes and misses)")
print(f"{'what':30s} {'size':>11s} {'ours':>10s} {'anchor':>10s} {'ratio':>6s} {'target':>10s}")
key = {8, 512 << 10, 64 << 20, 1 << 30, 8 << 30}  # every size >= 64 MiB is judged; key sizes and misses shown
for what, size, ours, anchor, ratio, limit, v in rows:
    if size in key or v != "ok":
        print(f"{what:30s} {size:11d} {ours:10.3f} {anchor:10.3f} {ratio:6.3f} {limit:10.3f} {v}")
print("\ninit modes, all_reduce busbw oop (GB/s): size regular stock scoped spread%")
for size, m in sorted(modes.items()):
    vals = [m.get(k, float("nan")) for k in ("regular", "stock", "scoped")]
    spread = 100 * (max(vals) - min(vals)) / max(vals) if all(v == v for v in vals) else float("nan")
    print(f"  {size:11d} " + " ".join(f"{v:8.2f}" for v in vals) + f"  {spread:5.2f}")
print(f"\nwrong values over all runs: {wrong}")
print(f"targets missed: {len(fails)}" + (": " + "; ".join(fails[:12]) if fails else ""))
PY
