"""The replay zoo on GPUs, judged from its result files (tests/gpu/replay_zoo.sh): per zoo job and form, the calls
left out, the rows within 0.8-1.25 x the job's ready time, the whole sequence against the job's (1.15 x); then the
small calls, replay's time per call over bench's at the same size (the ratio of medians over the alternated
runs; 1.10 x at most). A short table last.
usage: python3 tests/gpu/replay_zoo_judge.py FOLDER"""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nccl_bench import records  # noqa: E402

LO, HI, SEQ, SMALL = 0.8, 1.25, 1.15, 1.10
folder = Path(sys.argv[1])
f = lambda v, p=2: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
print(f"{'zoo job':14s} {'calls':>5s} {'left':>4s} {'stop':>4s} {'rows':>4s} {'in band':>7s} "
      f"{'x ready: min..max':>18s} "
      f"{'seq x':>6s} {'wrong':>5s} {'no ready':>5s}")
def key(r):
    return r["collective"], r["bytes"], r["dtype"], tuple(r["group_ranks"])


for path in sorted(folder.glob("zoo_*.json")):
    doc = records.load(str(path))
    meta, rows = doc.meta["replay"], doc.rows
    # a dump holds whole durations only (each call's wait for its late peer, the job's launch gaps): its rows are
    # judged against the ready time of the same call in the same job's profiler trace, as the trace's replay is
    twin = path.with_name(path.name.replace("_fr.json", "_kineto.json"))
    if twin != path and twin.exists():
        ready = {key(r): r["trace_ready_us"] for r in records.load(str(twin)).rows if r.get("trace_ready_us")}
        for r in rows:
            if key(r) in ready and r.get("ready_us"):
                theirs = ready[key(r)]
                r["ratio"], r["ratio_of"], r["trace_ready_us"] = r["ready_us"] / theirs, "trace's ready", theirs
    # only against a ready time: a row whose job recorded none (a dump's calls with no trace twin) is not judged,
    # and is counted
    READY = ("ready", "trace's ready", "trace_ready")
    judged = [r["ratio"] for r in rows if r.get("ratio") is not None and r.get("ratio_of") in READY]
    unjudged = sum(1 for r in rows if r.get("ratio_of") not in READY)
    inband = sum(LO <= x <= HI for x in judged)
    calls = sum(len(v) for v in meta["ran"].values())
    seq = doc.meta["sequence"].get("ratio")
    if twin != path and twin.exists():  # a dump's sequence: its calls' ready times against the trace's, call by call
        both = [r for r in rows if r.get("ratio_of") == "trace's ready"]
        seq = (sum(r["calls"] * r["ready_us"] for r in both) / sum(r["calls"] * r["trace_ready_us"] for r in both)
               if both else None)
    print(f"{path.stem[4:]:14s} {calls:5d} {len(meta['skipped']):4d} {len(meta['stopped']):4d} {len(rows):4d} "
          f"{inband:3d}/{len(judged):<3d} {f(min(judged, default=None)):>8s}..{f(max(judged, default=None)):<8s} "
          f"{f(seq):>6s} {sum(r['nwrong'] for r in rows):5d} {unjudged:5d}")
    for r in rows:
        if r.get("ratio") is not None and r.get("ratio_of") in READY and not LO <= r["ratio"] <= HI:
            print(f"    out of band ({r['ratio_of']}): {r['collective']} {r['bytes']} B {r['dtype']} group "
                  f"{r['group_ranks']}: here {f(r['time_us'], 1)} us, kernels ready {f(r.get('ready_us'), 1)} us; "
                  f"job ready {f(r.get('trace_ready_us'), 1)} us, whole "
                  f"{f(r.get('trace_time_us'), 1)} us, overlap {f(r.get('trace_overlap_pct'), 0)} %")

replay: dict = {}
bench: dict = {}
for path in sorted(folder.glob("small_replay_*.json")):
    for r in records.load(str(path)).rows:
        replay.setdefault((r["collective"], r["bytes"]), []).append(r["time_us"])
for path in sorted(folder.glob("small_bench_*.json")):
    for r in records.load(str(path)).rows:
        bench.setdefault((r["collective"], r["size"]), []).append(r["out_of_place"]["time"])
print()
print(f"{'small call':24s} {'replay us (runs)':>26s} {'bench us (runs)':>26s} {'x bench':>7s} verdict")
ok = True
for key in sorted(replay, key=lambda k: (k[0], k[1])):
    here, there = replay[key], bench.get(key, [])
    x = statistics.median(here) / statistics.median(there) if there else None
    ok &= x is not None and x <= SMALL
    print(f"{key[0] + ' ' + str(key[1]) + ' B':24s} {' '.join(f(v, 1) for v in here):>26s} "
          f"{' '.join(f(v, 1) for v in there):>26s} {f(x):>7s} {'ok' if x and x <= SMALL else 'OVER'}")
print("small calls within 1.10 x bench:", "yes" if ok else "no")
ops = {op: [records.load(str(p)).rows[0]["out_of_place"]["time"] for p in sorted(folder.glob(f"int64_{op}_*.json"))]
       for op in ("sum", "max")}
if all(ops.values()):
    print(f"all_reduce 616 B int64, bench us: sum {' '.join(f(v, 1) for v in ops['sum'])}, max "
          f"{' '.join(f(v, 1) for v in ops['max'])}: max over sum "
          f"{statistics.median(ops['max']) / statistics.median(ops['sum']):.2f}")
