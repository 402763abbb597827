#!/usr/bin/env bash
# Start-up under mpiexec, taken apart (issue 68: the first row 1.31-1.41 x nccl-tests' on 4 x H200): where does a
# rank's main thread wait when CUDA starts at its first line? Per variant, REPS runs of
#   mpiexec -n GPUS python -m nccl_bench bench --backend nccl -b 8 -e 8 -n 1 -w 0
# (--verbose: every rank's stderr in one file) with NCCL_BENCH_START_MARKS, and in run 1 -X importtime per rank:
#   store: as shipped (CUDA starts once the rank has reached its job store)
#   first: CUDA started at Python's first line by tests/gpu/earlycuda/sitecustomize.py
#   ext:   the same, after importing the C extensions our imports load before the store
# One call, about 2 minutes on a fresh machine: bash tests/gpu/earlycuda.sh (carry .whl)
set -u
cd "$(dirname "$0")/../.."
source tests/gpu/env.sh
GPUS=$(nvidia-smi -L | wc -l); REPS=${REPS:-5}
W=/tmp/earlycuda && rm -rf $W && mkdir -p $W  # $OUT gets a tarball and the table: a machine sends back a few files
python3 -m zipfile -e .whl/mpi/mpich-*.whl /tmp/mpich-whl && chmod +x /tmp/mpich-whl/mpich-*.data/data/bin/*
export PATH=$(ls -d /tmp/mpich-whl/mpich-*.data/data)/bin:$PATH
export LD_LIBRARY_PATH=$(ls -d /tmp/mpich-whl/mpich-*.data/data)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for rep in $(seq 0 $REPS); do
  for v in store first ext; do
    marks=$W/marks.$v.$rep; : > $marks
    extra=(); [ "$v" != store ] && extra=(env EARLY_CUDA=$v EARLY_CUDA_LOG=$marks PYTHONPATH=$PWD/tests/gpu/earlycuda:$PYTHONPATH)
    imp=(); [ "$rep" = 1 ] && imp=(-X importtime)
    t0=$(date +%s.%N)
    NCCL_BENCH_START_MARKS=$marks mpiexec -n $GPUS -errfile-pattern $W/err.$v.$rep.%r \
      ${extra[@]+"${extra[@]}"} python3 ${imp[@]+"${imp[@]}"} -m nccl_bench bench --backend nccl -b 8 -e 8 -n 1 -w 0 \
      --verbose -J $W/b.$v.$rep.json > $W/out.$v.$rep 2>&1
    echo "$v $rep $t0" >> $W/starts
  done
done
python3 - "$W" > $W/table.txt <<'PY'
import collections, glob, os, statistics, sys
w = sys.argv[1]
starts = {(v, int(r)): float(t) for v, r, t in (l.split() for l in open(f"{w}/starts"))}
per = collections.defaultdict(list)
for (v, r), t0 in starts.items():
    if r == 0:
        continue  # the first of each: outside the medians
    last = {}
    for line in open(f"{w}/marks.{v}.{r}"):
        pid, rank, what, t = line.split()
        last[what] = max(last.get(what, 0.0), float(t) - t0)
    for what, t in last.items():
        per[(v, what)].append(t)
names = ["python", "ext-imported", "cuda-start", "cuda-dlopened", "store", "met", "cuda-ready", "cuda",
         "nccl-imported", "ids", "init", "row"]
print(f"{'milestone (slowest rank)':26s} " + " ".join(f"{v:>8s}" for v in ("store", "first", "ext")))
for n in names:
    cells = [statistics.median(per[(v, n)]) if per[(v, n)] else None for v in ("store", "first", "ext")]
    if any(c is not None for c in cells):
        print(f"{n:26s} " + " ".join(f"{c:8.3f}" if c is not None else f"{'-':>8s}" for c in cells))
print(f"(medians over runs 1-{max(r for _, r in starts)}, seconds from mpiexec's start)")
for v in ("first", "ext"):  # rep 1 ran with -X importtime: the imports that took longest in each rank
    for f in sorted(glob.glob(f"{w}/err.{v}.1.*")):
        rows = []
        for line in open(f):
            if line.startswith("import time:") and "|" in line:
                parts = line.split("|")
                try:
                    rows.append((int(parts[0].split(":")[1]), parts[2].strip()))
                except ValueError:
                    pass
        top = sorted(rows, reverse=True)[:4]
        print(f"{v} {os.path.basename(f)} slowest imports (self us): " + ", ".join(f"{m} {us}" for us, m in top))
PY
tar czf $OUT/earlycuda.tgz -C /tmp earlycuda
cp $W/table.txt $OUT/earlycuda_table.txt
cat $W/table.txt
