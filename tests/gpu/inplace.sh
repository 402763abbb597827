#!/usr/bin/env bash
# Issue 50: the first in-place row after the out-of-place data check (gather and reduce at -b 16M -e 64M: the
# first in-place row 700-780 us against 33 out of place, first cycle only; gone with -c 0; one iteration of
# 26-31 ms with -I 1; 0.8 ms with CUDA_MODULE_LOADING=EAGER). One process per GPU under torchrun, -I 1 -N 2:
#   rows     ours, every row's time per placement and cycle, and the slow iterations (FRESH fresh processes)
#   profile  one run of each collective under torch's profiler (tests/gpu/profiled.py): the host calls that took
#            over 1 ms inside the timed loops, and the kernels first seen after the sweep began
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
A="--backend nccl -b 16M -e 64M -n 20 -w 5 -c 1 -N 2 -I 1 --no-algo-confirm"
run() { timeout 180 torchrun --standalone --nproc-per-node $NG "$@"; }
for c in ${COLLS:-gather reduce}; do
  for k in $(seq "${FRESH:-2}"); do
    run -m nccl_bench bench --collective $c $A -J $OUT/ip_${c}_$k.json > $OUT/ip_${c}_$k.log 2>&1
    echo "$c $k exit $?"
  done
  if [ "${PROFILE:-1}" = 1 ]; then
    mkdir -p $OUT/prof_$c
    run tests/gpu/profiled.py $OUT/prof_$c bench --collective $c $A -J $OUT/prof_$c/bench.json \
      > $OUT/prof_$c/run.log 2>&1
    echo "$c profiled exit $?"
  fi
done
python3 tests/gpu/inplace_judge.py $OUT | tee $OUT/inplace_table.txt
