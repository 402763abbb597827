#!/usr/bin/env bash
# replay on GPUs, in one call: a small FSDP2 job (tests/gpu/fsdp_job.py, timing on) leaves its Flight
# Recorder dumps and profiler traces; `replay` runs each on this node (dumps: torch and nccl backends;
# traces: torch), and tests/gpu/replay_judge.py holds every row of 1 MiB or more to 0.8-1.25 x the
# job's own time. Runs on 2 GPUs or more (FSDP2 on a one-rank world makes no collective: one H200, 2026-11-29). Output under $OUT:
# replay.log, summary.txt, replay.tgz (dumps, traces, result files).
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
W=/tmp/replay; rm -rf $W; mkdir -p $W
L=$OUT/replay.log
{
echo "== $(date -u) $NG GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
TORCH_NCCL_ENABLE_TIMING=1 TORCH_FR_BUFFER_SIZE=4000 timeout 300 python3 -m torch.distributed.run --standalone \
  --nproc-per-node $NG tests/gpu/fsdp_job.py $W ${JOB_ARGS:-}
ls -la $W/fr $W/kineto
python3 - $W <<'P'
import json, sys, glob
t = json.load(open(sorted(glob.glob(sys.argv[1] + "/kineto/*.json"))[0]))
comms = [e for e in t["traceEvents"] if isinstance(e.get("args"), dict) and "Collective name" in e["args"]]
print("kineto: distributedInfo", t.get("distributedInfo"))
print("kineto:", len(comms), "events with comm args; names", sorted({(e.get("name")[:40], e.get("cat")) for e in comms})[:12])
print("kineto: first args", comms[0]["args"] if comms else None)
P
for rep in 1 2; do
  for b in torch nccl; do
    echo "== replay dumps on $b ($rep)"
    timeout 300 python3 -m nccl_bench replay $W/fr --backend $b -n 20 -w 3 --json $W/replay_fr_${b}_$rep.json
  done
  echo "== replay profiler trace on torch ($rep)"
  timeout 300 python3 -m nccl_bench replay $W/kineto --backend torch -n 20 -w 3 --json $W/replay_kineto_torch_$rep.json
done
} > $L 2>&1
python3 tests/gpu/replay_judge.py $W/replay_*.json > $OUT/summary.txt 2>&1
tar czf $OUT/replay.tgz -C $W fr kineto $(cd $W && ls replay_*.json)
tail -c 6000 $OUT/summary.txt
