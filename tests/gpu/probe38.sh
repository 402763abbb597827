#!/usr/bin/env bash
# Issue 38's open causes, in one device call (one process per GPU under mpiexec for both tools, alternated):
#   place    the CPUs each rank's threads run on: unbound, and bound with tests/gpu/pin.sh (own physical cores)
#   first    all_reduce alone in a fresh process, -b 8 -e 8: first row and our host launch cost, both placements
#   tail     -I 1 -n 1000 all_reduce 8 B..128 KiB: p50/p99 of 1000 iterations, both placements
#   big      alltoall 128 MiB and reduce_scatter 1 GiB: alone (-b S -e S) and in the p2p sweep (-b 64M -e 1G)
#   startup  where our 5-6 s of start-up go (cProfile of rank 0, cumulative)
#   cycles   the FIRST collective and size (and CYCLE_ALSO="C S", if set) alone, bound, -N 3 (three cycles of the
#            sweep in one process): is only a process's first loop slow? Then FIRST with -I 1 as well (each
#            iteration's GPU time, and ours its host time): a whole loop slow, or one stall in it?
# REPS (default 3); PARTS (default "startup first tail big"; "cycles" on request); FIRST="C S" the
# collective and size of the first and cycles parts (default "all_reduce 8"). A short table last; every
# file in one archive.
set -u
source tests/gpu/env.sh
REPS=${REPS:-3}
PARTS=${PARTS:-startup first tail big}
has() { [[ " $PARTS " == *" $1 "* ]]; }
read -r FC FS <<< "${FIRST:-all_reduce 8}"
L=$OUT/probe.log
NG=$(nvidia-smi -L | wc -l)
bash tests/gpu/nccltests.sh >> $L 2>&1
source /tmp/nccltests/env
NTM=/tmp/nccltests/build_mpi
OURS="python3 -m nccl_bench bench --backend nccl -w 5 -c 1 --no-algo-confirm"
ours() {  # PIN OUT ARGS...
  local pin=$1 out=$2; shift 2
  MASTER_PORT=$((20000 + RANDOM % 20000)) timeout 120 mpiexec -n $NG $pin $OURS -J $out "$@" >> $L 2>&1
}
theirs() {  # PIN BIN OUT ARGS...
  local pin=$1 bin=$2 out=$3; shift 3
  timeout 120 mpiexec -n $NG $pin $NTM/$bin -g 1 -w 5 -c 1 -J $out "$@" >> $L 2>&1
}
{ lscpu; nvidia-smi topo -m; } > $OUT/machine.txt 2>&1
t0=$SECONDS
if has startup; then echo "== startup" >> $L
MASTER_PORT=$((20000 + RANDOM % 20000)) timeout 120 mpiexec -n $NG bash -c \
  'exec python3 -m cProfile -o '$OUT'/startup.$PMI_RANK.prof -m nccl_bench bench --backend nccl -w 5 -c 1 \
   --no-algo-confirm -b 8 -e 8 -n 20 -J '$OUT'/startup.json' >> $L 2>&1
fi
s_startup=$((SECONDS - t0))
for rep in $(seq $REPS); do
  has first || has tail || break
  for mode in free pin; do
    p=""; [ $mode = pin ] && p=tests/gpu/pin.sh
    if has first; then
    ours "$p" $OUT/first_ours_${mode}_$rep.json --collective $FC -b $FS -e $FS -n 20
    theirs "$p" ${FC}_perf $OUT/first_theirs_${mode}_$rep.json -b $FS -e $FS -n 20; fi
    has tail || continue
    ours "$p" $OUT/tail_ours_${mode}_$rep.json --collective all_reduce -b 8 -e 128K -f 4 -n 1000 -I 1
    theirs "$p" all_reduce_perf $OUT/tail_theirs_${mode}_$rep.json -b 8 -e 128K -f 4 -n 1000 -I 1
  done
  echo "== rep $rep first/tail done at $((SECONDS - t0)) s" >> $L
done
for rep in $(seq $REPS); do
  has cycles || break
  for cs in "$FC $FS" ${CYCLE_ALSO:+"$CYCLE_ALSO"}; do
    read -r c s <<< "$cs"
    ours tests/gpu/pin.sh $OUT/cycles_ours_${c}_${s}_$rep.json --collective $c -b $s -e $s -n 20 -N 3
    theirs tests/gpu/pin.sh ${c}_perf $OUT/cycles_theirs_${c}_${s}_$rep.json -b $s -e $s -n 20 -N 3
  done
  ours tests/gpu/pin.sh $OUT/cyclesI_ours_${FC}_${FS}_$rep.json --collective $FC -b $FS -e $FS -n 20 -N 3 -I 1
  theirs tests/gpu/pin.sh ${FC}_perf $OUT/cyclesI_theirs_${FC}_${FS}_$rep.json -b $FS -e $FS -n 20 -N 3 -I 1
  echo "== rep $rep cycles done at $((SECONDS - t0)) s" >> $L
done
for rep in $(seq $REPS); do
  has big || break
  ours "" $OUT/big_ours_a2a_$rep.json --collective alltoall -b 128M -e 128M -n 20
  theirs "" alltoall_perf $OUT/big_theirs_a2a_$rep.json -b 128M -e 128M -n 20
  ours "" $OUT/big_ours_a2asweep_$rep.json --collective alltoall -b 64M -e 1G -f 2 -n 20
  theirs "" alltoall_perf $OUT/big_theirs_a2asweep_$rep.json -b 64M -e 1G -f 2 -n 20
  ours "" $OUT/big_ours_rs_$rep.json --collective reduce_scatter -b 1G -e 1G -n 20
  theirs "" reduce_scatter_perf $OUT/big_theirs_rs_$rep.json -b 1G -e 1G -n 20
  echo "== rep $rep big done at $((SECONDS - t0)) s" >> $L
done
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
grep -E "Thread|Core|Socket|NUMA|Model name|Hypervisor" $OUT/machine.txt
python3 tests/gpu/probe38_judge.py $OUT $REPS $s_startup | tee $OUT/probe_table.txt
tar czf /tmp/probe_results.tgz -C $OUT . && find $OUT -mindepth 1 ! -name probe_table.txt -delete \
  && mv /tmp/probe_results.tgz $OUT/
