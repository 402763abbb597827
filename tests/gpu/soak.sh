#!/usr/bin/env bash
# Stress as a soak on GPUs. Parts, each one call under the 10-minute limit:
#   rate       ours (python -m stress --skew-max 0 --destroys-in-flight K) then the plain loop
#              (tests/gpu/plain_churn.py, the same K), alternated REPS (3) times for K in KS ("4 8 16"),
#              ROUNDS (200) each; plus the plain loop with NCCL's nonblocking config at K=8
#   churn      the plain nccl4py loop for CHURN (8000) rounds, RSS sampled: NCCL's own growth per init
#   leakcheck  init --leak-check INITS (5000) on NCCL: a bare loop, slopes per resource
#   soak       SOAK (10000) scoped rounds, default skew, leak watch every 100; killed at 540 s and resumed
#              by the next call of this part (SOAK_S: its time limit, 540 s) (the journal comes back as soak.jsonl.gz; put it at
#              results/<machine>/soak/soak.jsonl.gz and it seeds the resume)
# Everything lands in one archive ($OUT/<part>.tgz: only 8 files come back); the table comes last.
set -u
source tests/gpu/env.sh
part=${1:-rate}
W=/tmp/soak; mkdir -p "$W"
N=$(nvidia-smi -L | wc -l)
REPS=${REPS:-3}; KS=${KS:-"4 8 16"}; ROUNDS=${ROUNDS:-200}; INITS=${INITS:-5000}; SOAK=${SOAK:-10000}
PY="python3"; [ "$N" -gt 1 ] && PY="python3 -m torch.distributed.run --standalone --nproc-per-node $N"
nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
python3 -c "import torch, nccl.core; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"

case "$part" in
rate)
  rm -f "$W"/ours_* "$W"/plain*  # a warm machine keeps /tmp: every number here is this call's
  for rep in $(seq 1 "$REPS"); do
    for k in $KS; do
      timeout -s KILL 200 python3 -m stress --backend nccl --rounds "$ROUNDS" --skew-max 0 --destroys-in-flight "$k" \
        --leak-every 0 --journal "$W/ours_k${k}_r${rep}.jsonl" > "$W/ours_k${k}_r${rep}.log" 2>&1
      echo "ours k=$k rep=$rep exit $?: $(grep -E '^scoped|^destroy' "$W/ours_k${k}_r${rep}.log" | tr -s ' ' | cut -c1-150 | tr '\n' ' ')"
      timeout -s KILL 200 $PY tests/gpu/plain_churn.py "$ROUNDS" "$k" "$W/plain_k${k}_r${rep}.json" \
        > "$W/plain_k${k}_r${rep}.log" 2>&1
      echo "$(tail -1 "$W/plain_k${k}_r${rep}.log")"
    done
    timeout -s KILL 200 $PY tests/gpu/plain_churn.py "$ROUNDS" 8 "$W/plainnb_k8_r${rep}.json" nonblocking \
      > "$W/plainnb_k8_r${rep}.log" 2>&1
    echo "$(tail -1 "$W/plainnb_k8_r${rep}.log")"
  done
  ;;
bisect)  # where does a bare NCCL init/destroy loop grow? the plain loop, then ours, BISECT rounds each
  B=${BISECT:-1500}
  for flags in blocking nonblocking nonblocking,setdevice; do
    timeout -s KILL 200 $PY tests/gpu/plain_churn.py "$B" 8 "$W/bisect_$flags.json" "$flags" > "$W/bisect_$flags.log" 2>&1
    tail -1 "$W/bisect_$flags.log"
  done
  timeout -s KILL 200 python3 -m nccl_bench init --backend nccl --leak-check "$B" --leak-every 50 \
    --json "$W/bisect_ours.json" > "$W/bisect_ours.log" 2>&1
  grep -E "rss_bytes|gpu_bytes|inits in" "$W/bisect_ours.log"
  ;;
churn)  # NCCL's own growth at soak length: the plain nccl4py loop, CHURN (8000) rounds, CHURN_K (16) in flight,
         # nonblocking with set_device in the destroy thread (as our backend and reaper do), RSS every 50 rounds
  timeout -s KILL 560 $PY tests/gpu/plain_churn.py "${CHURN:-8000}" "${CHURN_K:-16}" "$W/churn.json" nonblocking,setdevice \
    > "$W/churn.log" 2>&1
  echo "exit $?"; tail -3 "$W/churn.log"; cat "$W/churn.json"; echo
  ;;
leakcheck)
  timeout -s KILL 560 python3 -m nccl_bench init --backend nccl --leak-check "$INITS" --json "$W/leakcheck.json" \
    > "$W/leakcheck.log" 2>&1
  echo "exit $?"; tail -25 "$W/leakcheck.log"
  ;;
soak)
  seed=$(ls results/*/soak/soak.jsonl.gz 2>/dev/null | head -1)
  [ ! -s "$W/soak.jsonl" ] && [ -n "$seed" ] && gunzip -c "$seed" > "$W/soak.jsonl"
  resume=""; [ -s "$W/soak.jsonl" ] && resume="--resume"
  timeout -s TERM "${SOAK_S:-540}" python3 -m stress --backend nccl --init scoped --rounds "$SOAK" --leak-every 100 \
    --journal "$W/soak.jsonl" $resume > "$W/soak_$(date +%s).log" 2>&1
  echo "exit $?"; tail -15 "$(ls -t $W/soak_*.log | head -1)"
  echo "rounds in journal: $(grep -c '"type":"round"' "$W/soak.jsonl")"
  gzip -kf "$W/soak.jsonl"; cp "$W/soak.jsonl.gz" "$OUT/"
  ;;
*) echo "usage: tests/gpu/soak.sh rate|bisect|churn|leakcheck|soak" >&2; exit 2 ;;
esac

tar czf "$OUT/$part.tgz" --exclude='soak.jsonl' --exclude='soak.jsonl.gz' -C /tmp soak
python3 - "$W" "$part" <<'PY'
import json, pathlib, statistics, sys
from nccl_bench import records
w, part = pathlib.Path(sys.argv[1]), sys.argv[2]
if part != "rate":
    sys.exit(0)
def ours(p):
    return records.load(str(p)).rows[0]["rounds_per_s"]
print(f"\n{'K':>3} {'ours rounds/s (reps)':32} {'plain rounds/s (reps)':32} {'ours/plain (medians)':>20}")
for k in sorted({int(p.name.split('_k')[1].split('_')[0]) for p in w.glob('plain_k*.json')}):
    o = [ours(p) for p in sorted(w.glob(f"ours_k{k}_r*-summary.json"))]
    t = [json.loads(p.read_text())["rounds_per_s"] for p in sorted(w.glob(f"plain_k{k}_r*.json"))]
    r = statistics.median(o) / statistics.median(t) if o and t else float("nan")
    print(f"{k:>3} {' '.join(f'{v:.2f}' for v in o):32} {' '.join(f'{v:.2f}' for v in t):32} {r:>20.2f}")
nb = [json.loads(p.read_text()) for p in sorted(w.glob("plainnb_k8_r*.json"))]
if nb:
    print("plain, nonblocking config, K=8: " + " ".join(f"{d['rounds_per_s']:.2f}/s (destroy {d['destroy_median_s']*1e3:.0f} ms)" for d in nb))
PY
