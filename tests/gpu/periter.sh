#!/usr/bin/env bash
# Per-iteration timing (-I 1) beside nccl-tests, on any number of GPUs, one process per GPU.
#   1. ours: all_reduce 8 B..1 GiB -f 4, -n 50 -w 5 -I 1 -J, then -K 5 and -m 4 variants on 64 MiB
#   2. nccl-tests (when tests/gpu/nccltests.sh could build it with MPI): the same sweep with -I 1 -J,
#      one process per GPU (mpiexec -n N ... -g 1); a build without -I (before 2.19.6) says so
#   3. nccl-tests' own tools/analyze_perf_json.py (from .nccltests/, or $NCCL_TESTS_ANALYZER) on both
#      files, every mode; its Consistency line and any traceback are shown
#   4. table: size, p50/p99/cv % of ours and of nccl-tests, p99 ratio (ours / theirs)
# Logs and JSON under $OUT (periter.log, ours_I1.json, theirs_I1.json, analyzer_*.txt).
set -u
source tests/gpu/env.sh
L=$OUT/periter.log
NG=$(nvidia-smi -L | wc -l)
S="-b 8 -e 1G -f 4 -n 50 -w 5 -c 1"
NTM=/tmp/nccltests/build_mpi
{
echo "== 1. ours: all_reduce -I 1 on $NG GPU(s)"
timeout 300 python3 -m nccl_bench bench --backend nccl $S -I 1 --no-algo-confirm -J $OUT/ours_I1.json; echo "exit $?"
timeout 120 python3 -m nccl_bench bench --backend nccl -b 64M -e 64M -n 50 -w 5 -I 1 -K 5 -m 4 -M 1 -S 1 \
  --no-algo-confirm -J $OUT/ours_I1_K5_m4.json; echo "exit $?"
echo "== 2. nccl-tests -I 1"
bash tests/gpu/nccltests.sh
if [ -x $NTM/all_reduce_perf ]; then
  source /tmp/nccltests/env
  timeout 300 mpiexec -n $NG $NTM/all_reduce_perf -g 1 $S -I 1 -J $OUT/theirs_I1.json; echo "exit $?"
  [ -f $OUT/theirs_I1.json ] || echo "nccl-tests wrote no -J file: a build before 2.19.6 has no -I/-J"
else
  echo "nccl-tests (MPI build) not built: only ours"
fi
} > $L 2>&1
A=${NCCL_TESTS_ANALYZER:-.nccltests/tools/analyze_perf_json.py}
for f in ours_I1 ours_I1_K5_m4 theirs_I1; do
  [ -f $OUT/$f.json ] || continue
  if [ -f "$A" ]; then
    for m in "" --all --straggler --spikes --nodes --in-place; do
      python3 "$A" $OUT/$f.json $m > "$OUT/analyzer_${f}${m//-/_}.txt" 2>&1
      echo "analyzer $f ${m:-(default)}: exit $? $(grep -m1 '^Consistency' "$OUT/analyzer_${f}${m//-/_}.txt")" \
        "$(grep -q Traceback "$OUT/analyzer_${f}${m//-/_}.txt" && echo TRACEBACK)"
    done
  else
    echo "no analyzer at $A (carry .nccltests/ or set NCCL_TESTS_ANALYZER)"
  fi
done
grep -E "^== |^exit|GPU memory usage|error|failed|not built|no -I" $L | head -20
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from nccl_bench import records
out = Path(sys.argv[1])
def per_iter(name):
    p = out / name
    if not p.exists():
        return {}
    return {r["size"]: r.get("out_of_place_per_iter") or {} for r in records.load(str(p)).every_cycle()}
ours, theirs = per_iter("ours_I1.json"), per_iter("theirs_I1.json")
print(f"\nall_reduce out-of-place per-iteration times (us), one process per GPU; nccl-tests: "
      f"{'yes' if theirs else 'not run'}")
print(f"{'size':>11} {'ours p50':>9} {'p99':>9} {'cv%':>6} | {'theirs p50':>10} {'p99':>9} {'cv%':>6} | p99 ours/theirs")
for size in sorted(ours):
    o, t = ours[size], theirs.get(size) or {}
    f = lambda d, k: f"{d[k]:.1f}" if k in d else "-"
    ratio = f"{o['p99_us'] / t['p99_us']:.2f}" if t.get("p99_us") else "-"
    print(f"{size:>11} {f(o, 'p50_us'):>9} {f(o, 'p99_us'):>9} {f(o, 'cv_pct'):>6} | {f(t, 'p50_us'):>10} "
          f"{f(t, 'p99_us'):>9} {f(t, 'cv_pct'):>6} | {ratio}")
PY
