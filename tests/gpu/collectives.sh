#!/usr/bin/env bash
# gather, scatter, alltoallv and hypercube (and --split) beside nccl-tests, on any number of GPUs.
# nccl-tests is built here from carried source (.nccltests/, see nccltests.sh) and run in the same call with
# the same settings (-n 20 -w 5 -c 1), ours and theirs alternated REPS (default 3) times, one process for all GPUs (1proc) and one per GPU (mpi, our layout).
#   1. ours: the four collectives 8 B..8 GiB (-r 0) -> $OUT/repK/bench_collectives.json
#   2. nccl-tests gather_perf scatter_perf alltoallv_perf hypercube_perf, same sizes -> $OUT/nccltests.log
#   3. with 4 GPUs or more: --split 'AND 0x1' (two groups) against nccl-tests' NCCL_TESTS_SPLIT_MASK=0x1
#      (mpi layout), all_reduce and alltoallv 64 MiB..1 GiB -> $OUT/bench_split.json
# Judged by bench_judge.py (busbw >= 0.99 x nccl-tests from 64 MiB, median of the cycles; wrong values)
# and, for the split, group 0's busbw against nccl-tests' (which times over all groups' ranks).
# Hypercube needs a power-of-two number of GPUs: with another count ours leaves it out (nccl-tests skips it).
# `collectives.sh focus`: 64 MiB..1 GiB only.
set -u
R="-b 8 -e 8G"; [ "${1:-}" = focus ] && R="-b 64M -e 1G"
source tests/gpu/env.sh
L=$OUT/bench.log
N="-n 20 -w 5 -c 1"
NT=/tmp/nccltests/build
NTM=/tmp/nccltests/build_mpi
NG=$(nvidia-smi -L | wc -l)
COLLS="gather scatter alltoallv hypercube"
OURS=gather,scatter,alltoallv; (( NG & (NG - 1) )) || OURS+=,hypercube  # hypercube: 2^k ranks only
nt() {  # nt SECTION TIMEOUT BINARY ARGS...: one nccl-tests run in each layout that was built
  local section=$1 limit=$2 bin=$3; shift 3
  echo "## $section 1proc"; timeout $limit $NT/$bin -g $NG "$@"
  [ -x $NTM/$bin ] || return 0
  echo "## $section mpi"; timeout $limit mpiexec -n $NG $NTM/$bin -g 1 "$@"
}
bash tests/gpu/nccltests.sh
# Ours, then nccl-tests, REPS (default 3) times, one cycle each (the judge: each point's median over them)
for rep in $(seq ${REPS:-3}); do
D=$OUT/rep$rep; mkdir -p $D
{
echo "== 1. gather scatter alltoallv hypercube $R on $NG GPU(s)"
timeout 400 python3 -m nccl_bench bench --backend nccl $N --collective $OURS $R -f 2 \
  --no-algo-confirm -J $D/bench_collectives.json; echo "exit $?"
if [ "$NG" -ge 4 ]; then
  echo "== 3. --split 'AND 0x1': all_reduce, alltoallv 64M..1G"
  timeout 200 python3 -m nccl_bench bench --backend nccl $N --collective all_reduce,alltoallv -b 64M -e 1G -f 2 \
    --split "AND 0x1" --no-algo-confirm -J $D/bench_split.json; echo "exit $?"
fi
} >> $L 2>&1
if [ -x $NT/gather_perf ]; then
  source /tmp/nccltests/env
  {
  for c in $COLLS; do nt "$c default" 300 ${c}_perf $R -f 2 $N; done
  if [ "$NG" -ge 4 ] && [ -x $NTM/all_reduce_perf ]; then
    for c in all_reduce alltoallv; do
      echo "## $c split mpi"
      NCCL_TESTS_SPLIT_MASK=0x1 timeout 200 mpiexec -n $NG $NTM/${c}_perf -g 1 \
        -b 64M -e 1G -f 2 $N
    done
  fi
  } >> $OUT/nccltests.log 2>&1
fi
done
grep -E "^== |^exit|^# skipped|FAILED|error" $L | head -20
python3 tests/gpu/bench_judge.py "$OUT"
ls $OUT/rep*/bench_split.json >/dev/null 2>&1 && python3 - "$OUT" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "tests/gpu")
from bench_judge import nccl_tests, ours
out = Path(sys.argv[1])
ref = nccl_tests(out / "nccltests.log", "mpi")
print("\n--split 'AND 0x1' (2 groups), busbw oop/ip GB/s: ours group 0 | nccl-tests mpi | ratio")
for r in ours(out, "bench_split.json"):
    t = ref.get((r["collective"], "split", r["size"]))
    if r["group"] == 0 and t:
        o, i = r["out_of_place"]["bus_bw"], r["in_place"]["bus_bw"]
        print(f"  {r['collective']:10s} {r['size']:11d} {o:8.2f} {i:8.2f} | {t['oop_busbw']:8.2f} {t['ip_busbw']:8.2f}"
              f" | {o / t['oop_busbw']:5.3f} {i / t['ip_busbw']:5.3f}  wrong {r['out_of_place']['nwrong']}")
PY
exit 0
