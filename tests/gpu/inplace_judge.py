"""inplace.sh's table: the first in-place row against the out-of-place one, per collective, size and cycle, and
what the profiler saw inside the slow loops. usage: inplace_judge.py OUT_DIR"""
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nccl_bench.measure import benchfile  # noqa: E402

out = Path(sys.argv[1])
print(f"{'file':22} {'size':>9} {'cycle':>5} {'oop us':>9} {'ip us':>9} {'ip/oop':>7}  in-place slow iterations (us)")
worst = {}
for f in sorted(out.glob("ip_*.json")):
    coll = f.stem.split("_")[1]
    for r in benchfile.rows(json.loads(f.read_text())):
        o, i = r["out_of_place"]["time"], r["in_place"]["time"]
        it = (r.get("in_place_per_iter") or {}).get("times_us") or []
        p50 = sorted(it)[len(it) // 2] if it else 0
        slow = [f"#{k + 1}:{t:.0f}" for k, t in enumerate(it) if p50 and t > 3 * p50]
        print(f"{f.stem:22} {r['size']:>9} {r['cycle']:>5} {o:>9.1f} {i:>9.1f} {i / o:>7.2f}  {' '.join(slow)}")
        if r["cycle"] == 0 and r["size"] == min(x["size"] for x in benchfile.rows(json.loads(f.read_text()))):
            worst.setdefault(coll, []).append(i / o)
for coll, ratios in worst.items():
    print(f"# {coll}: first in-place row / out-of-place, first size, first cycle: "
          + ", ".join(f"{x:.2f}" for x in ratios) + ("  PASS (<= 1.10)" if max(ratios) <= 1.10 else "  MISS"))
for d in sorted(out.glob("prof_*")):
    for t in sorted(d.glob("trace_rank*.json.gz")):
        events = json.load(gzip.open(t)).get("traceEvents", [])
        kernels = [e for e in events if e.get("cat") == "kernel"]
        first_seen, names = {}, set()
        for e in sorted(kernels, key=lambda e: e["ts"]):
            if e["name"] not in names:
                names.add(e["name"])
                first_seen[e["name"]] = e["ts"]
        calls = sorted((e for e in events if e.get("cat") == "cuda_runtime" and e.get("dur", 0) > 1000),
                       key=lambda e: e["ts"])
        print(f"\n# {d.name} {t.name}: {len(kernels)} kernels, {len(names)} distinct; host calls over 1 ms:")
        t0 = min((e["ts"] for e in events if "ts" in e), default=0)
        for e in calls[:40]:
            after = [n for n, ts in first_seen.items() if e["ts"] <= ts <= e["ts"] + e["dur"] + 50]
            print(f"  +{(e['ts'] - t0) / 1e3:9.1f} ms  {e['name']:28} {e['dur'] / 1e3:8.2f} ms  kernel first seen then: "
                  + (", ".join(a[:80] for a in after) or "-"))
