#!/usr/bin/env bash
# pytorch#178473's own scenario on the torch backend, one call, any number of GPUs >= 2:
#   1. same-group stock at the seed's settings: one process group, each round's communicator on
#      cuda:(rank + round) % GPUs, TORCH_NCCL_RANKS_PER_ROOT=1, before round r >= 1 rank r % GPUs
#      sleeps 3 s; deadline 8 s. Expected on torch 2.11: stale reads, every failure a bounded hang
#      diagnosed "stale ID: rank J used root K's ID from round R".
#   2. same-group scoped (TORCH_NCCL_RANKS_PER_ROOT = world size, the user's workaround): no failure.
#   3. restart stock (a new process group per round on the same store), same delays, for comparison.
#   4. `info --probe`: the one-line verdict; expected "AFFECTED" on torch 2.11.
# About 3-4 minutes on 4 GPUs. Journals, summaries and per-rank library logs in $OUT; a table last.
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
if [ "$NG" -lt 2 ]; then echo "samegroup.sh needs 2 GPUs or more, this machine has $NG"; exit 2; fi
R=$(( NG < 4 ? 4 : (NG > 6 ? 6 : NG) ))  # the seed runs a round per GPU; >= 4: two groups, two stale chances
D=""; for ((r = 1; r < R; r++)); do D="$D --inject delay:$r:$((r % NG)):3"; done
S="python3 -m stress --backend torch --ranks-per-root 1 --rounds $R --skew-max 0 --timeout 8 $D"
runlog() {  # name, seconds, command...: run, keep the exit code, the terminal output in $OUT/<name>.out
  local name=$1 secs=$2; shift 2
  echo "== $name: $*"
  local t0=$SECONDS
  timeout -s KILL "$secs" "$@" > "$OUT/$name.out" 2>&1; local rc=$?
  echo "$rc $((SECONDS - t0))" > "$OUT/$name.rc"
  grep -vE "^\s*$" "$OUT/$name.out" | tail -n 12
  echo "exit $rc after $((SECONDS - t0)) s"
}
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
runlog sg_stock 150 $S --scenario same-group --init stock --journal "$OUT/sg_stock.jsonl"
runlog sg_scoped 90 $S --scenario same-group --init scoped --journal "$OUT/sg_scoped.jsonl"
runlog restart_stock 150 $S --scenario restart --init stock --journal "$OUT/restart_stock.jsonl"
runlog probe 200 python3 -m nccl_bench info --probe --journal "$OUT/probe.jsonl"
echo "-- library lines on the terminal (expected 0):"
cat "$OUT"/*.out | grep -cE "^\[[WEI][0-9]{4} |socket\.cpp|ProcessGroupNCCL\.cpp|NCCL WARN|UserWarning"
echo "-- per-rank logs:"; ls "$OUT"/*.rank*.log 2>/dev/null | head; nvidia-smi --query-compute-apps=pid,used_memory --format=csv

python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"\n{'run':14} {'exit':>4} {'wall s':>6} {'rounds':>6} {'ok':>3} {'hang':>4} {'err':>3} {'stale':>5} "
      f"{'diagnosed':>9} {'worst s':>7} {'deadline':>8}  first failure")
for name in ("sg_stock", "sg_scoped", "restart_stock", "probe"):
    path = out / f"{name}.jsonl"
    rc, wall = ((out / f"{name}.rc").read_text().split() + ["?", "?"])[:2] if (out / f"{name}.rc").exists() else ("?", "?")
    rows = []
    for line in (path.read_text().splitlines() if path.exists() else []):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("type") == "round":
            rows.append(r)
    bad = [r for r in rows if r["verdict"] != "ok"]
    n = {v: sum(r["verdict"] == v for r in rows) for v in ("ok", "hang", "error")}
    stale = sum(bool(r.get("stale")) for r in rows)
    diag = sum(bool(r.get("diagnosis")) for r in bad)
    # each rank's time in a failed round, its injected sleep taken off: bounded by the deadline (+ abort)
    worst = max([x["elapsed_s"] - r["skew_ms"][x["rank"]] / 1e3 for r in bad for x in r["ranks"] if x] or [0])
    timeout = 8.0
    first = f"[{bad[0]['round']}] {bad[0]['diagnosis'][:150]}" if bad else "-"
    print(f"{name:14} {rc:>4} {wall:>6} {len(rows):6d} {n['ok']:3d} {n['hang']:4d} {n['error']:3d} {stale:5d} "
          f"{diag:4d}/{len(bad):<4d} {worst:7.1f} {'ok' if worst < timeout + 12 else 'PAST':>8}  {first}")
probe = out / "probe.out"
if probe.exists():
    lines = [l for l in probe.read_text().splitlines() if l.startswith("pytorch#178473")]
    print("\nprobe verdict:", lines[-1] if lines else "(none: see probe.out)")
PY
