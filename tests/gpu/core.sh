#!/usr/bin/env bash
# Core validation on the GPU machine (issue 2): nccl and torch backends, each mode, stale-ID repro.
set -u
source tests/gpu/env.sh
L=$OUT/core.log
{
nvidia-smi topo -m; nvidia-smi --query-gpu=index,name,memory.used --format=csv
python3 -m pip list 2>/dev/null | grep -iE "^(torch|cuda-|nccl4py|nvtx|nvidia-ml|nvidia-nccl|numpy|packaging|tabulate) "
python3 -m nccl_bench info
echo "== smoke nccl";  timeout 120 python3 -m nccl_bench smoke --backend nccl --ranks-per-root 1; echo "exit $?"
echo "== smoke torch"; timeout 120 python3 -m nccl_bench smoke --backend torch --ranks-per-root 1; echo "exit $?"
echo "== nccl stock, root 1 delayed 3 s in round 1, deadline 12 s; round 2 scoped"
timeout 150 python3 tests/jobs/churn.py $OUT/nccl_delay.jsonl --backend nccl --modes stock,stock,scoped,stock --delay 1:1:3 --timeout 12; echo "exit $?"
echo "== nccl stock, no skew, 12 rounds (natural jitter)"
timeout 200 python3 tests/jobs/churn.py $OUT/nccl_jitter.jsonl --backend nccl --modes $(python3 -c "print(','.join(['stock']*12))") --timeout 8; echo "exit $?"
echo "== torch stock, root 1 delayed 3 s in round 1, deadline 15 s"
timeout 200 python3 tests/jobs/churn.py $OUT/torch_delay.jsonl --backend torch --modes stock,stock,scoped --delay 1:1:3 --timeout 15; echo "exit $?"
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} 2>&1 | tee $L | grep -vE "^\s*$" | tail -n 120
