#!/usr/bin/env bash
# stress on GPUs. Two calls, each under the 10-minute limit:
#   tests/gpu/stress.sh scoped  1000 rounds --init scoped --skew-max 0 (nccl) plus a bare-cycle baseline;
#                               killed (-9) at 530 s if unfinished: run it again and it resumes the journal
#                               (kept in /tmp while the machine is warm; if it went cold, copy the returned
#                               scoped.jsonl to results/stress-h200x2-scoped.jsonl first: it seeds the resume)
#   tests/gpu/stress.sh rest    nccl stock 30 rounds; nccl stock --check-ids; torch all modes with the
#                               seed's 3 s delay; NVTX ranges recorded through CUPTI  (~4-5 min)
# Logs, journals and summaries land in $OUT; the table comes last.
set -u
source tests/gpu/env.sh
part=${1:-rest}
J=/tmp/nccl_bench_stress  # outlives a call while the machine stays warm, for --resume
mkdir -p "$J"
S="python3 -m stress"
runlog() {  # name, seconds, command...: run, keep its exit code, log to $OUT/<name>.log
  local name=$1 secs=$2; shift 2
  echo "== $name: $*"
  timeout -s KILL "$secs" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$rc" > "$OUT/$name.rc"
  grep -vE "^\s*$" "$OUT/$name.log" | tail -n 25
  echo "exit $rc"
}

case "$part" in
scoped)
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  # a journal brought back from an earlier call (machine gone cold) seeds the resume
  seed=results/stress-h200x2-scoped.jsonl
  [ ! -s "$J/scoped.jsonl" ] && [ -s "$seed" ] && cp "$seed" "$J/scoped.jsonl"
  resume=""; [ -s "$J/scoped.jsonl" ] && resume="--resume"
  runlog scoped 530 $S --backend nccl --init scoped --rounds 1000 --skew-max 0 --baseline 10 \
    --journal "$J/scoped.jsonl" $resume
  cp "$J"/scoped* "$OUT"/ 2>/dev/null; gzip -kf "$OUT/scoped.jsonl" 2>/dev/null
  grep -c '"type":"round"' "$J/scoped.jsonl" | sed 's/^/rounds in journal: /'
  ;;
rest)
  runlog stock 180 $S --backend nccl --init stock --rounds 30 --journal "$OUT/stock.jsonl"
  runlog check_ids 90 $S --backend nccl --init stock --rounds 20 --check-ids --journal "$OUT/check_ids.jsonl"
  # the seed's scenario: one root 3 s late (round 1: rank 1, round 2: rank 0), PyTorch's own init
  runlog torch 180 $S --backend torch --init all --rounds 3 --skew-max 0 --timeout 8 \
    --inject delay:1:1:3 --inject delay:2:0:3 --journal "$OUT/torch.jsonl"
  runlog nvtx 100 python3 -m torch.distributed.run --standalone --nproc-per-node 2 tests/gpu/stress_nvtx.py \
    "$OUT" --backend nccl --init stock --rounds 4 --journal "$OUT/nvtx.jsonl"
  for r in 0 1; do echo "-- nvtx rank $r"; cat "$OUT/nvtx-rank$r.json" 2>/dev/null | head -40; done
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
  ;;
*) echo "usage: tests/gpu/stress.sh scoped|rest" >&2; exit 2 ;;
esac

python3 - "$OUT" "$J" <<'PY'
import json, pathlib, sys
out, j = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
print(f"\n{'run':10} {'exit':>4} {'mode':8} {'rounds':>6} {'ok':>5} {'hang':>4} {'err':>4} {'wrong':>5} {'stale':>5} "
      f"{'diagnosed':>9} {'1st fail':>8} {'init p50':>8} {'rounds/s':>8}  baseline")
for name in ("scoped", "stock", "check_ids", "torch", "nvtx"):
    path = out / f"{name}.jsonl"
    if not path.exists():
        continue
    rc = (out / f"{name}.rc").read_text().strip() if (out / f"{name}.rc").exists() else "?"
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    rows = [r for r in lines if r.get("type") == "round"]
    base = [r for r in lines if r.get("type") == "baseline"]
    for mode in dict.fromkeys(r["mode"] for r in rows):
        rs = [r for r in rows if r["mode"] == mode]
        n = {v: sum(r["verdict"] == v for r in rs) for v in ("ok", "hang", "error", "wrong", "stale")}
        bad = [r for r in rs if r["verdict"] != "ok"]
        diag = sum(bool(r.get("diagnosis")) for r in bad)
        inits = sorted(r["init_ms"] for r in rs if r.get("init_ms") is not None)
        secs = sum(r.get("seconds") or 0 for r in rs)
        rate = len(rs) / secs if secs else 0
        b = ""
        if base and name == "scoped":
            last = base[-1]
            b = ", ".join(f"{k[:-6]} {last[k]:.2f}/s ({100 * rate / last[k]:.0f}%)"
                          for k in ("init_destroy_per_s", "init_verify_destroy_per_s") if last.get(k))
        print(f"{name:10} {rc:>4} {mode:8} {len(rs):6d} {n['ok']:5d} {n['hang']:4d} {n['error']:4d} {n['wrong']:5d} "
              f"{n['stale']:5d} {diag:4d}/{len(bad):<4d} {str(bad[0]['round']) if bad else '-':>8} "
              f"{inits[len(inits) // 2] if inits else 0:8.1f} {rate:8.2f}  {b}")
    for r in [r for r in rows if r["verdict"] != "ok"][:2]:
        print(f"   e.g. [{r['mode']} {r['round']}] {r['verdict']}: {r['diagnosis'][:230]}")
PY
