#!/usr/bin/env bash
# The replay's kernel times on both GPU backends (issue 60): profiler traces replayed on `torch` (ProcessGroupNCCL)
# and on `nccl` (nccl4py), each with its profiled passes, so that `ready_us` is seen on both. A table per replay;
# result files under $OUT.
#   bash tests/gpu/replay_backends.sh                                  # the zoo's moe and mesh (4 GPUs)
#   bash tests/gpu/replay_backends.sh results/h100x2/replay/kineto     # any traces (2 GPUs: that FSDP2 job)
# carrying .whl
set -u
source tests/gpu/env.sh
TRACES=("$@")
[ ${#TRACES[@]} -gt 0 ] || TRACES=(tests/fixtures/zoo/moe/kineto tests/fixtures/zoo/mesh/kineto)
i=0
for traces in "${TRACES[@]}"; do
  i=$((i + 1))
  for backend in torch nccl; do
    echo "== $traces, --backend $backend"
    timeout 200 python3 -m nccl_bench replay "$traces" --backend $backend -n 10 -w 2 --json "$OUT/replay${i}_$backend.json" \
      2>&1 | grep -v '^\s*$' | tail -32
  done
done
