"""The table of tests/gpu/probe38.sh: OUT REPS STARTUP_S. Medians over the repetitions; each value per rep too."""
import glob
import json
import pstats
import statistics
import sys
from pathlib import Path

from nccl_bench.measure import benchfile

out, reps = Path(sys.argv[1]), int(sys.argv[2])


def rows(name):
    p = out / name
    try:
        return benchfile.rows(json.loads(p.read_text())) if p.exists() else []
    except (ValueError, KeyError):
        return []


def get(name, size, place, key="time"):
    for r in rows(name):
        if r["size"] == size and isinstance(r.get(place), dict):
            return r[place].get(key)
    return None


def med(vs):
    vs = [v for v in vs if v is not None]
    return statistics.median(vs) if vs else None


def f(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"


def line(label, ours, theirs, d=2):
    o, t = med(ours), med(theirs)
    ratio = f(o / t) if o and t else "-"
    print(f"{label:<34} ours {f(o, d):>8} [{' '.join(f(v, d) for v in ours)}]  theirs {f(t, d):>8} "
          f"[{' '.join(f(v, d) for v in theirs)}]  ratio {ratio}")


R = range(1, reps + 1)
print(f"# startup: one command, 2 ranks under mpiexec: {sys.argv[3]} s; rank 0's cumulative top:")
prof = out / "startup.0.prof"
if prof.exists():
    st = pstats.Stats(str(prof))
    items = sorted(st.stats.items(), key=lambda kv: -kv[1][3])
    shown = 0
    for (file, lineno, fn), (cc, nc, tt, ct, callers) in items:
        if ct < 0.1 or shown >= 30 or file.startswith(("<", "~")):
            continue
        shown += 1
        print(f"  {ct:6.2f} s  {'/'.join(Path(file).parts[-2:])}:{lineno} {fn}")
first = next((rs[0] for i in R if (rs := rows(f"first_ours_free_{i}.json"))), None)
fsize = first["size"] if first else 8
print(f"\n# first row, {first['collective'] if first else '-'} -b {fsize} alone (us); host = our launch cost per op")
for mode in ("free", "pin"):
    for place in ("out_of_place", "in_place"):
        line(f"{mode} {place}", [get(f"first_ours_{mode}_{i}.json", fsize, place) for i in R],
             [get(f"first_theirs_{mode}_{i}.json", fsize, place) for i in R])
    hosts = [(r.get("host_us") or {}).get("out_of_place") for i in R for r in rows(f"first_ours_{mode}_{i}.json")]
    print(f"  {mode} host_us out of place per rep: {' '.join(f(h) for h in hosts)}")
print("\n# -I 1 -n 1000 all_reduce out of place: p50 / p99 (us)")
sizes = sorted({r["size"] for i in R for r in rows(f"tail_ours_free_{i}.json")})
for mode in ("free", "pin"):
    for size in sizes:
        for q in ("p50_us", "p99_us"):
            line(f"{mode} {size} B {q[:3]}", [get(f"tail_ours_{mode}_{i}.json", size, "out_of_place_per_iter", q)
                                            for i in R],
                 [get(f"tail_theirs_{mode}_{i}.json", size, "out_of_place_per_iter", q) for i in R])
print("\n# busbw (GB/s)")
for tag, size in (("a2a", 128 << 20), ("a2asweep", 128 << 20), ("rs", 1 << 30)):
    for place in ("out_of_place", "in_place"):
        line(f"{tag} {size >> 20} MiB {place}", [get(f"big_ours_{tag}_{i}.json", size, place, "bus_bw") for i in R],
             [get(f"big_theirs_{tag}_{i}.json", size, place, "bus_bw") for i in R])
wrong = sum((r[p].get("nwrong") or 0) for fn in glob.glob(str(out / "*ours*.json")) for r in rows(Path(fn).name)
            for p in ("out_of_place", "in_place") if isinstance(r.get(p), dict))
print(f"# wrong values in our runs: {wrong}")

# the cycles part: per process, each cycle's first row (out of place, in place), ours and theirs
for name in sorted({p.name.split("_", 2)[2].rsplit("_", 1)[0] for p in out.glob("cycles_ours_*.json")}):
    print(f"\n# cycles: {name} alone, -N 3, bound (us; per process: cycle 1 / 2 / 3, out of place | in place)")
    for i in R:
        for tool in ("ours", "theirs"):
            rs = rows(f"cycles_{tool}_{name}_{i}.json")
            cyc = " | ".join(" / ".join(f(r[p]["time"]) for r in rs) for p in ("out_of_place", "in_place"))
            host = " / ".join(f((r.get("host_us") or {}).get("out_of_place")) for r in rs) if tool == "ours" else ""
            print(f"  rep {i} {tool:6} {cyc}" + (f"   host oop {host}" if host else ""))
for p in sorted(out.glob("cyclesI_*.json")):
    rs = rows(p.name)
    if not rs:
        continue
    print(f"\n# {p.name}: cycle 1 out of place, per iteration (us): GPU" + (" / host" if "_ours_" in p.name else ""))
    b = rs[0].get("out_of_place_per_iter") or {}
    gpu, host = b.get("times_us") or [], b.get("host_times_us") or []
    print("  " + " ".join(f(g, 1) + (f"/{f(h, 1)}" if host else "") for g, h in zip(gpu, host or gpu)))
    later = [med((r.get("out_of_place_per_iter") or {}).get("times_us") or []) for r in rs[1:]]
    print(f"  later cycles' medians: {' '.join(f(v, 1) for v in later)}")
