#!/usr/bin/env bash
# One device call on a machine with more GPUs (any count of GPUs):
#   0. topology (nvidia-smi topo -m) and doctor;
#   1. bench: every collective, Ring and Tree, 8 B..8 GiB, one cycle (busbw per size; ratio to x2 later);
#   2. init: regular, stock, scoped with --ranks-per-root 1, 2 and 4 (10 rounds + 2 warm-up each);
#   3. stress: scoped (ROUNDS_SCOPED, default 100; 0 failures expected), stock 20 rounds (stale, diagnosed).
# Sized to fit one call of < 9 minutes on 4 GPUs; JSON and logs in $OUT, a short table last.
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
L=$OUT/scale.log
{
echo "== GPUs: $NG"; nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader; nvidia-smi topo -m
echo "== 0. doctor"; timeout 60 python3 -m nccl_bench doctor --backend nccl --json $OUT/doctor.json; echo "exit $?"
echo "== 1. bench every collective ring,tree 8..8G"
timeout 220 python3 -m nccl_bench bench --backend nccl --collective all --algo ring,tree -b 8 -e 8G -f 2 \
  -n 20 -w 5 -c 1 -J $OUT/bench_x${NG}.json; echo "exit $?"
echo "== 2. init rpr 1,2,4"
for k in 1 2 4; do
  timeout 70 python3 -m nccl_bench init --backend nccl --init regular,stock,scoped --ranks-per-root $k \
    --rounds 10 --warmup 2 --timeout 3 --json $OUT/init_x${NG}_rpr$k.json; echo "exit $?"
done
echo "== 3. stress scoped ${ROUNDS_SCOPED:-100}, stock 20"
timeout 150 python3 -m stress --backend nccl --rounds ${ROUNDS_SCOPED:-100} --init scoped --skew-max 0 \
  --journal $OUT/stress_scoped.jsonl; echo "exit $?"
timeout 90 python3 -m stress --backend nccl --rounds 20 --init stock --timeout 3 --journal $OUT/stress_stock.jsonl
echo "exit $?"
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} > $L 2>&1
grep -E "^== |^exit|Error|error:" $L | head -40
python3 - "$OUT" "$NG" <<'PY'
import json, statistics, sys
from pathlib import Path
from nccl_bench import records
out, ng = Path(sys.argv[1]), sys.argv[2]
p = out / f"bench_x{ng}.json"
if p.exists():
    rows = records.load(str(p)).rows
    print(f"\nbench x{ng}, busbw GB/s out of place (in place)")
    for r in rows:
        if r["size"] in (8 << 20, 64 << 20, 1 << 30, 8 << 30) or r["size"] == 8:
            v = "out_of_place"
            print(f"  {r['collective']:15s} {r['algo']:5s} {r['size']:11d}  {r[v]['bus_bw']:8.2f} ({r['in_place']['bus_bw']:8.2f})"
                  f"  {r[v]['time']:10.2f} us  confirmed={r.get('algo_confirmed')}  wrong={r[v]['nwrong']}")
for k in (1, 2, 4):
    p = out / f"init_x{ng}_rpr{k}.json"
    if p.exists():
        rows = [r for r in records.load(str(p)).rows if not r["warmup"]]
        print(f"\ninit x{ng} ranks-per-root {k}: medians ms (exchange, create, first collective, destroy), failed")
        for mode in ("regular", "stock", "scoped"):
            ok = [r for r in rows if r["mode"] == mode and r["outcome"] == "ok"]
            med = lambda f: statistics.median(r[f] for r in ok) * 1e3 if ok else float("nan")  # noqa: E731
            print(f"  {mode:8s} {med('exchange_s'):7.2f} {med('create_s'):8.2f} {med('first_collective_s'):8.2f} "
                  f"{med('destroy_s'):8.2f}   {sum(r['mode'] == mode and r['outcome'] != 'ok' for r in rows)}"
                  f"/{sum(r['mode'] == mode for r in rows)}")
for mode in ("scoped", "stock"):
    p = out / f"stress_{mode}.jsonl"
    if p.exists():
        rs = [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
        rs = [r for r in rs if r.get("type") == "round"]
        bad = [r for r in rs if r["verdict"] != "ok"]
        print(f"\nstress {mode}: {len(rs)} rounds, {len(bad)} failures; first: {(bad[0]['diagnosis'] if bad else '-')[:150]}")
PY
