#!/usr/bin/env bash
# The zoo's model shapes (issue 70), recorded and replayed in one call on every GPU of the machine: top-2 MoE of
# [tokens, hidden] rows (moe2d), ring attention batches (ring), DDP with a bf16 comm hook (ddp), ZeRO's
# reduce_scatter AVG + all_gather (zero), and the 1F1B pipeline's batches (pp, 4 GPUs only). Each job
# (tests/gpu/zoo.py) leaves its dumps and profiler trace; each is replayed from both (nccl backend) and judged by
# tests/gpu/replay_zoo_judge.py: calls left out, rows within 0.8-1.25 x the job's ready time, the sequence, SLOWER
# rows. $OUT/zoo_shapes.tgz holds the recordings in the committed layout (tests/fixtures/zoo/<kind>/), the replays'
# JSON and the logs; a table last.
#   bash tests/gpu/zoo_shapes.sh        (on nvidia-h200-x4 for the committed zoo; on fewer GPUs, a preview)
#   FROM=tests/fixtures/zoo bash tests/gpu/zoo_shapes.sh   (the committed recordings replayed and judged, none made)
#   FROM=tests/fixtures/zoo KINDS="fsdp2 pp tp mesh moe moe2d ring ddp zero" bash tests/gpu/zoo_shapes.sh   (the whole zoo)
set -u
source tests/gpu/env.sh
N=$(nvidia-smi -L | wc -l)
W=/tmp/zoo_shapes; rm -rf $W; mkdir -p $W/zoo $W/replay
L=$W/log.txt
# KINDS="..." picks the zoo's jobs (with FROM=tests/fixtures/zoo: fsdp2 tp mesh moe as well)
if [ -z "${KINDS:-}" ]; then KINDS="moe2d ring ddp zero"; [ "$N" = 4 ] && KINDS="$KINDS pp"; fi
{
echo "== $(date -u) $N GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
for kind in $KINDS; do
  [ -n "${FROM:-}" ] && { cp -r "$FROM/$kind" $W/zoo/; echo "== $kind from $FROM"; continue; }
  echo "== record $kind"
  timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node $N tests/gpu/zoo.py $kind $W/zoo/$kind
  echo "exit $?"
done
for kind in $KINDS; do
  for form in fr kineto; do
    echo "== replay $kind $form"
    timeout 240 python3 -m nccl_bench replay $W/zoo/$kind/$form --backend nccl -n 20 -w 3 --json $W/replay/zoo_${kind}_${form}.json
    echo "exit $?"
  done
done
} > $L 2>&1
python3 tests/gpu/replay_zoo_judge.py $W/replay > $W/summary.txt 2>&1
grep -h "SLOWER" $W/log.txt | grep -v "^#" | head -20 >> $W/summary.txt
[ -z "${FROM:-}" ] && gzip -9 $W/zoo/*/kineto/*.json && for f in $W/zoo/*/kineto/*.json.gz; do mv "$f" "${f%.json.gz}.pt.trace.json.gz"; done
tar czf $OUT/zoo_shapes.tgz -C $W zoo replay log.txt summary.txt
cp $W/summary.txt $OUT/summary.txt
head -c 9000 $W/summary.txt
echo "gpu processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
