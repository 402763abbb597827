#!/usr/bin/env bash
# Fault injection on the nccl backend: crash (init), crash in the collective under
# --max-restarts 1 (elastic restart + resume), skip-collective, corrupt, stale-key. Each is a short
# run (4 rounds, 3 s deadline, fault in round 1 or 2); after each, no process may hold a GPU.
# Logs and journals land in $OUT; the table comes last. About 2-3 minutes.
set -u
source tests/gpu/env.sh
S="python3 -m stress --backend nccl --rounds 4 --timeout 3 --skew-max 0"
runlog() {  # name, seconds, command...: run, keep its exit code and who holds the GPUs afterwards
  local name=$1 secs=$2; shift 2
  echo "== $name: $*"
  local t0=$SECONDS
  timeout -s KILL "$secs" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$rc $((SECONDS - t0))" > "$OUT/$name.rc"
  sleep 1  # the driver reaps its workers before it returns; give the driver a moment to be gone too
  nvidia-smi --query-compute-apps=pid --format=csv,noheader > "$OUT/$name.gpu" 2>&1
  grep -vE "^\s*$" "$OUT/$name.log" | tail -n 12
  echo "exit $rc; GPU processes after: $(grep -c . "$OUT/$name.gpu")"
}

nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
runlog crash 120 $S --init scoped --inject crash@1:1 --journal "$OUT/crash.jsonl"
runlog crash-restart 150 $S --init scoped --inject crash-collective@1:1 --max-restarts 1 \
  --journal "$OUT/crash-restart.jsonl"
runlog skip-collective 120 $S --init scoped --inject skip-collective@1:1 --journal "$OUT/skip-collective.jsonl"
runlog corrupt 120 $S --init scoped --inject corrupt@1:1 --journal "$OUT/corrupt.jsonl"
runlog stale-key 150 $S --init stock --inject stale-key@2:1 --journal "$OUT/stale-key.jsonl"
echo "== GPUs at the end"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv

python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"\n{'kind':16} {'exit':>4} {'wall s':>6} {'round':>5} {'verdict':8} {'category':18} {'detect s':>8} "
      f"{'rounds':>6} {'restarts':>8} {'GPUs free':>9}  diagnosis")
for name in ("crash", "crash-restart", "skip-collective", "corrupt", "stale-key"):
    path = out / f"{name}.jsonl"
    rc, wall = ((out / f"{name}.rc").read_text().split() + ["?", "?"])[:2] if (out / f"{name}.rc").exists() else ("?", "?")
    free = "yes" if (out / f"{name}.gpu").exists() and not (out / f"{name}.gpu").read_text().strip() else "NO"
    lines = []
    for line in (path.read_text().splitlines() if path.exists() else []):
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    rows = [r for r in lines if r.get("type") == "round"]
    hit = next((r for r in rows if r.get("injected")), None)
    restarts = sum(1 for r in lines if r.get("type") == "resume" and r.get("restart"))
    if hit is None:
        print(f"{name:16} {rc:>4} {wall[:6]:>6} {'-':>5} {'(none)':8}")
        continue
    ranks = [x for x in hit["ranks"] if x]
    saw = [x for x in ranks if x["verdict"] != "ok"] or ranks  # the ranks that detected it
    detect = max([x.get("elapsed_s") or 0 for x in saw] + [0])
    print(f"{name:16} {rc:>4} {wall[:6]:>6} {hit['round']:5d} {hit['verdict']:8} {str(hit['category']):18} "
          f"{detect:8.2f} {len(rows):6d} {restarts:8d} {free:>9}  {(hit['diagnosis'] or '')[:200]}")
    others = [r for r in rows if r is not hit and r["verdict"] != "ok"]
    for r in others[:2]:
        print(f"   other failure: [{r['mode']} {r['round']}] {r['verdict']}: {(r['diagnosis'] or '')[:160]}")
PY
