#!/usr/bin/env bash
# locate on every GPU of the machine: the pair matrix and the bisection, healthy and with a
# slow rank injected (its sends delayed: NCCL_BENCH_LOCATE_INJECT, a test-only variable), then the
# per-GPU check of what it names. JSON and heatmaps under $OUT; a table last.
#   healthy: exit 0, no suspect; injected: exit 1, the last rank named (with 2 GPUs: the pair, in the
#   direction the slow rank sends, since one pair cannot tell a rank from its link).
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
last=$((NG - 1))
L="timeout 240 python3 -m nccl_bench locate --backend nccl --size ${LOCATE_SIZE:-256M}"
run() {  # NAME CMD...: exit code and wall time into $OUT/NAME.{rc,wall}, output into $OUT/NAME.log
  local name=$1; shift
  local t0=$(date +%s.%N)
  "$@" > "$OUT/$name.log" 2>&1; echo $? > "$OUT/$name.rc"
  python3 -c "print(round($(date +%s.%N) - $t0, 1))" > "$OUT/$name.wall"
  echo "== $name: exit $(cat $OUT/$name.rc), $(cat $OUT/$name.wall) s"; grep -E "^SUSPECT|^locate:|^bisection" "$OUT/$name.log"
}
run healthy $L --json $OUT/locate_healthy.json
if [ "$NG" -gt 1 ]; then  # one GPU: nothing to slow down against (locate checks the GPU on its own)
  NCCL_BENCH_LOCATE_INJECT="slow-send:$last:0.002" run slow $L --json $OUT/locate_slow.json
fi
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from nccl_bench import records
out = Path(sys.argv[1])
print(f"\n{'run':8} {'exit':>4} {'wall s':>6} {'pairs':>5} {'pair busbw GB/s min-max':>24} {'world GB/s':>10} {'steps':>5}  suspects")
for name in ("healthy", "slow"):
    p = out / f"locate_{name}.json"
    if not (out / f"{name}.rc").exists():
        continue
    if not p.exists():
        print(f"{name:8} {(out / f'{name}.rc').read_text().strip():>4} no JSON"); continue
    d = records.load(str(p)); rows, m = d.rows, d.meta
    if m.get("single_rank"):  # one GPU: its own numbers instead of pairs
        for r, c in enumerate(m["checks"]):
            g = c.get("gpu") or {}
            print(f"{name:8} {(out / f'{name}.rc').read_text().strip():>4} {(out / f'{name}.wall').read_text().strip():>6} "
                  f"    - one rank: device copy {g.get('copy_GBps') or 0:.0f} GB/s, host to device "
                  f"{g.get('h2d_GBps') or 0:.1f}, device to host {g.get('d2h_GBps') or 0:.1f}; counters "
                  f"{c.get('counters') or 'unchanged'}")
        continue
    bws = [r["busbw"] for r in rows]
    sus = "; ".join(f"{s['who']}: {s['evidence'][0][:80]}" for s in m["suspects"]) or "none"
    print(f"{name:8} {(out / f'{name}.rc').read_text().strip():>4} {(out / f'{name}.wall').read_text().strip():>6} "
          f"{len(rows):5d} {min(bws):11.1f}-{max(bws):<11.1f} {m['bisection'][0]['groups'][0]['busbw']:10.1f} "
          f"{len(m['bisection']):5d}  {sus}")
PY
