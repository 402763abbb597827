#!/usr/bin/env bash
# bench beside nccl-tests: busbw and latency against nccl-tests, side by side.
# If .nccltests/ holds nccl-tests' source (not committed: carry it), it is built here and run in the
# same call with the same settings as ours (-n 20 -w 5 -c 1), in both process layouts, the tools
# alternated: ours then theirs, REPS (default 3) times, one cycle each:
#   1proc  one process driving every GPU (-g N), as the committed anchors (nccl_bench/report/anchordata) were run;
#   mpi    one process per GPU (mpiexec -n N ... -g 1, MPICH carried in .whl/mpi), as ours runs.
# NCCL's transport per layout (`via P2P/...` lines of NCCL_DEBUG=INFO) goes to $OUT/transports.txt.
# Ours (JSON under $OUT, the full runs are the ones to commit under results/):
#   1. all_reduce 8 B..8 GiB, --algo ring,tree (NCCL_ALGO confirmed by the probe job)
#   2. all_gather reduce_scatter broadcast reduce alltoall sendrecv, 8 B..8 GiB
#   3. all_reduce -G 20 (CUDA graph), 8 B..1 GiB
#   4. all_reduce 64 MiB..8 GiB per init mode: regular, stock, scoped (2 roots: --ranks-per-root 1)
# Each point is judged on its median over the repetitions (ours: $OUT/repK/; theirs: sections repeated).
# Ours runs first (the files to commit), then nccl-tests is built and run.
# Logs in $OUT/bench.log and $OUT/nccltests.log; the judge's table comes last.
# `bench.sh focus`: only 2 and 3, 64 MiB..1 GiB, on both tools (about 2 minutes).
set -u
FOCUS=${1:-}
R="-b 8 -e 8G"; [ "$FOCUS" = focus ] && R="-b 64M -e 1G"
G="-b 8 -e 1G"; [ "$FOCUS" = focus ] && G="-b 64M -e 1G"
source tests/gpu/env.sh
L=$OUT/bench.log
N="-n 20 -w 5 -c 1"
B="timeout 300 python3 -m nccl_bench bench --backend nccl $N"
NT=/tmp/nccltests/build
NTM=/tmp/nccltests/build_mpi
NG=$(nvidia-smi -L | wc -l)
# nt SECTION TIMEOUT BINARY ARGS...: one nccl-tests run in each layout that was built.
nt() {
  local section=$1 limit=$2 bin=$3; shift 3
  echo "## $section 1proc"; timeout $limit $NT/$bin -g $NG "$@"
  [ -x $NTM/$bin ] || return 0
  echo "## $section mpi"; timeout $limit mpiexec -n $NG $NTM/$bin -g 1 "$@"
}
bash tests/gpu/nccltests.sh
# Ours, then nccl-tests, REPS (default 3) times in this call, one cycle each: the machine's drift lands on
# both; the judge takes each point's median over the repetitions (ours: $OUT/repK/, theirs: sections repeated).
for rep in $(seq ${REPS:-3}); do
D=$OUT/rep$rep; mkdir -p $D
echo "=== repetition $rep" >> $L
{
nvidia-smi --query-gpu=index,name,memory.used --format=csv
if [ "$FOCUS" != focus ]; then
echo "== 1. all_reduce ring,tree 8..8G"
$B --collective all_reduce --algo ring,tree -b 8 -e 8G -f 2 -J $D/bench_allreduce_ring_tree.json; echo "exit $?"
fi
echo "== 2. other collectives $R"
$B --collective all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv $R -f 2 \
  -J $D/bench_collectives.json; echo "exit $?"
echo "== 3. all_reduce -G 20, $G"
$B --collective all_reduce -G 20 $G -f 2 --no-algo-confirm -J $D/bench_allreduce_graph.json; echo "exit $?"
if [ "$FOCUS" != focus ]; then
echo "== 4. all_reduce per init mode 64M..8G"
$B --collective all_reduce --init regular,stock,scoped --ranks-per-root 1 -b 64M -e 8G -f 2 --no-algo-confirm \
  -J $D/bench_init_modes.json; echo "exit $?"
fi
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} >> $L 2>&1
if [ -x $NT/all_reduce_perf ]; then
  source /tmp/nccltests/env
  {
  echo "== nccl-tests (its version is in its own header below)"
  for algo in Ring Tree; do
    [ "$FOCUS" = focus ] && break
    NCCL_ALGO=$algo nt "all_reduce $algo" 200 all_reduce_perf -b 8 -e 8G -f 2 $N
  done
  for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    nt "$c default" 200 ${c}_perf $R -f 2 $N
  done
  nt "all_reduce graph" 120 all_reduce_perf $G -f 2 $N -G 20
  } >> $OUT/nccltests.log 2>&1
fi
done
# Which transport NCCL picked in each layout (a direct pointer needs one process for both GPUs).
{
  V="env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P"
  echo "## nccl_bench"; $V timeout 120 python3 -m nccl_bench bench --backend nccl --collective all_gather \
    -b 1M -e 1M -n 2 -w 1 --no-algo-confirm --verbose --json $OUT/probe.json 2>&1 | grep -E " via |NCCL INFO P2P"
  if [ -x $NT/all_gather_perf ]; then
    echo "## nccl-tests 1proc"; $V timeout 60 $NT/all_gather_perf -g $NG -b 1M -e 1M 2>&1 | grep -E " via |NCCL INFO P2P"
  fi
  if [ -x $NTM/all_gather_perf ]; then
    echo "## nccl-tests mpi"; $V timeout 60 mpiexec -n $NG $NTM/all_gather_perf -g 1 -b 1M -e 1M 2>&1 \
      | grep -E " via |NCCL INFO P2P"
  fi
} > $OUT/transports.txt 2>&1
sed -E 's/^.*NCCL INFO //' $OUT/transports.txt | grep -E "^## | via " | uniq | head -24
grep -E "^== |^exit|^build|FAILED|failed|error|not confirmed|skipped" $L | head -40
python3 tests/gpu/bench_judge.py "$OUT"
