#!/usr/bin/env bash
# accept on whatever GPUs the machine has, one call (~5 min on 1-2 GPUs):
#   1. the node's facts and its derived profile (and, on 2 x H200, the derived floors against the built-in
#      h200x2's: within 15 %);
#   2. accept with no flag: a verdict from the built-in profile that fits, else a derived one; exit 0 wanted;
#   3. accept --record-baseline, then accept --profile <that baseline> (a golden node judging itself);
#   4. locate: pairs with 2+ GPUs, the per-GPU check (copies, counters) with one;
#   5. fleet over the accept files (one node: judged against its profile only);
#   6. accept --steps doctor,copies and --steps bench: only those steps' jobs, the others' checks SKIP.
# Logs and JSON under $OUT (one archive: only 8 files come back); the table last. Copy the JSON to
# results/<machine>/accept/.
set -u
source tests/gpu/env.sh
W=/tmp/accept; rm -rf "$W"; mkdir -p "$W"
step() { local name=$1 t0; shift; echo "== $name: $*"; t0=$(date +%s%N)
         timeout -s KILL 400 "$@" > "$W/$name.log" 2>&1; echo $? > "$W/$name.rc"
         echo $(( ($(date +%s%N) - t0) / 1000000 )) > "$W/$name.ms"  # the whole call, as the user waits for it
         grep -E "^accept|^PASS|^FAIL|^locate|^GPU|^SUSPECT|^BAD|^fleet" "$W/$name.log" | head -40; echo "exit $(cat $W/$name.rc)"; }
python3 - "$W" <<'PY'
import json, sys
from nccl_bench.accept import derive; from nccl_bench.records import profiles; from nccl_bench.accept import selection; from nccl_bench.accept import topology
f = topology.read()
print("facts:", f)
p = selection.choose(None, "nccl", selection.detected_gpu_names(), f)
print("chosen:", p.name, p.origin)
d = derive.derive(f)
print("derived:", derive.assumed(f))
json.dump({"facts": f.as_dict(), "chosen": p.name, "derived": profiles.to_doc(d)}, open(f"{sys.argv[1]}/derived.json", "w"), indent=1)
if f.gpus == 2 and "H200" in f.gpu_model:
    h = profiles.load("h200x2")
    mine = {x.collective: x.min_GBps for x in d.busbw}
    for x in h.busbw:
        if x.bytes == derive.SIZE:
            off = abs(mine[x.collective] - x.min_GBps) / x.min_GBps
            print(f"h200x2 {x.collective}: built-in {x.min_GBps}, derived {mine[x.collective]}, {off*100:.1f} % {'OK' if off < 0.15 else 'OVER 15 %'}")
PY
step accept python3 -m nccl_bench accept --json "$W/accept.json" --junit "$W/accept.xml"
step record python3 -m nccl_bench accept --record-baseline "$W/golden.json" --json "$W/accept_record.json"
step golden python3 -m nccl_bench accept --profile "$W/golden.json" --json "$W/accept_golden.json"
step locate python3 -m nccl_bench locate --json "$W/locate.json"
step fleet python3 -m nccl_bench fleet "$W/accept.json" "$W/accept_golden.json" "$W/locate.json" --out "$W/fleet"
step steps_health python3 -m nccl_bench accept --steps doctor,copies --json "$W/accept_steps_health.json"
step steps_bench python3 -m nccl_bench accept --steps bench --json "$W/accept_steps_bench.json"
echo "GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c .)"
tar czf "$OUT/accept.tgz" -C /tmp accept
python3 - "$W" <<'PY'
import json, sys
from pathlib import Path
from nccl_bench import records
w = Path(sys.argv[1])
print(f"\n{'step':12} {'exit':>4} {'s':>6}  verdict")
for name, f in (("accept", "accept.json"), ("record", "accept_record.json"), ("golden", "accept_golden.json"),
                ("locate", "locate.json"), ("steps_health", "accept_steps_health.json"),
                ("steps_bench", "accept_steps_bench.json")):
    rc = (w / f"{name}.rc").read_text().strip() if (w / f"{name}.rc").exists() else "?"
    took = f"{int((w / f'{name}.ms').read_text()) / 1e3:.1f}" if (w / f"{name}.ms").exists() else "?"
    p = w / f
    if not p.exists():
        print(f"{name:12} {rc:>4} {took:>6}  no JSON"); continue
    m = records.load(str(p)).meta
    ran = ",".join(s["step"] for s in m.get("steps", []) if s["status"] == "ran")
    print(f"{name:12} {rc:>4} {took:>6}  {m.get('verdict')} {m.get('profile', '')} {m.get('profile_origin', '')}  ran: {ran}")
PY
