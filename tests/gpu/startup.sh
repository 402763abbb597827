#!/usr/bin/env bash
# Issue 59's GPU acceptance on this machine's GPUs, in two calls of under 9 minutes each (4 GPUs: carry .whl,
# .nccltests and .before, a checkout of the commit before: `git archive 840b07d | tar -x -C .before`):
#   bash tests/gpu/startup.sh 1    # the first row (5 alternations, three launches), the full sweep, torchfree.py
#   bash tests/gpu/startup.sh 2    # smoke, init, stress and accept, each beside .before's
# Logs and JSON under $OUT; the tables last.
set -u
cd "$(dirname "$0")/../.."
source tests/gpu/env.sh
part=${1:-1}
before=$([ -d .before ] && echo .before || true)
if [ "$part" = 1 ]; then
  STARTUP_REPS=5 python3 tests/gpu/startup.py first > "$OUT/part1_first.log" 2>&1
  python3 tests/gpu/startup.py sweep > "$OUT/part1_sweep.log" 2>&1
  python3 tests/gpu/torchfree.py $before > "$OUT/part1_torchfree.log" 2>&1
  cat "$OUT/startup_first_table.txt"; tail -n 1 "$OUT/startup_sweep_table.txt"
  sed -n '/^| check/,$p' "$OUT/part1_torchfree.log"
else
  python3 tests/gpu/startup.py commands $before > "$OUT/part2_commands.log" 2>&1
  cat "$OUT/startup_commands_table.txt"
fi
