#!/usr/bin/env bash
# Every launch path of the nccl backend on any number of GPUs, both loops (compiled, and Python
# via NCCL_BENCH_LAUNCH=python): every collective checked (-c 1), then all_reduce with -I 1 -m 4,
# -z 1 and -G 5; stress and smoke, whose collectives are the backend's own methods. Pass: exit 0 and
# 0 wrong values everywhere, no GPU process left. Logs in $OUT/launchpaths.log; a table last.
set -u
source tests/gpu/env.sh
L=$OUT/launchpaths.log
B="timeout 240 python3 -m nccl_bench bench --backend nccl --no-algo-confirm -n 10 -w 2 -c 1"
run() {  # NAME CMD...: one line of the table
  local name=$1; shift
  "$@" >> $L 2>&1; local rc=$?
  printf "%-34s exit %s\n" "$name" "$rc" | tee -a $OUT/launchpaths_table.txt
}
: > $OUT/launchpaths_table.txt
for loop in compiled python; do
  export NCCL_BENCH_LAUNCH=$([ $loop = python ] && echo python || echo auto)
  run "$loop every collective" $B --collective all -b 8 -e 1M -f 32 -J $OUT/paths_${loop}_all.json
  run "$loop all_reduce -I 1 -m 4" $B -b 8 -e 64K -f 64 -I 1 -m 4 -J $OUT/paths_${loop}_periter.json
  run "$loop all_reduce -z 1" $B -b 8 -e 64K -f 64 -z 1 -J $OUT/paths_${loop}_blocking.json
  run "$loop all_reduce -G 5" $B -b 8 -e 64K -f 64 -G 5 -J $OUT/paths_${loop}_graph.json
done
unset NCCL_BENCH_LAUNCH
run "stress scoped 20 rounds" timeout 240 python3 -m stress --backend nccl --init scoped --rounds 20 \
  --skew-max 0 --journal $OUT/paths_stress.jsonl
run "smoke all modes" timeout 240 python3 -m nccl_bench smoke --backend nccl --init all
python3 - "$OUT" <<'PY'
import glob, sys
sys.path.insert(0, ".")
from nccl_bench.report import readers
wrong = {}
for f in sorted(glob.glob(sys.argv[1] + "/paths_compiled_*.json") + glob.glob(sys.argv[1] + "/paths_python_*.json")):
    rows = readers.load(f).rows
    wrong[f.split("/")[-1]] = sum((r[p]["nwrong"] or 0) for r in rows for p in ("out_of_place", "in_place"))
    print(f"{f.split('/')[-1]:34s} rows {len(rows):3d}  wrong {wrong[f.split('/')[-1]]}  launch "
          f"{readers.load(f).meta.get('bench', {}).get('launch')}")
print("wrong values over all runs:", sum(wrong.values()))
PY
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
