"""Judge a tests/gpu/latency.sh run: our small-message times against nccl-tests of the same call.

usage: python3 tests/gpu/latency_judge.py OUT_DIR
Every point is the median of its cycles and repetitions on both sides (latency.sh alternates ours and
nccl-tests: ours in OUT_DIR/repK/, theirs' sections repeated in one log; bench_judge reads both so). Targets: eager time
<= 1.10 x nccl-tests; -G time <= nccl-tests' + 0.5 us. Prints one row per collective, series and
size: ours (compiled loop), ours (Python loop), nccl-tests, the ratio, our host us per launch and
nccl-tests' -C 1 cpu time where it ran.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_judge import nccl_tests, ours  # noqa: E402

RUNS = {"allreduce": "eager", "others": "eager", "graph": "graph"}


def main(out: Path) -> int:
    theirs = nccl_tests(out / "nccltests.log", "mpi")
    cpu = {k[2]: v["oop_us"] for k, v in theirs.items() if k[:2] == ("all_reduce", "cputime")}
    mine = {tag: {} for tag in ("c", "py")}
    for tag in mine:
        for run, kind in RUNS.items():
            for r in ours(out, f"lat_{tag}_{run}.json"):
                series = "graph" if kind == "graph" else r["algo"] if r["collective"] == "all_reduce" else "default"
                mine[tag][(r["collective"], series, r["size"])] = r
    print(f"{'collective':15s} {'series':8s} {'size':>6s} {'ours':>7s} {'py':>7s} {'nccl-t':>7s} {'ratio':>6s}"
          f" {'host':>6s} {'nt -C':>6s}  verdict   (oop us, medians of cycles)")
    misses = judged = wrong = 0
    for key, r in sorted(mine["c"].items()):
        coll, series, size = key
        v = r["out_of_place"]["time"]
        py = mine["py"].get(key, {}).get("out_of_place", {}).get("time")
        ref = theirs.get(key, {}).get("oop_us")
        wrong += sum((r[p]["nwrong"] or 0) for p in ("out_of_place", "in_place"))
        ok = None if ref is None else (v <= ref + 0.5 if series == "graph" else v <= 1.10 * ref)
        judged += ok is not None
        misses += ok is False
        host = (r.get("host_us") or {}).get("out_of_place")
        f = lambda x: f"{x:7.2f}" if x is not None else f"{'-':>7s}"  # noqa: E731
        print(f"{coll:15s} {series:8s} {size:6d} {f(v)} {f(py)} {f(ref)} "
              f"{(f'{v / ref:6.3f}' if ref else '     -')} {f(host)[1:]} "
              f"{f(cpu.get(size) if key[:2] == ('all_reduce', 'ring') else None)[1:]}  "
              f"{ {True: 'ok', False: 'MISS', None: 'n/a'}[ok]}")
    print(f"wrong values: {wrong}; targets missed: {misses} of {judged}"
          + ("" if theirs else "; nccl-tests did not run in this call"))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
