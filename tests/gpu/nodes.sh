#!/usr/bin/env bash
# Issue 51 on GPUs: nodes made on this machine (tests/netns.py; pyroute2, the machine has no iproute2),
# each with its GPUs, NCCL between them over sockets on the node's eth0 (tests/gpu/nodes.py), plus issue 49's
# leftover (accept on GPU 0 alone with the derived profile). One device call, bounded by DEADLINE seconds:
#   1. accept on GPU 0 alone (CUDA_VISIBLE_DEVICES=0): the derived profile must count 1 GPU
#   2. stress across the nodes (stock: stale IDs with each rank's node; scoped)
#   3. locate across the nodes: healthy names nothing; node1's link shaped names node1's network
#   4. nccl-tests built, then bench beside nccl-tests across the same nodes, alternated REPS times
# usage: NODES=2 REPS=2 bash tests/gpu/nodes.sh        (carry .whl .nccltests)
set -u
source tests/gpu/env.sh
DEADLINE=${DEADLINE:-500}; NODES=${NODES:-2}; REPS=${REPS:-2}; ROUNDS=${ROUNDS:-30}
left() { echo $((DEADLINE - SECONDS)); }
echo "== versions: $(python3 -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'); $(nvidia-smi -L | wc -l) GPUs"
echo "== 1. accept, GPU 0 alone"
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -m nccl_bench accept --json $OUT/accept_gpu0.json > $OUT/accept_gpu0.log 2>&1
echo "exit $?"; grep -E "profile|verdict|GPU" $OUT/accept_gpu0.log | tail -n 6
echo "== 2-3. stress and locate across $NODES nodes ($(left) s left)"
timeout $(( $(left) - 200 > 60 ? $(left) - 200 : 60 )) python3 tests/gpu/nodes.py --nodes $NODES --part stress,locate \
  --rounds $ROUNDS 2>&1 | tee $OUT/nodes_stress_locate.txt
if [ "$(left)" -gt 150 ]; then
  echo "== 4. nccl-tests build ($(left) s left)"
  timeout $(( $(left) - 100 )) bash tests/gpu/nccltests.sh > $OUT/nccltests_build.log 2>&1; tail -n 2 $OUT/nccltests_build.log
  echo "== 4. bench beside nccl-tests across the nodes ($(left) s left)"
  timeout $(( $(left) - 10 > 30 ? $(left) - 10 : 30 )) python3 tests/gpu/nodes.py --nodes $NODES --part bench \
    --reps $REPS 2>&1 | tee $OUT/nodes_bench.txt
else
  echo "== 4. skipped: $(left) s left"
fi
echo "== GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
echo "== namespaces left: $(ls /run/netns 2>/dev/null | grep -c nbt)"
