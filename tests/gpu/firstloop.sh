#!/usr/bin/env bash
# Issue 38: the first timed loop of a process. On 2 x H200 the first iteration of our process's first loop cost
# the host 36-71 us (every later loop's first: 14-23; nccl-tests' first loop's first: 26-32 GPU us), which was
# the first-row excess at 64 KiB; on one GPU (a 1-rank communicator) it did not show. The per-rank column found
# it: the peer's host (48-60 us), which had waited at the gate for the root's first data check (the check now
# runs before the warm-up's line-up: 13-15 us; results/h200x2/trust-38c/). One process per GPU
# under mpiexec, bound (tests/gpu/pin.sh), -I 1 -N 2, COLL (reduce) at SIZE (64K); the variants in VARIANTS
# alternated, in FRESH (default 3) fresh processes each:
#   ours      bench as trust.sh runs it (-w 5 -c 1)
#   c0        ours with -c 0 (no data check before the warm-up)
#   python    ours with NCCL_BENCH_LAUNCH=python (the loop in Python, not C)
#   rc0       ours with NCCL_RUNTIME_CONNECT=0 (NCCL connects everything at init, not on first use)
#   theirs    nccl-tests' COLL_perf -g 1, same arguments
#   w500, theirs_w500   ours and theirs with -w 500: is a first loop still slow when the warm-up is 100 x longer
#             (sendrecv and reduce 8 B out of place: 12 us first rows in both tools against 9.4 mid-sweep)?
#             It was not: with -w 5 one launch of 112-145 GPU us fell in the first timed loop of both tools,
#             with -w 500 in neither (results/h200x2/trust-38d/), so the warm-up now lasts >= --warmup_ms.
#   wms0      ours with --warmup_ms 0 (-w launches only, as before)
#   norand, theirs_norand   ours and theirs with address-space randomisation off (setarch -R): at 64 KiB a row is
#             the host's launch cost, and it sits at one of two levels per process (about 6.5 or 9-11 us) in both
#             tools (results/h200x2/trust-38d/); a level that follows the process's memory layout stops moving
#   cpu1, theirs_cpu1   ours and theirs bound to one CPU per rank (PIN_CORES=1): does it follow the core a thread
#             lands on? Neither: reduce 64 KiB, 4 fresh processes each, p50 8.0-14.3 us with norand, 8.1-10.5 with
#             cpu1, in both tools alike (results/h200x2/trust-38e/): the level is the machine's (a KVM guest)
# Prints, per process: the first loop's first three iterations (GPU / host us), the second cycle's, and the first
# iteration per rank; the table and one archive of everything under $OUT.
set -u
source tests/gpu/env.sh
C=${COLL:-reduce}; S=${SIZE:-64K}
NG=$(nvidia-smi -L | wc -l)
bash tests/gpu/nccltests.sh > $OUT/nccltests_build.log 2>&1
source /tmp/nccltests/env
PIN=$PWD/tests/gpu/pin.sh
A="-b $S -e $S -n 20 -I 1 -N 2"
OURS="python3 -m nccl_bench bench --backend nccl --collective $C $A --no-algo-confirm -w"
run() { MASTER_PORT=$((20000 + RANDOM % 20000)) timeout 120 mpiexec -n $NG "$@"; }
for k in $(seq "${FRESH:-3}"); do
  for v in ${VARIANTS:-ours c0 python rc0 theirs}; do
    f=$OUT/fl_${v}_$k.json
    case $v in
      ours) run $PIN $OURS 5 -c 1 -J $f ;;
      c0) run $PIN $OURS 5 -c 0 -J $f ;;
      python) NCCL_BENCH_LAUNCH=python run $PIN $OURS 5 -c 1 -J $f ;;
      rc0) NCCL_RUNTIME_CONNECT=0 run $PIN $OURS 5 -c 1 -J $f ;;
      w500) run $PIN $OURS 500 -c 1 -J $f ;;
      wms0) run $PIN $OURS 5 -c 1 --warmup_ms 0 -J $f ;;
      norand) run $PIN setarch "$(uname -m)" -R $OURS 5 -c 1 -J $f ;;
      theirs_norand) run $PIN setarch "$(uname -m)" -R /tmp/nccltests/build_mpi/${C}_perf -g 1 $A -w 5 -c 1 -J $f ;;
      cpu1) PIN_CORES=1 run $PIN $OURS 5 -c 1 -J $f ;;
      theirs_cpu1) PIN_CORES=1 run $PIN /tmp/nccltests/build_mpi/${C}_perf -g 1 $A -w 5 -c 1 -J $f ;;
      theirs) run $PIN /tmp/nccltests/build_mpi/${C}_perf -g 1 $A -w 5 -c 1 -J $f ;;
      theirs_w500) run $PIN /tmp/nccltests/build_mpi/${C}_perf -g 1 $A -w 500 -c 1 -J $f ;;
    esac > $OUT/fl_${v}_$k.log 2>&1
    echo "$v $k exit $?"
  done
done
python3 - "$OUT" <<'PY' | tee $OUT/firstloop_table.txt
import glob, json, os, sys
from nccl_bench.measure import benchfile
print(f"{'variant':8} {'proc':>4}  first loop: GPU/host us of iterations 1-3 (p50)    2nd cycle's first loop"
      "      first iteration per rank: GPU/host")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "fl_*.json"))):
    v, k = os.path.basename(f)[3:-5].rsplit("_", 1)
    try:
        rs = benchfile.rows(json.load(open(f)))
    except (OSError, ValueError):
        print(f"{v:8} {k:>4}  no result"); continue
    def it(r):
        b = r.get("out_of_place_per_iter") or {}
        g, h = b.get("times_us") or [], b.get("host_times_us") or []
        s = " ".join(f"{x:.0f}" + (f"/{y:.0f}" if h else "") for x, y in zip(g[:3], (h or g)[:3]))
        return f"{s} ({b.get('p50_us', 0):.1f})"
    b = rs[0].get("out_of_place_per_iter") or {}
    ranks = zip(b.get("per_process_max_times_us") or [], b.get("per_process_host_times_us") or [[]] * 9)
    per = " ".join(f"{g[0]:.0f}/" + (f"{h[0]:.0f}" if h else "-") for g, h in ranks)
    print(f"{v:8} {k:>4}  {it(rs[0]):<44} {it(rs[1]) if len(rs) > 1 else '-':<44} {per}")
PY
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
# one archive beside the table: the device returns only so many files
tar czf /tmp/firstloop.tgz -C $OUT . && find $OUT -mindepth 1 ! -name firstloop_table.txt -delete \
  && mv /tmp/firstloop.tgz $OUT/
