#!/usr/bin/env bash
# The asv suite on GPUs: the full suite once, as `asv run` does it, then a direct
# `nccl_bench bench` of all_reduce at 1 GiB whose busbw must agree with asv's within 2 %.
#   NCCL_BENCH_COMMIT=$(git rev-parse HEAD) bash tests/gpu/asv.sh     (carry .whl: asv, nccl4py)
# Leaves under $OUT: asv_results.tgz (results/asv in asv's layout: untar it at the repo root
# to commit it), asv_run.log, bench_direct.json, asv.log; prints a short table last.
# asv reads the commit from git: where this folder is a copy, not a checkout (the GPU machine's), the copy is
# committed once in a repository of its own, and asv records that commit (NCCL_BENCH_COMMIT names the real one).
set -u
source tests/gpu/env.sh
L=$OUT/asv.log
if [ ! -e .git ]; then
  command -v git >/dev/null || { echo "asv.sh: asv needs git, and this machine has none"; exit 2; }
  git init -q && git add -A . && git -c user.name=asv -c user.email=asv@localhost commit -qm \
    "copy of ${NCCL_BENCH_COMMIT:-an unknown commit}" || { echo "asv.sh: could not commit the copy"; exit 2; }
fi
git config --global --add safe.directory '*' 2>/dev/null
# asv starts its benchmark processes without PYTHONPATH but with ASV_PYTHONPATH: this tree and the
# carried wheels (bin/setup installs the package; the device only copies it)
export ASV_PYTHONPATH=$PYTHONPATH
rm -rf results/asv html
{
nvidia-smi --query-gpu=index,name,memory.used --format=csv
python3 -m asv --version
echo "== asv run (full suite; plain, as in a fresh clone)"
t0=$(date +%s)
timeout 500 python3 -m asv run -e > $OUT/asv_run.log 2>&1; echo "asv exit $? after $(( $(date +%s) - t0 )) s"
grep -E "Setting up|failed|Traceback|timed out" $OUT/asv_run.log | head -20
echo "== direct bench: all_reduce 1 GiB, ring and tree, init regular (as the asv job)"
timeout 90 python3 -m nccl_bench bench --backend nccl --collective all_reduce --algo ring,tree --init regular \
  --ranks-per-root 1 -b 1G -e 1G -n 20 -w 5 -c 1 -J $OUT/bench_direct.json; echo "bench exit $?"
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} > $L 2>&1
python3 - "$OUT" <<'PY'
import itertools, json, math, sys
from nccl_bench import records
from pathlib import Path
out = Path(sys.argv[1])
files = [f for f in Path("results/asv").glob("*/*.json") if f.name not in ("machine.json",)]
if not files:
    print("no asv results recorded; see asv_run.log"); sys.exit(0)
f = files[0]
doc = json.loads(f.read_text())
cols = doc["result_columns"]

def table(name):
    res, params = doc["results"][name][cols.index("result")], doc["results"][name][cols.index("params")]
    combos = list(itertools.product(*params)) if params else [()]
    res = res if isinstance(res, list) else [res]
    return {tuple(p.strip("'") for p in c): v for c, v in zip(combos, res)}

ran = failed = skipped = 0
for name in doc["results"]:
    for v in table(name).values():
        if v is None: failed += 1
        elif isinstance(v, float) and math.isnan(v): skipped += 1
        else: ran += 1
print(f"machine {doc['params']['machine']}, commit {doc['commit_hash'][:12]}, file {f.name}")
print(f"values: {ran} recorded, {failed} failed, {skipped} skipped (cannot run here)")
t = table("bandwidth.Bandwidth.track_time_per_op"); b = table("bandwidth.Bandwidth.track_busbw")
print("\nall_reduce (asv): algo init size -> time/op, busbw GB/s")
for (coll, algo, init, size), v in t.items():
    if coll == "all_reduce" and v is not None and v == v:
        print(f"  {algo:4s} {init:7s} {size:7s} {v * 1e6:10.2f} us {b[(coll, algo, init, size)]:8.2f}")
print("\nother collectives at 1 GiB (ring, regular): busbw GB/s")
print("  " + ", ".join(f"{c} {v:.1f}" for (c, a, i, s), v in b.items()
                        if c != "all_reduce" and a == "ring" and i == "regular" and s == "1 GiB" and v and v == v))
it = table("init.InitLatency.track_median")
print("\ninit medians (ms): init rpr: " + " ".join(f"{k}" for k in ("exchange", "create", "init", "first_collective", "destroy")))
for init in ("regular", "stock", "scoped"):
    for rpr in ("1", "128"):
        vals = [it.get((init, rpr, ph)) for ph in ("exchange", "create", "init", "first_collective", "destroy")]
        if any(v is not None and v == v for v in vals):
            print(f"  {init:7s} {rpr:>3s}: " + " ".join("fail" if v is None else f"{v * 1e3:.2f}" for v in vals))
st = table("stress.ScopedChurn.track_rounds_per_s")
print(f"\nstress scoped churn: {st.get(())} rounds/s")
direct = out / "bench_direct.json"
verdicts = []
if direct.exists():
    for r in records.load(str(direct)).every_cycle():
        ours = b.get(("all_reduce", r["algo"], "regular", "1 GiB"))
        ref = r["out_of_place"]["bus_bw"]
        if ours is None or ours != ours:
            verdicts.append(f"{r['algo']}: asv has no value"); continue
        diff = 100 * (ours - ref) / ref
        ok = abs(diff) <= 2
        verdicts.append(f"{r['algo']}: asv {ours:.2f} vs bench {ref:.2f} GB/s ({diff:+.2f} %) {'ok' if ok else 'MISS'}")
else:
    verdicts.append("direct bench gave no JSON")
print("\nall_reduce 1 GiB busbw, asv vs direct bench (must agree within 2 %):")
print("\n".join("  " + v for v in verdicts))
PY
tar czf $OUT/asv_results.tgz results/asv 2>/dev/null && echo "packed: asv_results.tgz ($(tar tzf $OUT/asv_results.tgz | wc -l) entries; untar at the repo root)"
grep -E "^asv exit|^bench exit" $L
