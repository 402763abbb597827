#!/usr/bin/env bash
# Run several GPU validation scripts in one device call; everything they leave in $OUT
# comes back as one tarball (the device returns at most 8 files) plus each script's log.
# usage: tests/gpu/many.sh "bench.sh" "initbench.sh" "stress.sh scoped" ...
set -u
FINAL=${OUT:-/tmp/out}
export OUT=/tmp/nb_out; mkdir -p "$OUT"
[ -f .snapshot_sha ] && export NCCL_BENCH_GIT_SHA=$(cat .snapshot_sha)
for s in "$@"; do
  echo "######## $s"
  name=${s%% *}; name=${name%.sh}
  bash tests/gpu/$s 2>&1 | tee "$FINAL/${name}_${s##* }.txt" | tail -n 60
done
tar -czf "$FINAL/out.tgz" -C "$OUT" .
ls -la "$OUT" | tail -n 30
