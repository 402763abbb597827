#!/usr/bin/env bash
# report on GPU results, ~3-4 minutes. Real NCCL results in, report and plots out:
#   1. bench all_reduce --algo ring,tree 8 B..1 GiB (x4 steps), twice (run-to-run noise, no change expected)
#   2. bench every collective 8 B..256 MiB (x8 steps), NCCL's default algorithm
#   3. bench all_reduce -G 20 (CUDA graph) 8 B..1 MiB: the latency plot's graph lines
#   4. init: 8 rounds + 1 warm-up, regular,stock,scoped, ranks per root 1, deadline 2 s
#   5. stress: 15 rounds each of scoped and stock, deadline 3 s
#   then: report of everything ($OUT/report/), run 2 vs run 1 ($OUT/report_rerun/), and run 1 with
#   busbw lowered 10 % vs run 1 ($OUT/report_doctored/). Logs in $OUT/report.log; a table comes last.
set -u
source tests/gpu/env.sh
L=$OUT/report.log
R=$OUT/res
rm -rf "$R" "$OUT"/report "$OUT"/report_rerun "$OUT"/report_doctored
mkdir -p "$R"
B="timeout 150 python3 -m nccl_bench bench --backend nccl -n 20 -w 5 -c 1"
{
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
python3 -c "import matplotlib; print('matplotlib', matplotlib.__version__)"
echo "== 1a. all_reduce ring,tree"; $B --collective all_reduce --algo ring,tree -b 8 -e 1G -f 4 -J "$R/bench_allreduce.json"; echo "exit $?"
echo "== 1b. again";                $B --collective all_reduce --algo ring,tree -b 8 -e 1G -f 4 -J "$R/bench_allreduce_rerun.json"; echo "exit $?"
echo "== 2. every collective";      $B --collective all -b 8 -e 256M -f 8 --no-algo-confirm -J "$R/bench_all.json"; echo "exit $?"
echo "== 3. all_reduce -G 20";      $B --collective all_reduce -G 20 -b 8 -e 1M -f 4 --no-algo-confirm -J "$R/bench_graph.json"; echo "exit $?"
echo "== 4. init"
timeout 120 python3 -m nccl_bench init --backend nccl --rounds 8 --warmup 1 --init regular,stock,scoped \
  --ranks-per-root 1 --timeout 2 --json "$R/init_nccl.json"; echo "exit $?"
echo "== 5. stress"
timeout 150 python3 -m stress --backend nccl --init scoped,stock --rounds 15 --timeout 3 --journal "$R/stress_nccl.jsonl"
echo "exit $?"
python3 - "$R" <<'PY'
import json, sys
from pathlib import Path
src = Path(sys.argv[1]) / "bench_allreduce.json"
doc = json.loads(src.read_text())
for row in doc["results"]:  # bench -J: nccl-tests' layout
    for place in ("out_of_place", "in_place"):
        row[place]["bus_bw"] *= 0.9
(src.parent / "bench_allreduce_doctored.json").write_text(json.dumps(doc))
PY
echo "== report: everything"
time python3 -m nccl_bench report "$R"/bench_allreduce.json "$R"/bench_all.json "$R"/bench_graph.json \
  "$R"/init_nccl.json "$R"/stress_nccl.jsonl --out "$OUT/report"; echo "exit $?"
echo "== report: rerun vs run 1"
python3 -m nccl_bench report "$R"/bench_allreduce_rerun.json --compare "$R"/bench_allreduce.json \
  --out "$OUT/report_rerun"; echo "exit $?"
echo "== report: doctored (busbw -10 %) vs run 1"
python3 -m nccl_bench report "$R"/bench_allreduce_doctored.json --compare "$R"/bench_allreduce.json \
  --out "$OUT/report_doctored"; echo "exit $?"
echo "== bad input: one line, exit 2"
: > "$R/empty.json"; python3 -m nccl_bench report "$R/empty.json"; echo "exit $?"
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} > "$L" 2>&1
grep -E "^== |^exit|^report:|^comparison:|^error|FAILED|failed|not confirmed|^real" "$L" | head -60

echo; echo "== summary"
python3 - "$OUT" <<'PY'
import re, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = []
for name in ("report", "report_rerun", "report_doctored"):
    md = out / name / "report.md"
    pngs = sorted(p.name for p in (out / name).glob("*.png")) if md.exists() else []
    text = md.read_text() if md.exists() else ""
    m = re.search(r"Comparison verdict: (\d+) regression\(s\), (\d+) improvement\(s\)", text)
    verdict = f"{m.group(1)} regressions, {m.group(2)} improvements" if m else "-"
    rows.append((name, "yes" if md.exists() else "MISSING", len(pngs), verdict))
print(f"{'report':16s} {'report.md':9s} {'PNGs':>4s}  comparison")
for r in rows:
    print(f"{r[0]:16s} {r[1]:9s} {r[2]:4d}  {r[3]}")
print("expected: report >= 10 PNGs (busbw x7, latency, init-phases, stress timeline); rerun: few or no flags;"
      " doctored: regressions on (nearly) every size")
PY
