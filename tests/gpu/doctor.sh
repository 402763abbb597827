#!/usr/bin/env bash
# doctor on nccl and torch ranks, counters before/after judged
# by the h200x2 profile, an impossible profile failing by name, JUnit validated against an XSD.
# Run from the repository root: bash tests/gpu/doctor.sh   (about 1-2 minutes)
set -u
source tests/gpu/env.sh
L=$OUT/doctor.log
S=$OUT/doctor_summary.txt
: > $S
step() {  # step NAME EXPECTED_EXIT CMD...: run, log, remember the exit code
  local name=$1 want=$2; shift 2
  echo "== $name: $*"
  timeout 180 "$@"; local rc=$?
  echo "exit $rc (expected $want)"
  echo "$name|$rc|$want|$([ "$rc" = "$want" ] && echo ok || echo MISMATCH)" >> $S  # the block below is a subshell
}
{
python3 -m pip list 2>/dev/null | grep -iE "^(torch|nvidia-ml-py|nccl4py|lxml|pytest) "
python3 - <<'EOF' > $OUT/counters_before.json
import json; from nccl_bench.core import gpucounters; print(json.dumps(gpucounters.read_counters()))
EOF
echo "counters before: $(cat $OUT/counters_before.json)"

step "doctor nccl x2" 0 python3 -m nccl_bench doctor --backend nccl --json $OUT/doctor_nccl.json --junit $OUT/doctor_nccl.xml
step "doctor default (torch ranks, one per GPU)" 0 python3 -m nccl_bench doctor --xid-window 2
step "doctor NCCL_ALGO=Ring warns only" 0 env NCCL_ALGO=Ring python3 -m nccl_bench doctor --backend nccl --xid-window 0
step "doctor bad --junit folder" 2 python3 -m nccl_bench doctor --junit /no/such/dir/x.xml

python3 - <<'EOF' > $OUT/counters_after.json
import json; from nccl_bench.core import gpucounters; print(json.dumps(gpucounters.read_counters()))
EOF
echo "counters after: $(cat $OUT/counters_after.json)"

# Measurements at the anchors' level (no bench here: the lead wires bench/init/stress), real counters.
python3 - "$OUT" <<'EOF'
import json, sys
from nccl_bench.records import profiles
out = sys.argv[1]
p = profiles.load("h200x2")
m = {"busbw": [{"collective": f.collective, "bytes": f.bytes, "busbw": round(f.min_GBps / 0.95, 1)} for f in p.busbw],
     "latency_us_8B": 12.7, "init_ms_p50": 36.7, "wrong": 0, "stress_failures": 0,
     "counters_before": json.load(open(f"{out}/counters_before.json")),
     "counters_after": json.load(open(f"{out}/counters_after.json"))}
json.dump(m, open(f"{out}/measurements.json", "w"), indent=1)
imp = json.load(open(profiles.BUILTIN_DIR / "h200x2.json"))
imp["name"] = "h200x2-impossible"
imp["busbw_min_GBps"][2]["min"] = 9999.0  # all_reduce 1 GiB: beyond NV18's 478 GB/s
json.dump(imp, open(f"{out}/impossible.json", "w"), indent=1)
bad = dict(imp); bad.pop("init_max_ms")
json.dump(bad, open(f"{out}/missing_field.json", "w"))
EOF
step "judge h200x2 (anchor numbers, real counters)" 0 python3 -m nccl_bench.accept.verdicts $OUT/measurements.json --profile h200x2 --junit $OUT/accept_ok.xml
step "judge impossible profile" 1 python3 -m nccl_bench.accept.verdicts $OUT/measurements.json --profile $OUT/impossible.json --junit $OUT/accept_fail.xml
step "judge profile missing a field" 2 python3 -m nccl_bench.accept.verdicts $OUT/measurements.json --profile $OUT/missing_field.json
step "judge unknown profile" 2 python3 -m nccl_bench.accept.verdicts $OUT/measurements.json --profile nosuchx8
python3 -c "from nccl_bench.accept import selection; from nccl_bench.accept import topology; print('auto-chosen profile:', selection.choose(None, 'nccl', selection.detected_gpu_names(), topology.read()).name)"

# JUnit files written above, validated against the XSD in tests/test_junit.py (lxml is on this image).
python3 - "$OUT" <<'EOF'
import glob, sys
sys.path.insert(0, "tests")
from lxml import etree
from test_junit import XSD
schema = etree.XMLSchema(etree.fromstring(XSD.encode()))
for f in sorted(glob.glob(f"{sys.argv[1]}/*.xml")):
    ok = schema.validate(etree.parse(f))
    print(f"junit {f}: {'valid' if ok else 'INVALID ' + str(schema.error_log)}")
EOF
step "pytest doctor/profiles/junit on GPU" 0 python3 -m pytest -q -p no:cacheprovider tests/test_doctor.py tests/test_profiles.py tests/test_junit.py
} 2>&1 | tee $L | grep -vE "^\s*$" | tail -n 150
echo
echo "== summary (full log: $L)"
printf "%-48s %-5s %-8s %s\n" step exit expected result
while IFS='|' read -r n rc want res; do printf "%-48s %-5s %-8s %s\n" "$n" "$rc" "$want" "$res"; done < $S
