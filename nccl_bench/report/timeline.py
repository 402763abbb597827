"""The stress timeline: init time per round with failures marked, readable from ten rounds to a
soak's hundreds of thousands (rolling percentiles past ROLLING_FROM), with the leak watch's
resource samples beside it."""
from __future__ import annotations

from pathlib import Path

from nccl_bench.core.figures import figure, save
from nccl_bench.report.plot import MODE_PALETTE, VERDICT_STYLE


ROLLING_FROM = 400  # rounds: up to this many, a marker per round; beyond, rolling percentiles


def stress_timeline(result, path: Path) -> Path:
    """Init time per round (slowest rank), modes in turn, failed rounds marked by verdict; beyond
    ROLLING_FROM rounds the ok rounds become a rolling p50/p99 band. Where the journal holds resource
    samples (stress's leak watch), a second panel shows each rank's RSS and the other resources."""
    placed = _in_plan_order(result.rows)
    rows, at = [r for _, r in placed], {id(r): x for x, r in placed}

    def x(r: dict) -> int:
        return at[id(r)]
    sampled = any(r.get("samples") for r in rows)
    if sampled:
        fig, (ax, rx) = figure(2, 1, figsize=(9, 7.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    else:
        fig, ax = figure(figsize=(9, 4.4))
    ok_times = [r["init_ms"] for r in rows if r.get("init_ms") is not None]
    rolling = len(rows) > ROLLING_FROM
    top = (_rolling_top(ok_times) if rolling else max(ok_times, default=1.0)) * 1.25
    for i, mode in enumerate(dict.fromkeys(r["mode"] for r in rows)):
        mine = [r for r in rows if r["mode"] == mode]
        ok = [r for r in mine if r["verdict"] == "ok" and r.get("init_ms") is not None]
        colour = MODE_PALETTE[i % len(MODE_PALETTE)]
        label = f"{mode}: init time, ok rounds ({len(ok)} of {len(mine)})"
        if rolling:
            xs, p50, p99 = _rolling([x(r) for r in ok], [r["init_ms"] for r in ok])
            ax.fill_between(xs, p50, p99, color=colour, alpha=0.25, lw=0)
            ax.plot(xs, p50, color=colour, lw=1.0, label=label + ", rolling p50 (band to p99)")
        else:
            ax.plot([x(r) for r in ok], [r["init_ms"] for r in ok], color=colour, marker="o", ms=3.5,
                    lw=0.8, label=label)
        ax.axvspan(x(mine[0]) - 0.5, x(mine[-1]) + 0.5, color=colour, alpha=0.07, lw=0)
        ax.annotate(mode, (x(mine[0]) - 0.5, 1.0), xycoords=("data", "axes fraction"), va="top", fontsize=8,
                    color=colour, fontweight="bold", xytext=(3, -3), textcoords="offset points")
    others = sorted({r["verdict"] for r in rows} - set(VERDICT_STYLE) - {"ok"})  # verdicts added later
    for verdict, (marker, colour) in [*VERDICT_STYLE.items(), *((v, ("*", "#888888")) for v in others)]:
        bad = [r for r in rows if r["verdict"] == verdict]
        if bad:  # a failed init may have no time at all (a hang): drawn on the top line
            ax.scatter([x(r) for r in bad], [min(r["init_ms"], top) if r.get("init_ms") is not None else top
                                                 for r in bad],
                       marker=marker, color=colour, edgecolors="#1a1a1a", linewidths=0.5, s=45, zorder=3,
                       label=f"{verdict} ({len(bad)})")
    if len(ok_times) < len(rows) or rolling:
        ax.axhline(top, color="#888888", lw=0.6, ls=":")
        ax.annotate("failed before an init time, or beyond the scale", (1.0, top), xycoords=("axes fraction", "data"),
                    fontsize=7, ha="right", va="bottom", color="#555555", xytext=(-3, 2), textcoords="offset points")
    ax.set_ylim(0, top * 1.12)
    ax.set_ylabel("init time, slowest rank (ms)")
    ax.set_title(f"stress timeline: {result.path.name}\n{result.title()}")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    if sampled:
        _resources(rx, rows, x)
    (rx if sampled else ax).set_xlabel("round (the modes in turn)")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole: no 2.5 on a short run (shared axis)
    return save(fig, path)


def _in_plan_order(rows: list[dict]) -> list[tuple[int, dict]]:
    """Each round at its place, the modes in turn, each as long as its rounds: from the journal's mode and round,
    not its seq (a run resumed with more --rounds numbered its plan anew, and a mode its --duration ended leaves
    unrun seqs as long as its plan)."""
    span: dict[str, int] = {}
    for r in rows:
        span[r["mode"]] = max(span.get(r["mode"], 0), r["round"] + 1)
    start, at = {}, 0
    for mode, n in span.items():
        start[mode], at = at, at + n
    return sorted(((start[r["mode"]] + r["round"], r) for r in rows), key=lambda p: p[0])


def _rolling_top(values: list[float]) -> float:
    """The scale of a rolling plot: the run's p99.9, so one outlier does not flatten the band."""
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * 0.999))] if s else 1.0


def _rolling(xs: list[int], ys: list[float], points: int = 300) -> tuple[list, list, list]:
    """p50 and p99 over windows of consecutive rounds, at most `points` windows."""
    if not xs:
        return [], [], []
    width = max(1, len(xs) // points)
    out_x, p50, p99 = [], [], []
    for i in range(0, len(xs), width):
        win = sorted(ys[i:i + max(width, 20)])
        out_x.append(xs[min(i + width // 2, len(xs) - 1)])
        p50.append(win[len(win) // 2])
        p99.append(win[min(len(win) - 1, int(len(win) * 0.99))])
    return out_x, p50, p99


def _resources(ax, rows: list[dict], x) -> None:
    """Each rank's RSS (MiB, left axis) and fds/threads (right axis) at each leak-watch sample."""
    ranks = sorted({int(k) for r in rows for k in (r.get("samples") or {})})
    right = ax.twinx()
    for i, rank in enumerate(ranks):
        pts = [(x(r), (r.get("samples") or {}).get(str(rank)) or (r.get("samples") or {}).get(rank))
               for r in rows]
        pts = [(x, s) for x, s in pts if s]
        colour = MODE_PALETTE[i % len(MODE_PALETTE)]
        ax.plot([x for x, s in pts], [(s.get("rss_bytes") or 0) / 2**20 for x, s in pts], color=colour, lw=1.0,
                label=f"rank {rank} RSS")
        if any(s.get("gpu_bytes") for _, s in pts):
            ax.plot([x for x, s in pts], [(s.get("gpu_bytes") or 0) / 2**20 for x, s in pts], color=colour, lw=0.8,
                    ls="--", label=f"rank {rank} GPU memory")
        right.plot([x for x, s in pts], [s.get("fds") or 0 for x, s in pts], color=colour, lw=0.6, ls=":",
                   label=f"rank {rank} fds")
    ax.set_ylabel("MiB")
    right.set_ylabel("open fds")
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="center left", bbox_to_anchor=(1.13, 0.5), fontsize=8)
    ax.set_title("resources sampled by the leak watch (stress --leak-every)", fontsize=9)
