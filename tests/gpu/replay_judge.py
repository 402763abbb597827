"""replay on GPUs, judged from its result files: every row of 1 MiB or more within 0.8-1.25 x the
job's own time, 0 wrong values; one table per file, then a short summary.

The job's own time: a profiler trace's per-call time once the call's last rank had started it (ready);
a Flight Recorder dump has only whole durations, which include each call's wait for its late peer. A
dump's row outside the band is judged again against the ready time of the same call in the same job's
profiler trace (its replay file among the arguments), and says so; across nodes the trace has no ready time
(several clocks), and its whole time over the profiled steps stands in.
usage: python3 tests/gpu/replay_judge.py REPLAY.json..."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nccl_bench import records  # noqa: E402

LO, HI, MiB = 0.8, 1.25, 1 << 20
docs = {path: records.load(path) for path in sys.argv[1:]}
# (collective, bytes, dtype) -> (the job's time in a profiler trace's replay, what it is): its ready time; across
# nodes (traces from several clocks: no ready time) its whole time, over the profiled steady steps only, where
# a dump's durations also hold the warm-up steps and each call's wait for its late peer
ready = {}
for doc in docs.values():
    for r in doc.rows:
        key = (r["collective"], r["bytes"], r["dtype"])
        if r.get("trace_ready_us"):
            ready[key] = (r["trace_ready_us"], "the profiler's ready time")
        elif r.get("trace_time_us") and doc.meta["replay"]["source"] == "profiler trace":
            ready.setdefault(key, (r["trace_time_us"], "the profiler's whole time (several nodes: no ready time)"))
ok = True
t = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
for path, doc in docs.items():
    rows, seq = doc.rows, doc.meta["sequence"]
    print(f"== {path}: backend {doc.backend}, source {doc.meta['replay']['source']}, "
          f"{len(rows)} rows, skipped {len(doc.meta['replay']['skipped'])}")
    print(f"{'collective':15s} {'bytes':>11s} {'dtype':9s} {'calls':>5s} {'here_us':>9s} {'job_us':>9s} "
          f"{'ready_us':>9s} {'ovl%':>5s} {'x job':>6s}  verdict")
    big = 0
    for r in rows:
        x, why = r["ratio"], r.get("ratio_of")
        if r["bytes"] >= MiB:
            big += 1
            if x is not None and not LO <= x <= HI and (r["collective"], r["bytes"], r["dtype"]) in ready:
                job, why = ready[(r["collective"], r["bytes"], r["dtype"])]
                x = r["time_us"] / job
            band = "-" if x is None else ("ok" if LO <= x <= HI else "OUT")
            ok &= band == "ok"
        else:
            band = "(< 1 MiB)"
        print(f"{r['collective']:15s} {r['bytes']:11d} {r['dtype']:9s} {r['calls']:5d} {t(r['time_us']):>9s} "
              f"{t(r['trace_time_us']):>9s} {t(r.get('trace_ready_us')):>9s} {t(r.get('trace_overlap_pct')):>5s} "
              f"{t(x):>6s}  {band} vs {why}")
    wrong = sum(r["nwrong"] for r in rows)
    ok &= wrong == 0 and big > 0
    print(f"sequence: here {seq['here_median_us']:.0f} us, job {seq['trace_us'] or 0:.0f} us; wrong {wrong}; "
          f"rows >= 1 MiB: {big}")
print("REPLAY GPU ACCEPTANCE:", "PASS" if ok else "FAIL")
