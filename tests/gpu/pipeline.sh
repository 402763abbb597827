#!/usr/bin/env bash
# Destroys behind the rounds, on every GPU of the machine (1 or more), in one device call:
#   rate   serial (--destroys-in-flight 0, SERIAL_ROUNDS, default 120) then pipelined (default K,
#          PIPE_ROUNDS, default 500) scoped stress with --skew-max 0; rounds/s of each and the ratio
#          (acceptance: >= 3, 0 failures); then `init --init scoped` for its destroy line
#   stock  STOCK_ROUNDS (default 100) stock rounds pipelined: every failure diagnosed
#   kill   a pipelined run of KILL_ROUNDS (default 150) whose launcher gets kill -9 mid-run, then --resume:
#          every round exactly once, no worker left, no compute process on any GPU; and a second
#          writer (--resume while the first runs) refused with exit 2, the holder named
# usage: tests/gpu/pipeline.sh [rate] [stock] [kill]   (default: all three, ~8 min on 2 x H200; for
#        PIPE_ROUNDS=1000 run `rate` alone and `stock kill` in a second call). Logs and journals in $OUT.
set -u
source tests/gpu/env.sh
NG=$(nvidia-smi -L | wc -l)
parts=${*:-rate stock kill}
B=${BACKEND:-nccl}  # BACKEND=gloo: a dry run of this script on a CPU machine
S="python3 -m stress --backend $B --nranks $NG"
gpu_procs() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c . ; }
step() {  # name, seconds, command...: run bounded, keep exit code and wall time, log to $OUT/<name>.log
  local name=$1 secs=$2; shift 2
  echo "== $name: $*"
  local t0=$(date +%s.%N)
  timeout -s KILL "$secs" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$rc" > "$OUT/$name.rc"
  python3 -c "print(round($(date +%s.%N) - $t0, 1))" > "$OUT/$name.wall"
  grep -E "^stress:|^destroy:|^\[|^scoped |^stock |^error|^failed" "$OUT/$name.log" | head -n 12
  echo "exit $rc, $(cat "$OUT/$name.wall") s, GPU processes after: $(gpu_procs)"
}
echo "GPUs: $NG"; nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader

for part in $parts; do case "$part" in
rate)
  sr=${SERIAL_ROUNDS:-120}; pr=${PIPE_ROUNDS:-500}
  step serial $((60 + sr * 6 / 5)) $S --init scoped --skew-max 0 --rounds "$sr" --destroys-in-flight 0 \
    --journal "$OUT/serial.jsonl"
  step pipelined $((60 + pr * 2 / 5)) $S --init scoped --skew-max 0 --rounds "$pr" --journal "$OUT/pipelined.jsonl"
  step init 90 python3 -m nccl_bench init --backend $B --nranks "$NG" --init scoped --rounds 5 --warmup 1 \
    --timeout 10 --json "$OUT/init.json"
  ;;
stock)
  step stock 240 $S --init stock --rounds "${STOCK_ROUNDS:-100}" --journal "$OUT/stock.jsonl"
  ;;
kill)
  n=${KILL_ROUNDS:-150}
  echo "== kill: $S --init scoped --rounds $n, kill -9 of the launcher after $((n / 3)) journaled rounds"
  $S --init scoped --rounds "$n" --journal "$OUT/kill.jsonl" > "$OUT/kill.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do
    c=$(grep -c '"type":"round"' "$OUT/kill.jsonl" 2>/dev/null)
    [ "${c:-0}" -ge $((n / 3)) ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  # one writer per journal: a second writer (here with --resume) while the first runs is refused
  timeout 120 $S --init scoped --rounds "$n" --journal "$OUT/kill.jsonl" --resume > "$OUT/second.log" 2>&1
  echo "$?" > "$OUT/second.rc"; echo "second writer: exit $(cat "$OUT/second.rc"): $(tail -n 1 "$OUT/second.log")"
  kill -9 $pid; wait $pid 2>/dev/null
  before=$(grep -c '"type":"round"' "$OUT/kill.jsonl")
  for _ in $(seq 100); do  # workers die with their launcher (PR_SET_PDEATHSIG; ranks fork from a forkserver)
    left=$(( $(pgrep -f "$OUT/kill.jsonl" | grep -c .) + $(pgrep -f "from multiprocessing.forkserver import main" | grep -c .) ))
    [ "$left" = 0 ] && [ "$(gpu_procs)" = 0 ] && break; sleep 0.2
  done
  echo "killed after $before journaled rounds; workers left: $left; GPU processes: $(gpu_procs)"
  echo "{\"journaled\": $before, \"workers_left\": $left, \"gpu_procs\": $(gpu_procs)}" > "$OUT/kill.after"
  step resume 240 $S --init scoped --rounds "$n" --journal "$OUT/kill.jsonl" --resume
  ;;
*) echo "usage: tests/gpu/pipeline.sh [rate] [stock] [kill]" >&2; exit 2 ;;
esac; done
echo "GPU processes at the end: $(gpu_procs)"

