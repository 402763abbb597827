"""Run-to-run comparison: a ratio per size (bench), per phase (init) or per mode (stress), and a
verdict only where the difference is larger than what the runs themselves say is noise.

The rules (the report prints them next to the tables):

- bench: ratio = busbw of this run / busbw of the compared run, per (collective, algo, init
  mode, eager|graph, placement, size); where a busbw is 0 (tiny sizes) the inverse time ratio.
  The spread of a series is the noise of its ratios from one size to the next, a robust
  estimate that a shift common to all sizes does not inflate: sigma = 1.4826 * median
  |d log ratio| / sqrt(2) over neighbouring sizes (both placements pooled). A size is
  flagged when |log ratio| > max(log 1.03, 3 sigma), and never when the difference is within the
  point's own spread across its -N cycles in either run (max - min over median): that is noise.
- init and stress latencies: ratio of medians (this / compared); the spread is the larger
  interquartile range of the two runs, relative to its median, never below 3 %; flagged when
  the medians differ by more than that.
- failures (init, stress): flagged when the failure rates differ by more than two standard
  errors of a binomial with the pooled rate.
- asv: ratio of values; flagged beyond 5 % with the two interquartile ranges apart, as the history
  judges two commits (history.two_runs).
"""
from __future__ import annotations

import math

from nccl_bench.core import stats

FLOOR = 0.03  # relative: differences below 3 % are never flagged
RULES = {
    "bench": "ratio = busbw this run / compared run per size; spread = run-to-run noise of the series' ratios "
             "from one size to the next (1.4826 x median |d log ratio| / sqrt 2, both placements pooled); "
             f"flagged when |log ratio| > max(log {1 + FLOOR:g}, 3 x spread), and never within a point's own "
             "spread across its -N cycles (max - min over median, either run)",
    "init": "ratio of medians per mode and phase (time: above 1 is slower); spread = the larger relative "
            f"interquartile range of the two runs, at least {FLOOR:.0%}; flagged when beyond it. Failure rates: "
            "flagged beyond 2 binomial standard errors",
    "stress": "rounds/s and init time: ratio of medians of per-round values; spread = the larger relative "
              f"interquartile range, at least {FLOOR:.0%}. Failure rates: flagged beyond 2 binomial standard errors",
    "asv": "ratio of values (asv's median of the samples); flagged when beyond 5 % and the interquartile ranges of "
           "the two do not overlap ('within noise' when they do), as the history judges two commits; direction "
           "from the name (busbw, per_s: higher is better; otherwise lower is better)",
}


def verdict(log_ratio: float, threshold_log: float, higher_is_better: bool) -> str:
    if abs(log_ratio) <= threshold_log:
        return "no change"
    better = log_ratio > 0 if higher_is_better else log_ratio < 0
    return "improvement" if better else "regression"


# --- bench ------------------------------------------------------------------------------------
def _bench_points(results) -> dict[tuple, dict]:
    """(collective, series, place, size) -> the place's measurements; later files win on duplicates."""
    from nccl_bench.report.plot import series_key, series_label
    out = {}
    for res in results:
        for row in res.rows:
            series = series_label(series_key(res, row))
            for place in ("out_of_place", "in_place"):
                spread = (row.get("spread_pct") or {}).get(place)
                out[(row["collective"], series, place, row["size"])] = {**row[place], "spread": spread}
    return out


def _log_ratio(new: dict, base: dict) -> float | None:
    if new["bus_bw"] > 0 and base["bus_bw"] > 0:
        return math.log(new["bus_bw"] / base["bus_bw"])
    if new["time"] > 0 and base["time"] > 0:
        return math.log(base["time"] / new["time"])
    return None


def series_sigma(logs_by_place: list[list[float]]) -> float:
    """Robust noise of log ratios from one size to the next; 0 with fewer than two neighbours."""
    deltas = [abs(b - a) for logs in logs_by_place for a, b in zip(logs, logs[1:])]
    med = stats.percentile(deltas, 0.5)
    return 0.0 if med is None else 1.4826 * med / math.sqrt(2)


def bench(new, base) -> list[dict]:
    """One row per (collective, series, place, size) present in both runs."""
    a, b = _bench_points(new), _bench_points(base)
    common = sorted(set(a) & set(b), key=lambda k: (k[0], k[1], k[2], k[3]))
    rows, by_series = [], {}
    for key in common:
        lr = _log_ratio(a[key], b[key])
        if lr is not None:
            by_series.setdefault(key[:2], {}).setdefault(key[2], []).append((key[3], lr))
    for (coll, series), places in by_series.items():
        sigma = series_sigma([[lr for _, lr in pts] for pts in places.values()])
        thr = max(math.log1p(FLOOR), 3 * sigma)  # 3 sigma: about 1 in 400 sizes flagged by noise alone
        for place, pts in places.items():
            for size, lr in pts:
                base_v, new_v = b[(coll, series, place, size)], a[(coll, series, place, size)]
                own = max((v for v in (new_v.get("spread"), base_v.get("spread")) if v), default=0.0)
                point_thr = max(thr, math.log1p(own / 100))  # within a point's own -N spread: noise
                rows.append({"collective": coll, "series": series, "place": place, "size": size,
                             "base_busbw": base_v["bus_bw"], "new_busbw": new_v["bus_bw"],
                             "ratio": math.exp(lr), "threshold": math.expm1(point_thr), "sigma": sigma,
                             "spread_pct": own or None, "verdict": verdict(lr, point_thr, higher_is_better=True)})
    return rows


