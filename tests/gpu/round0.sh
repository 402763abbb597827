#!/usr/bin/env bash
# Issue 68's GPU acceptance on every GPU of this machine (its acceptance needs 4: nvidia-h100-x4 or nvidia-h200-x4),
# in calls of under 9 minutes each. Carry .whl (nccl4py, nvtx; .whl/mpi/mpich), .nccltests (nccl-tests 2.19.6) and
# .before (`git archive d120bea nccl_bench stress pyproject.toml | tar -x -C .before`):
#   bash tests/gpu/round0.sh 1   # round 0 beside d120bea; the first bench after setup and the start-up ratios
#                                # beside nccl-tests (both launchers); the README's main job and accept
#   bash tests/gpu/round0.sh 2   # on a fresh machine: its first bench beside nccl-tests'; release.py's checks of
#                                # one command (every GPU), in one table
#   bash tests/gpu/round0.sh 3   # release.py's script checks (nccl-tests beside us, torch-free, an FSDP2 replay);
#                                # CHECKS="..." bash tests/gpu/round0.sh 3 for those it left LATER
# Each part leaves $OUT/partN.tgz (every log and JSON) and $OUT/partN_table.txt, its tables, printed last.
set -u
cd "$(dirname "$0")/../.."
source tests/gpu/env.sh
part=${1:-1}
before=$([ -d .before ] && echo "$PWD/.before" || true)
W=/tmp/round0_part$part && rm -rf $W && mkdir -p $W  # everything here; $OUT gets its tarball and the table
case "$part" in
1)
  OUT=$W python3 tests/gpu/round0.py $before > $W/round0.log 2>&1
  OUT=$W STARTUP_REPS=3 python3 tests/gpu/startup.py first > $W/first.log 2>&1
  python3 tests/gpu/release.py main-job accept --out $W/release --budget 300 > $W/release.log 2>&1
  { sed -n '/^tree /,$p' $W/round0.log; cat $W/startup_first_table.txt; sed -n '/^check /,$p' $W/release.log; } ;;
2)  # on a machine fresh from setup (env.sh): its first bench first
  OUT=$W STARTUP_REPS=3 python3 tests/gpu/startup.py own > $W/first.log 2>&1
  python3 tests/gpu/release.py bench-every smoke stale init same-group stress- bench-split bench-cuda \
    bench-register locate --out $W/release --budget 430 > $W/release.log 2>&1
  { cat $W/startup_own_table.txt; sed -n '/^check /,$p' $W/release.log; } ;;
*)  # what part 3 leaves LATER, run part 3 again: it runs only those
  checks="${CHECKS:-replay-fsdp bench-torch-free beside-nccl-tests}"
  python3 tests/gpu/release.py $checks --out $W/release --budget 520 > $W/release.log 2>&1
  sed -n '/^check /,$p' $W/release.log ;;
esac > $OUT/part${part}_table.txt
tar -czf $OUT/part$part.tgz -C /tmp round0_part$part
cat $OUT/part${part}_table.txt
