#!/usr/bin/env bash
# Nodes made on this machine (tests/netns.py; pyroute2, the machine has no iproute2),
# each with its GPUs, NCCL between them over sockets on the node's eth0 (tests/gpu/nodes.py). Two device
# calls of under 9 minutes each, on 4 GPUs as 2 nodes x 2 (or 2 as 2 x 1):
#   CALL=1  stress (stock: stale IDs with each rank's node; scoped ROUNDS), the same-group scenario, a node
#           cut off mid-run then --resume, locate (healthy; node1's link shaped), replay of an FSDP job's
#           dumps and traces across the nodes
#   CALL=2  nccl-tests built, every collective beside nccl-tests across the same nodes (alternated REPS
#           times), the replay again, each node's accept then fleet; a part that does not fit is said
# usage: CALL=1 bash tests/gpu/nodes.sh; CALL=2 REPS=3 bash tests/gpu/nodes.sh      (carry .whl .nccltests)
set -u
source tests/gpu/env.sh
CALL=${CALL:-1}; NODES=${NODES:-2}; REPS=${REPS:-3}; ROUNDS=${ROUNDS:-200}; LIMIT=${LIMIT:-520}
V=$(python3 -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))')
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "== versions: $V; $(nvidia-smi -L | wc -l) x $G; code $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if [ "$CALL" = 1 ]; then
  PARTS=${PARTS:-stress,samegroup,cutoff,locate,replay}
else
  echo "== nccl-tests build"
  timeout 200 bash tests/gpu/nccltests.sh > $OUT/nccltests_build.log 2>&1; tail -n 2 $OUT/nccltests_build.log
  PARTS=${PARTS:-bench,replay,accept}
  LIMIT=$(( LIMIT - SECONDS ))
fi
echo "== parts $PARTS across $NODES nodes ($LIMIT s)"
timeout -s KILL $LIMIT python3 tests/gpu/nodes.py --nodes $NODES --part $PARTS --reps $REPS --rounds $ROUNDS \
  --deadline $(( LIMIT - 15 )) > $OUT/nodes_call$CALL.txt 2>&1
echo "exit $?"
echo "== GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
echo "== namespaces left: $(ls /run/netns 2>/dev/null | grep -c nbt)"
tar czf $OUT/nodes_call$CALL.tgz -C $OUT nodes 2>/dev/null
tail -n 40 $OUT/nodes_call$CALL.txt