def bench_series(rows: list[dict]) -> list[dict]:
    """Per (collective, series): sizes compared, median ratio, spread, counts, and one verdict."""
    out = []
    for key in dict.fromkeys((r["collective"], r["series"]) for r in rows):
        mine = [r for r in rows if (r["collective"], r["series"]) == key]
        reg = sum(r["verdict"] == "regression" for r in mine)
        imp = sum(r["verdict"] == "improvement" for r in mine)
        word = ("mixed" if reg and imp else "regression" if reg else "improvement" if imp else "no change")
        out.append({"collective": key[0], "series": key[1], "points": len(mine),
                    "median_ratio": stats.percentile([r["ratio"] for r in mine], 0.5),
                    "threshold": mine[0]["threshold"], "regressions": reg, "improvements": imp, "verdict": word})
    return out


# --- latencies (init, stress) -----------------------------------------------------------------
def spread(values: list[float]) -> float | None:
    """Interquartile range relative to the median; None without samples."""
    med = stats.percentile(values, 0.5)
    if med is None or med <= 0:
        return None
    return (stats.percentile(values, 0.75) - stats.percentile(values, 0.25)) / med


def medians(group: str, item: str, new: list[float], base: list[float], higher_is_better: bool = False) -> dict:
    """Ratio of medians (this / compared) with the IQR rule."""
    row = {"group": group, "item": item, "n_new": len(new), "n_base": len(base), "new": stats.percentile(new, 0.5),
           "base": stats.percentile(base, 0.5), "ratio": None, "threshold": None, "verdict": "n/a"}
    if not row["new"] or not row["base"]:
        return row
    thr = max([FLOOR] + [s for s in (spread(new), spread(base)) if s is not None])
    lr = math.log(row["new"] / row["base"])
    row.update(ratio=row["new"] / row["base"], threshold=thr,
               verdict=verdict(lr, math.log1p(thr), higher_is_better))
    return row


def failure_rates(group: str, new_failed: int, new_n: int, base_failed: int, base_n: int) -> dict:
    """Failure rates; flagged beyond two binomial standard errors of the pooled rate."""
    row = {"group": group, "item": "failure rate", "n_new": new_n, "n_base": base_n,
           "new": new_failed / new_n if new_n else None, "base": base_failed / base_n if base_n else None,
           "ratio": None, "threshold": None, "verdict": "n/a"}
    if not new_n or not base_n:
        return row
    p = (new_failed + base_failed) / (new_n + base_n)
    se = math.sqrt(p * (1 - p) * (1 / new_n + 1 / base_n))
    diff = row["new"] - row["base"]
    row["threshold"] = 2 * se
    row["ratio"] = row["new"] / row["base"] if row["base"] else (None if row["new"] else 1.0)
    row["verdict"] = "no change" if abs(diff) <= 2 * se else ("regression" if diff > 0 else "improvement")
    return row


def setup(res) -> str:
    """What a run's init or stress rows compare within, as bench's points compare within their series: its backend
    and ranks (8 GPUs' inits are no baseline for 4's, nor gloo's for NCCL's)."""
    return f"{res.backend or '?'} x{res.nranks or '?'}"


def _per_mode(new, base, keep=lambda r: True):
    """(group, this run's rows, the compared run's rows) for each mode that both runs have on one setup; the group
    is the mode, with its setup where the runs hold more than one."""
    setups = sorted({setup(r) for r in new} & {setup(r) for r in base})
    for where in setups:
        mine, theirs = [r for r in new if setup(r) == where], [r for r in base if setup(r) == where]
        for mode in dict.fromkeys(r["mode"] for res in mine + theirs for r in res.rows):
            a, b = ([r for res in results for r in res.rows if r["mode"] == mode and keep(r)]
                    for results in (mine, theirs))
            if a and b:
                yield (mode if len(setups) == 1 else f"{mode} ({where})"), a, b