python3 - "$OUT" "${KILL_ROUNDS:-150}" <<'PY'
import json, statistics, sys
from pathlib import Path
out, kill_rounds = Path(sys.argv[1]), int(sys.argv[2])

def lines(p):
    got = []
    for line in p.read_text().splitlines():
        try:
            got.append(json.loads(line))
        except ValueError:
            pass
    return got

def field(name, ext, default="?"):
    p = out / f"{name}.{ext}"
    return p.read_text().strip() if p.exists() else default

print(f"\n{'run':10} {'exit':>4} {'K':>2} {'rounds':>6} {'ok':>5} {'failed':>6} {'diagnosed':>9} {'rounds/s':>8} "
      f"{'destroy p50 ms':>14} {'wall s':>7}")
rate = {}
for name in ("serial", "pipelined", "stock", "kill"):
    p = out / f"{name}.jsonl"
    if not p.exists():
        continue
    doc = lines(p)
    rows = [r for r in doc if r.get("type") == "round"]
    k = doc[0].get("options", {}).get("destroys_in_flight", "?") if doc else "?"
    bad = [r for r in rows if r["verdict"] != "ok"]
    diag = sum(bool(r.get("diagnosis")) for r in bad)
    secs = sum(r.get("seconds") or 0 for r in rows)
    rate[name] = len(rows) / secs if secs else 0.0
    downs = [x["teardown_s"] for r in rows for x in r["ranks"] if x and x["verdict"] == "ok" and x.get("teardown_s")]
    p50 = f"{statistics.median(downs) * 1e3:.0f}" if downs else "-"
    rc = field("resume" if name == "kill" else name, "rc")
    wall = field("resume" if name == "kill" else name, "wall")
    print(f"{name:10} {rc:>4} {k!s:>2} {len(rows):6d} {len(rows) - len(bad):5d} {len(bad):6d} {diag:4d}/{len(bad):<4d} "
          f"{rate[name]:8.2f} {p50:>14} {wall:>7}")
    for r in bad[:2]:
        print(f"   e.g. [{r['mode']} {r['round']}] {r['verdict']}: {(r.get('diagnosis') or '')[:200]}")
if rate.get("serial") and rate.get("pipelined"):
    ratio = rate["pipelined"] / rate["serial"]
    print(f"pipelined / serial rounds/s: {ratio:.2f} ({'>= 3: PASS' if ratio >= 3 else 'below 3: FAIL'})")
if (out / "kill.jsonl").exists():
    rows = [r for r in lines(out / "kill.jsonl") if r.get("type") == "round"]
    after = json.loads(field("kill", "after", "{}"))
    once = sorted(r["round"] for r in rows) == list(range(kill_rounds))
    print(f"kill -9 after {after.get('journaled')} journaled rounds; workers left {after.get('workers_left')}, "
          f"GPU processes {after.get('gpu_procs')}; after --resume {len(rows)} rounds, every round exactly once: "
          f"{'yes' if once else 'NO'}")
    second = (out / "second.log").read_text().strip().splitlines()[-1:] if (out / "second.log").exists() else [""]
    refused = field("second", "rc") == "2" and "is being written by pid" in second[0]
    print(f"second writer while the first ran: exit {field('second', 'rc')} "
          f"({'refused, holder named: PASS' if refused else 'FAIL'}): {second[0][:160]}")
for line in field("init", "log", "").splitlines():
    if line.startswith("destroy:"):
        print("init " + line)
PY
