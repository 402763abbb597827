#!/usr/bin/env bash
# The replay zoo on GPUs (issue 60), in one call on 4 GPUs:
#  1. every job of tests/fixtures/zoo (recorded by tests/gpu/zoo.sh on 4 x H100) replayed from its dumps and from its
#     traces on the nccl backend: calls left out, rows against the job's ready time, the whole sequence;
#  2. small calls: a workload of all_reduce 8 B .. 1 MiB and all_gather 64 KiB replayed, beside `bench` at the same
#     sizes, the two alternated 3 times; each row's time per call, replay over bench;
#  3. `bench` all_reduce of 616 B int64, sum and max alternated 3 times (mesh's int64 max, replayed as a sum).
# Judged by tests/gpu/replay_zoo_judge.py; a short table last. Logs and result files in $OUT/replay_zoo.tgz.
#   bash tests/gpu/replay_zoo.sh           (on nvidia-h100-x4, carrying .whl)
#   bash tests/gpu/zoo.sh && ZOO=/tmp/zoo_rec/zoo bash tests/gpu/replay_zoo.sh    (record the zoo again and replay it, one call)
set -u
source tests/gpu/env.sh
W=/tmp/rz; rm -rf $W; mkdir -p $W
L=$OUT/replay_zoo.log
R="timeout 240 python3 -m nccl_bench replay"
ZOO=${ZOO:-tests/fixtures/zoo}
{
echo "== $(date -u) $(nvidia-smi -L | wc -l) GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
for kind in tp pp moe mesh fsdp2; do
  for form in fr kineto; do
    echo "== zoo $kind $form"
    $R $ZOO/$kind/$form --backend nccl -n 20 -w 3 --json $W/zoo_${kind}_${form}.json
  done
done
for rep in 1 2 3; do
  echo "== small: replay ($rep)"
  $R tests/gpu/small_calls.json --backend nccl -n 20 -w 3 --json $W/small_replay_$rep.json
  echo "== small: bench all_reduce ($rep)"
  timeout 240 python3 -m nccl_bench bench --collective all_reduce -b 8 -e 1M -f 2 -n 200 -w 20 --json $W/small_bench_ar_$rep.json
  echo "== small: bench all_gather ($rep)"
  timeout 240 python3 -m nccl_bench bench --collective all_gather -b 64K -e 64K -n 200 -w 20 --json $W/small_bench_ag_$rep.json
done
for rep in 1 2 3; do  # mesh's all_reduce of 77 int64 is a max: the records hold no reduction, and the replay's is a sum
  for op in sum max; do
    echo "== int64 all_reduce $op ($rep)"
    timeout 120 python3 -m nccl_bench bench --collective all_reduce -d int64 -o $op -b 616 -e 616 -n 200 -w 20 --json $W/int64_${op}_$rep.json
  done
done
} > $L 2>&1
python3 tests/gpu/replay_zoo_judge.py $W > $OUT/summary.txt 2>&1
tar czf $OUT/replay_zoo.tgz -C $W . 
cat $OUT/summary.txt | tail -c 9000
