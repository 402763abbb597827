#!/usr/bin/env bash
# The committed 4-rank zoo replayed on ONE GPU, for the code paths only: 4 torchrun agents of 1 rank each, each its
# own NCCL host (NCCL_HOSTID), all on GPU 0, NCCL between them over sockets on loopback; the GPU time-slices their
# kernels. It shows that every call runs, the profiled passes' lineups and holds included, with every value right
# and how each rank's process ends; it says nothing of times (4 contexts share one GPU), so no ratio is judged. The
# timings are judged only by tests/gpu/zoo_shapes.sh on 4 GPUs.
#   RUNS="ring:kineto ring:fr pp:fr mesh:kineto" bash tests/gpu/zoo_one_gpu.sh          (carry .whl)
# A run is KIND:FORM (a zoo job's profiler trace or dumps), or bench:- (every collective, 8 B-1 MiB: the same
# agents without the replay); CODE=DIR runs the code in DIR (a `git archive` of nccl_bench and stress) instead.
# The release's check `replay-torchrun`: ranks of a user's launcher end through the interpreter, where PyTorch's
# profiler aborted them before c7512c2 (9 of 17 replays; results/h200x1/rank_exit). Its verdict line comes last:
# PASS when every run exits 0, every rank with it, with 0 wrong values and no rank's log saying it aborted.
# BACKEND=gloo checks the script on a CPU machine.
set -u
BACKEND=${BACKEND:-nccl}
[ "$BACKEND" = nccl ] && source tests/gpu/env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
RUNS=${RUNS:-ring:kineto ring:fr pp:kineto pp:fr mesh:kineto mesh:fr moe:kineto moe:fr}
LIMIT=${LIMIT:-150}; CODE=${CODE:-.}; TOP=$PWD; W=/tmp/zoo_one_gpu; rm -rf $W; mkdir -p $W
# each rank's native stack where it aborts (tests/gpu/abort_backtrace.c), into its log
BT=""; cc -shared -fPIC -O1 -o /tmp/abort_backtrace.so tests/gpu/abort_backtrace.c 2>/dev/null && BT=/tmp/abort_backtrace.so
echo "== $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s), ranks on GPU 0 only, $BACKEND; code in $CODE"
printf '%-14s %5s %6s %6s %6s %5s  %s\n' "run" exit "wall s" rows calls wrong "how ranks ended" > $W/table.txt
n=0
for run in $RUNS; do  # each in a folder of its own (a run may be asked for twice)
  n=$((n + 1)); kind=${run%%:*}; form=${run##*:}; d=$W/${n}_${kind}_$form; mkdir -p $d; port=$((29500 + RANDOM % 400)); pids=()
  if [ "$kind" = bench ]; then
    args=(nccl_bench bench --backend $BACKEND -b 8 -e 1M -f 4 -n 5 -w 1 -J $d/replay.json)
  else
    args=(nccl_bench replay $TOP/tests/fixtures/zoo/$kind/$form --backend $BACKEND -n 3 -w 1 --json $d/replay.json)
  fi
  t0=$SECONDS
  for i in 0 1 2 3; do
    (cd $CODE && PYTHONPATH=/tmp/site:$PWD NCCL_HOSTID=host$i NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
     CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1 PYTHONFAULTHANDLER=1 LD_PRELOAD=$BT \
     exec timeout -s KILL $LIMIT python3 -m torch.distributed.run --nnodes 4 --nproc-per-node 1 --rdzv-backend c10d \
       --rdzv-endpoint 127.0.0.1:$port --rdzv-id z$kind$form --max-restarts 0 -m "${args[@]}") \
      > $d/agent$i.txt 2>&1 &
    pids+=($!)
  done
  rc=0; for p in "${pids[@]}"; do wait $p || rc=$?; done
  # how each rank ended, from its agent: torchrun names a rank's exit code or signal when it fails
  ends=$(for i in 0 1 2 3; do grep -ho "exitcode *: *-\?[0-9]*" $d/agent$i.txt | head -1 | tr -d ' '; done | sort | uniq -c | tr -s ' ' | paste -sd,)
  crashed=$(cat $d/*.log 2>/dev/null | grep -c "double free\|invalid pointer\|corruption\|Fatal Python")
  python3 - "$d/replay.json" "${kind}_$form" $rc $((SECONDS - t0)) "${ends:-all 0}; ${crashed} crash line(s)" \
    >> $W/table.txt <<'EOF'
import sys
from nccl_bench import records
path, name, rc, wall, ends = sys.argv[1:]
try:
    doc = records.load(path)
    rows = doc.rows
    ran = sum(len(v) for v in doc.meta["replay"]["ran"].values()) if "replay" in doc.meta else len(rows)
    wrong = sum(r.get("nwrong") or r.get("out_of_place", {}).get("nwrong") or 0 for r in rows)
    print(f"{name:14s} {rc:>5s} {wall:>6s} {len(rows):6d} {ran:6d} {wrong:5d}  {ends}")
except Exception as e:  # no result: the agents' logs say why
    print(f"{name:14s} {rc:>5s} {wall:>6s} {'-':>6s} {'-':>6s} {'-':>5s}  {ends} (no result: {type(e).__name__})")
EOF
done
echo "== GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .)"
tar czf $OUT/zoo_one_gpu${TAG:-}.tgz -C $W .
for d in $W/*/; do
  grep -l "Fatal Python\|double free\|invalid pointer" $d/*.log >/dev/null 2>&1 || continue
  echo "-- $(basename $d): the first crashed rank's log"
  f=$(grep -l "Fatal Python\|double free\|invalid pointer" $d/*.log | head -1); grep -v "Warning\|_warn_once" $f | head -45
done | tail -c 9000
cat $W/table.txt
python3 - $W/table.txt <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1]).read().splitlines()[1:]]
bad = [r[0] for r in rows if r[1] != "0" or r[5] != "0" or "all 0; 0 crash" not in " ".join(r[6:])]
print(f"ZOO ON ONE GPU: PASS {len(rows)} of {len(rows)} runs exit 0, every rank 0, 0 wrong, no rank aborted" if rows
      and not bad else f"ZOO ON ONE GPU: FAIL {len(bad)} of {len(rows)} runs: {', '.join(bad) or 'none ran'}")
EOF