def init(new, base) -> list[dict]:
    from nccl_bench.records.init import phases_in
    rows = []
    for mode, a, b in _per_mode(new, base, keep=lambda r: not r["warmup"]):
        for label, key in phases_in(a + b):
            rows.append(medians(mode, label, [r[key] for r in a if r["outcome"] == "ok" and r.get(key) is not None],
                                [r[key] for r in b if r["outcome"] == "ok" and r.get(key) is not None]))
        rows.append(failure_rates(mode, sum(r["outcome"] != "ok" for r in a), len(a),
                                  sum(r["outcome"] != "ok" for r in b), len(b)))
    return rows


def stress(new, base) -> list[dict]:
    rows = []
    for mode, a, b in _per_mode(new, base):
        rate = lambda rs: [1 / r["seconds"] for r in rs if r.get("seconds")]  # noqa: E731
        rows.append(medians(mode, "rounds/s", rate(a), rate(b), higher_is_better=True))
        ok_init = lambda rs: [r["init_ms"] for r in rs if r["verdict"] == "ok" and r.get("init_ms")]  # noqa: E731
        rows.append(medians(mode, "init ms (ok rounds)", ok_init(a), ok_init(b)))
        rows.append(failure_rates(mode, sum(r["verdict"] != "ok" for r in a), len(a),
                                  sum(r["verdict"] != "ok" for r in b), len(b)))
    return rows


def _point(row: dict) -> tuple[float, tuple | None]:
    from nccl_bench.report import history
    return row["value"], history.interval(row)


def asv(new, base) -> list[dict]:
    """Two asv results judged as the history judges two commits (nccl_bench.report.history.two_runs)."""
    from nccl_bench.report import history
    def index(results):
        return {(r["benchmark"], r["params"]): r for res in results for r in res.rows if r["value"] is not None}
    a, b = index(new), index(base)
    rows = []
    for key in sorted(set(a) & set(b)):
        n, o = a[key], b[key]
        higher = "busbw" in key[0] or "per_s" in key[0]
        suite, _, method = key[0].rpartition(".")  # "init.InitLatency", "track_median"
        row = {"group": suite or key[0], "item": method + (f" ({key[1]})" if key[1] else ""),
               "new": n["value"], "base": o["value"], "ratio": None,
               "threshold": None, "verdict": "n/a"}
        if n["value"] and o["value"] and n["value"] > 0 and o["value"] > 0:
            row.update(ratio=n["value"] / o["value"], threshold=history.THRESHOLD,
                       verdict=history.two_runs(_point(n), _point(o), higher))
        rows.append(row)
    return rows


COMPARABLE = ("bench", "init", "stress", "asv")


def in_common(mine, others) -> str | None:
    """Why `--compare` would compare nothing (no kind both sides hold, or no point in common), or None."""
    def holds(results) -> str:
        kinds: dict[str, list] = {}
        for r in results:
            kinds.setdefault(r.kind, []).append(r)
        return "; ".join(f"{k}" + (f" ({', '.join(sorted({row['collective'] for r in rs for row in r.rows}))})"
                                   if k == "bench" else f" ({', '.join(sorted({setup(r) for r in rs}))})"
                                   if k in ("init", "stress") else "") for k, rs in kinds.items()) or "nothing"
    for kind in COMPARABLE:
        a, b = [r for r in mine if r.kind == kind], [r for r in others if r.kind == kind]
        if a and b and globals()[kind](a, b):
            return None
    a, b = [r for r in mine if r.kind == "bench"], [r for r in others if r.kind == "bench"]
    if a and b:  # both hold bench rows, none alike: say how they differ
        return (f"--compare: nothing in common to compare: this run holds {_bench_holds(a)}; the compared run "
                f"{_bench_holds(b)} (a point compares with one of the same collective, series and size)")
    return f"--compare: nothing in common to compare: this run holds {holds(mine)}, the compared run {holds(others)}"


def _bench_holds(results) -> str:
    """Each collective's series (backend, GPUs, type, algorithm...) and sizes, in words: what --compare matches."""
    from nccl_bench.report.plot import size_label
    seen: dict[tuple, list[int]] = {}
    for (coll, series, _, size) in _bench_points(results):
        seen.setdefault((coll, series), []).append(size)
    parts = [f"{coll} [{series}] {size_label(min(sizes))}-{size_label(max(sizes))}"
             for (coll, series), sizes in sorted(seen.items())]
    machines = sorted({_machine(r.meta) for r in results})
    return (f"{', '.join(machines)}: " + "; ".join(parts[:4])
            + (f" and {len(parts) - 4} more" if len(parts) > 4 else ""))


def _machine(meta: dict) -> str:
    """Where a bench ran, from its metadata: the backend, and the GPUs' count and name (or the CPU)."""
    gpus = [g.get("name") for g in meta.get("gpus") or [] if isinstance(g, dict)]
    where = f"{len(gpus)} x {gpus[0]}" if gpus else "the CPU"
    return f"{meta.get('backend') or '?'} on {where}"
