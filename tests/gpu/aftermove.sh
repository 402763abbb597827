#!/usr/bin/env bash
# Issue 49: the house moved (a room per feature); on the GPU machine the commands run as before, beside the
# last committed numbers:
#   bench   GPU 0 alone: all_reduce, all_gather, broadcast 8 B..64 MiB (as tests/gpu/onegpu.sh, -I 1), against
#           results/h200x1/onegpu/periter.json (same sizes)
#   stress  GPU 0 alone: --rounds 200 (nccl, scoped), rounds/s and failures
#   accept  GPU 0 alone: `accept` with the derived profile, against results/h100x1/accept/accept.json
#   replay  two GPUs where there are two: results/h100x2/replay/fr (a 2-rank FSDP job's Flight Recorder dumps),
#           -n 20 -w 3, against results/h100x2/replay/replay_fr_nccl_1.json
# usage: bash tests/gpu/aftermove.sh   (carry .whl)
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
one() { CUDA_VISIBLE_DEVICES=0 timeout 300 "$@"; }
echo "== bench (GPU 0)"
one python3 -m nccl_bench bench --backend nccl --collective all_reduce,all_gather,broadcast -b 8 -e 64M -f 4 -n 20 \
  -w 5 -I 1 --no-algo-confirm -J $OUT/am_bench.json > $OUT/am_bench.log 2>&1; echo "exit $?"
echo "== stress --rounds 200 (GPU 0)"
one python3 -m stress --backend nccl --rounds 200 --journal $OUT/am_stress.jsonl --summary-json $OUT/am_stress.json \
  > $OUT/am_stress.log 2>&1; echo "exit $?"; tail -n 6 $OUT/am_stress.log
echo "== accept (GPU 0)"
one python3 -m nccl_bench accept --json $OUT/am_accept.json > $OUT/am_accept.log 2>&1; echo "exit $?"
tail -n 12 $OUT/am_accept.log
if [ "$NG" -ge 2 ]; then
  echo "== replay (2 GPUs)"
  CUDA_VISIBLE_DEVICES=0,1 timeout 300 python3 -m nccl_bench replay results/h100x2/replay/fr -n 20 -w 3 \
    --json $OUT/am_replay.json > $OUT/am_replay.log 2>&1; echo "exit $?"; tail -n 8 $OUT/am_replay.log
fi
echo "== GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
python3 - "$OUT" <<'PY' | tee $OUT/aftermove_table.txt
import json, sys
from pathlib import Path
from nccl_bench.measure import benchfile
out = Path(sys.argv[1])
def load(p):
    try:
        return json.loads(Path(p).read_text())
    except (OSError, ValueError):
        return None
print("# after the move, beside the last committed numbers")
now, then = load(out / "am_bench.json"), load("results/h200x1/onegpu/periter.json")
if now and then:
    old = {(r["collective"], r["size"]): r for r in benchfile.rows(then)}
    for r in benchfile.rows(now):
        o = old.get((r["collective"], r["size"]))
        if o and r["size"] in (8, 65536, 64 << 20):
            print(f"bench {r['collective']:10} {r['size']:>9} B  time {r['out_of_place']['time']:9.2f} us  committed "
                  f"(h200x1) {o['out_of_place']['time']:9.2f} us  wrong {r['out_of_place']['nwrong']}")
s = load(out / "am_stress.json")
if s:
    rate = [round(m.get("rounds_per_s") or 0, 1) for m in s.get("rows", []) if isinstance(m, dict)]
    print(f"stress 200 rounds: failures {s.get('failures')}, rounds/s {rate}; committed (h200x1 pipelined): 9.4")
a, ref = load(out / "am_accept.json"), load("results/h100x1/accept/accept.json")
if a:
    got = {r["check"]: r.get("measured") for r in a["rows"]}
    was = {r["check"]: r.get("measured") for r in (ref or {}).get("rows", [])}
    print(f"accept: {a['meta']['verdict']} against {a['meta']['profile']}")
    for k, v in got.items():
        print(f"  {k:34} {v!s:>14}  committed (h100x1) {was.get(k)!s}")
r, ref = load(out / "am_replay.json"), load("results/h100x2/replay/replay_fr_nccl_1.json")
if r:
    was = {(x["collective"], x["bytes"]): x for x in (ref or {}).get("rows", [])}
    for x in r["rows"]:
        w = was.get((x["collective"], x["bytes"])) or {}
        print(f"replay {x['collective']:16} {x['bytes']:>10} B  here {x['time_us']:8.1f} us  committed (h100x2) "
              f"{w.get('time_us') or 0:8.1f} us  wrong {x['nwrong']}")
PY
