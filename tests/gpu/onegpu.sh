#!/usr/bin/env bash
# What this session's new code can show on a machine with ONE GPU, in one device call (about 5 min):
#   pipeline  issue 17 on one rank: serial vs background destroys (rate), stock, kill -9 + --resume
#   bench     every collective (gather, scatter, alltoallv, hypercube included) on one rank with -I 1 -J,
#             nccl-tests' analyzer on the file in every mode (when .nccltests/tools/ was carried);
#             -R 2 (symmetric windows) and -C 1 on all_reduce
# A one-rank communicator has no peer: bandwidths here mean nothing, correctness and host paths do.
# usage: tests/gpu/onegpu.sh    (carry .whl, and .nccltests for the analyzer)
set -u
source tests/gpu/env.sh
SERIAL_ROUNDS=${SERIAL_ROUNDS:-60} PIPE_ROUNDS=${PIPE_ROUNDS:-300} STOCK_ROUNDS=${STOCK_ROUNDS:-100} \
  KILL_ROUNDS=${KILL_ROUNDS:-150} bash tests/gpu/pipeline.sh rate stock kill 2>&1 | tee "$OUT/pipeline.txt" | tail -n 25

B="python3 -m nccl_bench bench --backend nccl --no-algo-confirm"
echo "== bench: every collective, -I 1 -J"
timeout 300 $B --collective all -b 8 -e 64M -f 4 -n 20 -w 5 -I 1 -J "$OUT/periter.json" > "$OUT/bench_all.log" 2>&1
echo "exit $?"; grep -E "^# (all_reduce|gather|scatter|alltoallv|hypercube)  |Out of bounds|skipped" "$OUT/bench_all.log"
AN=.nccltests/tools/analyze_perf_json.py
if [ -f "$AN" ]; then
  for mode in "" --all --straggler --spikes --nodes --in-place; do
    python3 "$AN" "$OUT/periter.json" $mode > "$OUT/analyzer${mode:-_default}.txt" 2>&1
    echo "analyzer ${mode:-default}: exit $? $(grep -m1 -o 'Consistency.*' "$OUT/analyzer${mode:-_default}.txt")"
  done
fi
echo "== bench: all_reduce -R 2 (symmetric windows) and -C 1"
timeout 120 $B -b 8 -e 1M -f 8 -R 2 -J "$OUT/r2.json" > "$OUT/bench_r2.log" 2>&1; echo "-R 2 exit $?"
timeout 120 $B -b 8 -e 1M -f 8 -C 1 -J "$OUT/c1.json" > "$OUT/bench_c1.log" 2>&1; echo "-C 1 exit $?"
grep -h -A3 "^# all_reduce" "$OUT/bench_r2.log" "$OUT/bench_c1.log" | head -n 12
echo "== GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
tail -n 14 "$OUT/pipeline.txt"
