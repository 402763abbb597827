#!/usr/bin/env bash
# Issue 16 on ONE GPU: what each launch path costs the host per all_reduce (1-rank communicator),
# then bench itself on 1 rank (-C 0/1, -R 1/2, -G, the Python loop for comparison).
#   1. tests/gpu/launchcost.cu (built with nvcc against the NCCL torch/nccl4py load) and
#      tests/gpu/launchcost.py: host us per launch of nccl4py's binding, our old Python
#      launchers, ctypes, our compiled loop and a C program, at 8 B, 1 KiB, 64 KiB.
#   2. bench --nranks 1 -b 8 -e 64K -f 8 -n 20 -w 5 -N 2: compiled loop vs NCCL_BENCH_LAUNCH=python,
#      -C 1, -R 1, -R 2, -G 10; the bench tables and the first point of each run.
# With more GPUs the same runs still use one; the multi-GPU comparison is bench.sh's.
# `launchcost.sh probe`: part 1 only (about 30 s). `launchcost.sh fresh N`: the compiled loop and the C program
# in N fresh processes each, alternated (issue 38: does our host cost per launch, and the first loop's, move
# from one process to the next more than a C program's?); about 6 s a pair.
# Logs and JSON under $OUT; the table of part 1 and a summary of part 2 come last.
set -u
PART=${1:-all}
source tests/gpu/env.sh
L=$OUT/launchcost.log
{
# the libnccl nccl4py loads (torch's wheel), and the header beside it
NCCL_SO=$(python3 -c "import nccl.core as nc; print(nc.get_version().libnccl.path)" 2>/dev/null)
NCCL_H=$(ls "$(dirname "${NCCL_SO:-/none}")"/../include/nccl.h 2>/dev/null)
echo "nccl.h ${NCCL_H:-none}; libnccl ${NCCL_SO:-none}; nvcc $(command -v nvcc || echo none)"
if [ -n "$NCCL_H" ] && [ -n "$NCCL_SO" ] && command -v nvcc >/dev/null; then
  nvcc -O2 -arch=sm_90 tests/gpu/launchcost.cu -I"$(dirname "$NCCL_H")" -L"$(dirname "$NCCL_SO")" -l:libnccl.so.2 -o /tmp/launchcost \
    -Xlinker -rpath -Xlinker "$(dirname "$NCCL_SO")" && timeout 120 /tmp/launchcost > $OUT/launchcost_c.txt
  echo "C program exit $?"; cat $OUT/launchcost_c.txt
fi
if [ "$PART" = fresh ]; then  # N fresh processes of each, alternated: the compiled loop's and the C program's
  for k in $(seq "${2:-10}"); do
    for pin in ${FRESH_PIN:-0 1}; do  # 1: both bound to rank 0's cores by pin.sh, as trust.sh binds them
      run=(); [ "$pin" = 1 ] && run=(bash tests/gpu/pin.sh)
      timeout 60 "${run[@]}" /tmp/launchcost 20 > $OUT/fresh_c_${pin}_$k.txt
      REPS=20 PATHS=compiled timeout 120 "${run[@]}" python3 tests/gpu/launchcost.py $OUT/fresh_c_${pin}_$k.txt \
        > $OUT/fresh_${pin}_$k.txt 2>&1
      echo "fresh $k pin $pin: exit $?"
    done
  done
else
python3 -m nccl_bench.comm.launchloop
timeout 200 python3 tests/gpu/launchcost.py $OUT/launchcost_c.txt > $OUT/launchcost_table.txt 2>&1
echo "probe exit $?"
fi
B="timeout 120 python3 -m nccl_bench bench --backend nccl --nranks 1 -b 8 -e 64K -f 8 -n 20 -w 5 -c 1 -N 2 --no-algo-confirm"
[ "$PART" = probe ] || [ "$PART" = fresh ] || for run in "compiled|" "python|NCCL_BENCH_LAUNCH=python" "cputime|-C 1" "register1|-R 1" "register2|-R 2" "graph|-G 10"; do
  name=${run%%|*}; arg=${run#*|}
  echo "== $name: $arg"
  if [ "$name" = python ]; then env $arg $B -J $OUT/lc_$name.json; else $B $arg -J $OUT/lc_$name.json; fi
  echo "exit $?"
done
} > $L 2>&1
tail -n 40 $L | grep -v "^#  *[0-9]" | tail -n 25
if [ "$PART" = fresh ]; then
  python3 - "$OUT" <<'PY'
import glob, os, sys
# per fresh process: host us per launch of the compiled loop and of the C program, median of 20 loops and
# the process's first loop
got = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "fresh_[01]_*.txt")), key=lambda f: int(f[:-4].rsplit("_", 1)[1])):
    pin = os.path.basename(f).split("_")[1]
    for line in open(f):
        w = line.split()
        if len(w) == 6 and w[0] in ("compiled", "C") and w[1].isdigit():
            got.setdefault((pin, w[0], int(w[1])), []).append((float(w[2]), float(w[5])))
print(f"{'pin':3} {'path':9} {'size':>6} {'median of each process (us/launch)':<52} {'first loop of each process'}")
for (pin, path, size), v in sorted(got.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
    print(f"{pin:3} {path:9} {size:>6} {' '.join(f'{m:.1f}' for m, _ in v):<52} {' '.join(f'{x:.1f}' for _, x in v)}")
PY
  # one archive beside the log: the device returns only so many files
  tar czf /tmp/launchcost.tgz -C $OUT . && find $OUT -mindepth 1 ! -name launchcost.log -delete \
    && mv /tmp/launchcost.tgz $OUT/
  exit 0
fi
cat $OUT/launchcost_table.txt
python3 - "$OUT" <<'PY'
import json, glob, os, sys
print(f"{'run':10} {'launch':10} {'size':>6} {'time oop':>9} {'time ip':>9} {'host oop':>9} {'cycle':>5}")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "lc_*.json"))):
    doc = json.load(open(f))
    launch = (doc["meta"].get("bench") or {}).get("launch") or "?"
    for r in doc["rows"]:
        t = lambda p: r[p].get("time", r[p].get("cpu_time"))
        print(f"{os.path.basename(f)[3:-5]:10} {launch[:10]:10} {r['size']:>6} {t('out_of_place'):>9.2f} "
              f"{t('in_place'):>9.2f} {r['host_us']['out_of_place']:>9.2f} {r['cycle']:>5}")
PY
