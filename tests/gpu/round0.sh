#!/usr/bin/env bash
# Issue 68's GPU acceptance on every GPU of this machine (its acceptance needs 4: nvidia-h100-x4 or nvidia-h200-x4),
# in four calls of under 9 minutes each, back to back on one machine (about 1,520 s in all on 4 x H200). Carry .whl (nccl4py, nvtx; .whl/mpi/mpich)
# and .nccltests (nccl-tests 2.19.6); for part 0, .before too
# (`git archive d120bea nccl_bench stress pyproject.toml | tar -x -C .before`):
#   bash tests/gpu/round0.sh 1   # on a fresh machine: the first bench after setup beside nccl-tests' first, the
#                                # start-up ratios (both launchers; STARTUP_BEFORE=.before times that tree too) and
#                                # each rank's start-up milestones; then release.py's one-command checks, as many
#                                # as the call has time for (RELEASE=0: none)
#   bash tests/gpu/round0.sh 2   # the README's main job (stress --rounds 1000, every GPU); CHECKS="..." adds
#                                # what part 1 left LATER
#   bash tests/gpu/round0.sh 3   # an FSDP2 replay and torch-free (about 160 s on 4 x H200), and what is still
#                                # LATER: CHECKS="..." bash tests/gpu/round0.sh 3
#   bash tests/gpu/round0.sh 4   # nccl-tests beside us (trust.sh CALL=alone): about 500 s, a call of its own
#   bash tests/gpu/round0.sh 0   # round 0 beside d120bea (tests/gpu/round0.py)
# Each part leaves $OUT/partN.tgz (every log and JSON) and $OUT/partN_table.txt, its tables, printed last.
set -u
cd "$(dirname "$0")/../.."
part=${1:-1}
if [ "$part" = 1 ] && [ ! -f /tmp/.nb-setup ]; then  # before setup: each GPU's first CUDA context, then its second
  mkdir -p "${OUT:-/tmp/out}" && OUT=${OUT:-/tmp/out} python3 tests/gpu/startup.py contexts > /tmp/contexts.log 2>&1
  # nccl-tests built before setup, so that our first run comes right after setup, as `bin/setup && ...` runs
  # it: a build between them left the GPUs idle 45 s, and after an idle minute either tool's first run is slower
  bash tests/gpu/nccltests.sh > /tmp/nccltests_build.log 2>&1
fi
source tests/gpu/env.sh
before=$([ -d .before ] && echo "$PWD/.before" || true)
W=/tmp/round0_part$part && rm -rf $W && mkdir -p $W  # everything here; $OUT gets its tarball and the table
case "$part" in
0)
  OUT=$W python3 tests/gpu/round0.py $before > $W/round0.log 2>&1
  sed -n '/^tree /,$p' $W/round0.log ;;
1)  # the machine is fresh from setup (env.sh): the first run of each tool comes first, ours before theirs
  OUT=$W STARTUP_REPS=3 python3 tests/gpu/startup.py first > $W/first.log 2>&1
  OUT=$W STARTUP_REPS=3 python3 tests/gpu/startup.py timeline > $W/timeline.log 2>&1
  [ "${RELEASE:-1}" = 1 ] && python3 tests/gpu/release.py accept smoke stale init same-group bench-every bench-split bench-cuda bench-register \
    stress-corrupt stress-destroys stress-one locate --out $W/release --budget $((520 - SECONDS)) > $W/release.log 2>&1
  { cat $OUT/startup_contexts.txt $W/startup_first_table.txt $W/startup_timeline.txt 2>/dev/null
    sed -n '/^check /,$p' $W/release.log; } ;;
2)
  python3 tests/gpu/release.py main-job ${CHECKS:-} --out $W/release --budget 530 > $W/release.log 2>&1
  sed -n '/^check /,$p' $W/release.log ;;
3)
  checks="${CHECKS:-replay-fsdp bench-torch-free}"
  python3 tests/gpu/release.py $checks --out $W/release --budget 520 > $W/release.log 2>&1
  sed -n '/^check /,$p' $W/release.log ;;
*)
  python3 tests/gpu/release.py beside-nccl-tests --out $W/release --budget 570 > $W/release.log 2>&1
  sed -n '/^check /,$p' $W/release.log ;;
esac > $OUT/part${part}_table.txt
tar -czf $OUT/part$part.tgz -C /tmp round0_part$part
cat $OUT/part${part}_table.txt
