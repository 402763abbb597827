#!/usr/bin/env bash
# Small-message latency beside nccl-tests built in the same call, on any number of GPUs.
# Both tools run one process per GPU (nccl-tests under mpiexec when it was built with MPI and there is
# more than one GPU), with -n 20 -w 5 -c 1 -N 3:
#   all_reduce Ring and Tree 8 B..64 KiB; all_gather reduce_scatter broadcast sendrecv at 8 B and 1 KiB;
#   all_reduce -G 20 8 B..64 KiB; nccl-tests' -C 1 host time per launch beside our host_us.
# Ours twice: through the compiled loop, and through the Python loop (NCCL_BENCH_LAUNCH=python).
# Ours then nccl-tests, REPS (default 3) times in the call (ours under $OUT/repK, theirs appended to one log);
# the judge (tests/gpu/latency_judge.py) takes each point's median over repetitions, then the ratio; table last.
set -u
source tests/gpu/env.sh
N="-n 20 -w 5 -c 1 -N 3"
NG=$(nvidia-smi -L | wc -l)
CONFIRM=""; [ "$NG" -lt 2 ] && CONFIRM="--no-algo-confirm"  # one rank: NCCL copies, no Ring or Tree to confirm
B="timeout 240 python3 -m nccl_bench bench --backend nccl $N"
ours() {  # TAG: our three runs, JSON in $OUT/lat_TAG_*.json
  $B --collective all_reduce --algo ring,tree -b 8 -e 64K -f 2 $CONFIRM -J $OUT/lat_$1_allreduce.json; echo "exit $?"
  $B --collective all_gather,reduce_scatter,broadcast,sendrecv -b 8 -e 1K -f 128 -J $OUT/lat_$1_others.json
  echo "exit $?"
  $B --collective all_reduce -G 20 -b 8 -e 64K -f 2 --no-algo-confirm -J $OUT/lat_$1_graph.json; echo "exit $?"
}
bash tests/gpu/nccltests.sh
NT=/tmp/nccltests/build; NTM=/tmp/nccltests/build_mpi
[ -f /tmp/nccltests/env ] && source /tmp/nccltests/env
nt() {  # SECTION BINARY ARGS...: one process per GPU
  local section=$1 bin=$2; shift 2
  if [ "$NG" -gt 1 ] && [ -x $NTM/$bin ]; then echo "## $section mpi"; timeout 120 mpiexec -n $NG $NTM/$bin -g 1 "$@"
  elif [ "$NG" -eq 1 ] && [ -x $NT/$bin ]; then echo "## $section mpi"; timeout 120 $NT/$bin -g 1 "$@"
  else echo "## $section: no nccl-tests build, skipped"; fi
}
# Ours, then theirs, REPS times in this one call: the machine's drift lands on both tools alike; the
# judge takes each point's median over the repetitions, then the ratio.
ALL=$OUT
for rep in $(seq ${REPS:-3}); do
  OUT=$ALL/rep$rep; mkdir -p $OUT
  {
    echo "== ours, compiled loop"; ours c
    echo "== ours, Python loop"; NCCL_BENCH_LAUNCH=python ours py
  } > $OUT/latency.log 2>&1
  {
    for algo in Ring Tree; do NCCL_ALGO=$algo nt "all_reduce $algo" all_reduce_perf -b 8 -e 64K -f 2 $N; done
    for c in all_gather reduce_scatter broadcast sendrecv; do nt "$c default" ${c}_perf -b 8 -e 1K -f 128 $N; done
    nt "all_reduce graph" all_reduce_perf -b 8 -e 64K -f 2 $N -G 20
    nt "all_reduce cputime" all_reduce_perf -b 8 -e 64K -f 2 $N -C 1
  } >> $ALL/nccltests.log 2>&1
done
OUT=$ALL
grep -hE "^== |^exit|FAILED|Traceback|rror" $OUT/rep*/latency.log | sort | uniq -c | head -30
python3 tests/gpu/latency_judge.py $OUT | tee $OUT/latency_table.txt
