"""trust.sh's judge: ratios of medians over the interleaved repetitions, one table (issue 26).
usage: trust_judge.py OUT_DIR REPS"""
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nccl_bench.report import readers  # noqa: E402

out, reps = Path(sys.argv[1]), int(sys.argv[2])


def rows(name):
    p = out / name
    try:
        return readers.load(str(p)).rows if p.exists() else []
    except Exception as e:  # a run that failed leaves a file the judge says it could not read
        print(f"# {name}: unreadable ({type(e).__name__}: {e})")
        return []


def point(rs, coll, size, place="out_of_place", key="time"):
    for r in rs:
        if r["collective"] == coll and r["size"] == size:
            return r[place].get(key) if isinstance(r[place], dict) else None
    return None


def med(values):
    xs = [v for v in values if v]
    return statistics.median(xs) if xs else None


def fmt(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"


table = []  # (check, detail, ours, theirs, ratio, target, ok)


def add(check, detail, ours, theirs, target, good):
    ratio = ours / theirs if ours and theirs else None
    table.append((check, detail, fmt(ours), fmt(theirs), fmt(ratio), target,
                  "-" if ratio is None else ("PASS" if good(ratio) else "MISS")))


reps_ = range(1, reps + 1)
colls = sorted({r["collective"] for i in reps_ for r in rows(f"first_mid_{i}.json")})
for c in colls:
    for size, first in ((8, "first_a8"), (8 << 20, "first_a8m")):
        a = med(point(rows(f"{first}_{i}.json"), c, size) for i in reps_)
        m = med(point(rows(f"first_mid_{i}.json"), c, size) for i in reps_)
        add("first size (us)", f"{c} {size} B first / mid-sweep", a, m, "<= 1.10", lambda x: x <= 1.10)
for c in ("gather", "hypercube"):
    ours = [rows(f"p2p_ours_{i}.json") for i in reps_]
    theirs = [rows(f"p2p_theirs_{c}_{i}.json") for i in reps_]
    sizes = sorted({r["size"] for rs in ours for r in rs if r["collective"] == c})
    for place in ("out_of_place", "in_place"):
        for size in sizes:
            o = med(point(rs, c, size, place, "bus_bw") for rs in ours)
            t = med(point(rs, c, size, place, "bus_bw") for rs in theirs)
            add("p2p busbw (GB/s)", f"{c} {size >> 20} MiB {place.replace('_', '-')}", o, t, ">= 0.99",
                lambda x: x >= 0.99)
ours = [rows(f"periter_ours_{i}.json") for i in reps_]
theirs = [rows(f"periter_theirs_{i}.json") for i in reps_]
for size in sorted({r["size"] for rs in ours for r in rs}):
    for q, target, good in (("p50_us", "<= 1.05", lambda x: x <= 1.05), ("p99_us", "<= 1.25", lambda x: x <= 1.25)):
        o = med(point(rs, "all_reduce", size, "out_of_place_per_iter", q) for rs in ours)
        t = med(point(rs, "all_reduce", size, "out_of_place_per_iter", q) for rs in theirs)
        add(f"-I {q[:3]} (us)", f"all_reduce {size} B", o, t, target, good)
ours = [rows(f"torch_ours_{i}.json") for i in reps_]
plain = []  # {"in_place": {size: us}, "out_of_place": {...}}; an older file is in place only
for i in reps_:
    p = out / f"torch_plain_{i}.json"
    doc = json.loads(p.read_text()) if p.exists() else {}
    doc = doc if "in_place" in doc else {"in_place": doc, "out_of_place": {}}
    plain.append({place: {int(k): v for k, v in d.items()} for place, d in doc.items()})
for size in sorted({r["size"] for rs in ours for r in rs}):
    for place, how in (("in_place", "dist.all_reduce(x)"), ("out_of_place", "y.copy_(x); dist.all_reduce(y)")):
        o = med(point(rs, "all_reduce", size, place) for rs in ours)
        t = med(p[place].get(size) for p in plain)
        add("torch backend (us/op)", f"all_reduce {size} B {place.replace('_', '-')} / {how}", o, t, "<= 1.10",
            lambda x: x <= 1.10)

inproc = [json.loads(p.read_text()) for p in (out / f"torch_inproc_{i}.json" for i in reps_) if p.exists()]
for size in sorted({int(k) for d in inproc for k in d}):  # every repetition's values pooled
    o = med(v for d in inproc for v in d.get(str(size), {}).get("ours", []))
    t = med(v for d in inproc for v in d.get(str(size), {}).get("plain", []))
    add("torch backend (us/op)", f"all_reduce {size} B in-place, one process / dist.all_reduce(x)", o, t,
        "<= 1.10", lambda x: x <= 1.10)

w = [max(len(str(r[k])) for r in table + [("check", "detail", "ours", "theirs", "ratio", "target", "")])
     for k in range(7)]
head = ("check", "detail", "ours", "ref", "ratio", "target", "")
print("  ".join(h.ljust(w[k]) for k, h in enumerate(head)))
for r in table:
    print("  ".join(str(c).ljust(w[k]) for k, c in enumerate(r)))
miss = sum(r[6] == "MISS" for r in table)
wrong = sum((r[p].get("nwrong") or 0) for f in out.glob("*.json")
            if not any(k in f.name for k in ("theirs", "plain", "inproc", "trust", "locate")) for r in rows(f.name)
            for p in ("out_of_place", "in_place") if isinstance(r.get(p), dict))
print(f"# wrong values in our runs: {wrong}")
print(f"# {len(table)} points, {sum(r[6] == 'PASS' for r in table)} pass, {miss} miss; ratios of medians over {reps} "
      "interleaved repetitions (ours, theirs, ours, theirs ...); ref = mid-sweep for 'first size', nccl-tests "
      "2.19.6 for p2p and -I, a plain dist.all_reduce loop for torch")
json.dump([dict(zip(("check", "detail", "ours", "ref", "ratio", "target", "verdict"), r)) for r in table],
          open(out / "trust.json", "w"), indent=1)
