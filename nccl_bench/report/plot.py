"""The report's figures (matplotlib, headless Agg): one function per figure, each writes one PNG.

Readable in a light or a dark viewer: an opaque white figure with dark text, a mid-grey
grid and the Okabe-Ito colour-blind-safe palette; lines also differ in marker and
dash, so nothing depends on colour alone. Axes carry units; titles name the machine,
backend and versions from the metadata block.
"""
from __future__ import annotations

import math
from pathlib import Path

from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from nccl_bench.core.figures import MARKERS, PALETTE, figure, save
from nccl_bench.report.anchors import ANCHOR_STYLE, anchor_lines, link_peak

# stress: modes in blues/greens, failures in the warm colours (and by marker)
MODE_PALETTE = ("#0072B2", "#009E73", "#56B4E9", "#666666")
VERDICT_STYLE = {"hang": ("X", "#D55E00"), "error": ("s", "#CC79A7"), "wrong": ("D", "#E69F00"),
                 "stale": ("^", "#000000")}
SMALL_BYTES = 1 << 20  # the latency plot's sizes
MAX_LINES = 12  # a bench figure draws a line per file up to this many; past it, each series' median over the files



def size_label(n: float) -> str:
    """8 -> '8', 65536 -> '64K', 8 GiB -> '8G' (powers of 1024, as nccl-tests' options)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f}{suffix}" if v == int(v) else f"{v:.3g}{suffix}"
    return f"{n:.0f}"


def _size_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))
    ax.set_xlabel("size (bytes of the largest buffer; K/M/G = 2^10/2^20/2^30)")


def _titles(results) -> str:
    return "\n".join(dict.fromkeys(r.title() for r in results))


# --- bench ------------------------------------------------------------------------------------
def series_key(result, row) -> tuple:
    """One line per (algo, init mode, eager|graph, variant), and per file when several are drawn."""
    graph = (result.meta.get("bench") or {}).get("cudagraph") or 0
    return (row.get("algo", "default"), row.get("init", "?"), "graph" if row.get("graph", graph) else "eager",
            variant(row))


def variant(row) -> str:
    """What sets apart rows of one collective and size beyond algo and init: the type, op and root
    (-d/-o/-r all) and the split group; '' for the defaults (float, sum, root 0, no split)."""
    parts = [] if row.get("type", "float") == "float" else [row["type"]]
    if row.get("redop") not in (None, "sum", "none"):
        parts.append(row["redop"])
    root = str(row.get("root", -1)).strip()
    if root not in ("-1", "0"):
        parts.append(f"root {root}")
    if row.get("group") is not None:
        parts.append(f"group {row['group']}")
    return ", ".join(parts)


def series_label(key: tuple) -> str:
    algo, init, how, var = key
    return f"{algo}, {init}" + (", graph" if how == "graph" else "") + (f", {var}" if var else "")


def _bench_lines(results, collective: str, max_size: float | None = None) -> tuple[dict[str, list], int]:
    """(label -> sorted [(size, [row, ...])], runs pooled per line) for one collective: a line per series and
    file while there are at most MAX_LINES (1 run per line); past that a line per series with every file's row
    at each size (drawn as their median and range), so that a report over thousands of runs stays one readable
    figure, drawn in seconds."""
    per_file = len(results) > 1
    lines = _collect(results, collective, max_size, per_file)
    if per_file and len(lines) > MAX_LINES:
        lines, per_file = _collect(results, collective, max_size, False), False
    runs = len(results) if len(results) > 1 and not per_file else 1
    return {k: sorted(v.items()) for k, v in lines.items()}, runs


def _collect(results, collective: str, max_size: float | None, per_file: bool) -> dict[str, dict]:
    """label (and file, where `per_file`) -> size -> the rows of it."""
    lines: dict[str, dict] = {}
    for res in results:
        for row in res.rows:
            if row["collective"] != collective or (max_size and row["size"] > max_size):
                continue
            label = series_label(series_key(res, row)) + (f" [{res.path.stem}]" if per_file else "")
            lines.setdefault(label, {}).setdefault(row["size"], []).append(row)
    return lines


def _drawn(ax, pts, value, label: str, runs: int, **style) -> None:
    """One line through `pts` [(size, rows)]: where a size has several rows (repeated, or `runs` runs pooled)
    their median, with their range shaded."""
    xs = [s for s, _ in pts]
    vals = [sorted(value(r) for r in rows) for _, rows in pts]
    ax.plot(xs, [v[len(v) // 2] for v in vals], label=label + (f": median of {runs:,} runs, range shaded"
                                                              if runs > 1 else ""), **style)
    if max(map(len, vals)) > 1:
        ax.fill_between(xs, [v[0] for v in vals], [v[-1] for v in vals], color=style.get("color"), alpha=0.15, lw=0)


def busbw(results, collective: str, path: Path) -> Path:
    """busbw vs size for one collective: out-of-place solid, in-place dashed; link peak and anchors."""
    fig, ax = figure(figsize=(8, 4.8))
    lines, runs = _bench_lines(results, collective)
    for i, (label, pts) in enumerate(lines.items()):
        c, m = PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]
        _drawn(ax, pts, lambda r: r["out_of_place"]["bus_bw"], f"{label} (out-of-place)", runs, color=c, marker=m,
               ms=4, lw=1.6)
        _drawn(ax, pts, lambda r: r["in_place"]["bus_bw"], f"{label} (in-place)", runs, color=c, marker=m, ms=3,
               lw=1.0, ls="--", mfc="white")
    machine = results[0].machine
    sizes = [r["size"] for res in results for r in res.rows if r["collective"] == collective]
    for label, xs, vals in anchor_lines(machine, collective, min(sizes), max(sizes), graph=False):
        ax.plot(xs, [v[1] for v in vals], color="#555555", lw=1.3, ls=ANCHOR_STYLE.get(label, ":"),
                label=f"{label}, out-of-place ({machine} anchor)")
    peak = link_peak(results[0].meta)
    if peak:
        ax.axhline(peak[0], color="#999999", lw=2.0, ls="-", label=peak[1])
    _size_axis(ax)
    ax.set_ylabel("bus bandwidth (GB/s, 1 GB = 1e9 B)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"busbw vs size: {collective}\n{_titles(results)}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, path)


def latency(results, collectives: list[str], path: Path) -> Path:
    """Time per operation at sizes <= 1 MiB, one panel per collective; graph rows dashed."""
    n = len(collectives)
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    fig, axes = figure(rows, cols, figsize=(8.5 * cols, 3.9 * rows), squeeze=False)
    machine = results[0].machine
    for ax, name in zip(axes.flat, collectives):
        lines, runs = _bench_lines(results, name, SMALL_BYTES)
        for i, (label, pts) in enumerate(lines.items()):
            _drawn(ax, pts, lambda r: r["out_of_place"]["time"], label, runs, color=PALETTE[i % len(PALETTE)],
                   marker=MARKERS[i % len(MARKERS)], ms=4, lw=1.4, ls="--" if "graph" in label else "-")
        sizes = [r["size"] for res in results for r in res.rows if r["collective"] == name]
        graph = any(series_key(res, r)[2] == "graph" for res in results for r in res.rows)
        for label, xs, vals in anchor_lines(machine, name, min(sizes), min(max(sizes), SMALL_BYTES), graph):
            keep = [(x, v[0]) for x, v in zip(xs, vals) if x <= SMALL_BYTES]
            if not keep:
                continue
            ax.plot([x for x, _ in keep], [us for _, us in keep], color="#555555", lw=1.3,
                    ls=ANCHOR_STYLE.get(label, ":"),
                    label=f"{label} (anchor)")
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_ylabel("time per operation (µs), out-of-place")
        ax.set_title(name)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(f"latency at small sizes (<= 1M; eager solid, CUDA graph dashed)\n{_titles(results)}")
    fig.tight_layout()
    return save(fig, path)


# --- init -------------------------------------------------------------------------------------
def init_phases(results, phases: list[tuple[str, str]], path: Path) -> Path:
    """A box per init mode in one panel per phase (ok inits of measured rounds, every rank), in ms."""
    groups = []  # (label, ok rows, failed count)
    many = len(results) > 1
    for res in results:
        rows = [r for r in res.rows if not r["warmup"]]
        for mode in dict.fromkeys(r["mode"] for r in rows):
            mine = [r for r in rows if r["mode"] == mode]
            ok = [r for r in mine if r["outcome"] == "ok"]
            groups.append((mode + (f"\n[{res.path.stem}]" if many else ""), ok, len(mine) - len(ok)))
    fig, axes = figure(1, len(phases), figsize=(1.5 + 0.75 * max(len(groups), 2) * len(phases), 4.8), squeeze=False)
    for ax, (label, key) in zip(axes.flat, phases):
        data = [[r[key] * 1e3 for r in ok if r.get(key) is not None] for _, ok, _ in groups]
        positions = [i + 1 for i, d in enumerate(data) if d]
        if positions:
            box = ax.boxplot([d for d in data if d], positions=positions, widths=0.6, patch_artist=True,
                             medianprops={"color": "#1a1a1a", "lw": 1.5}, flierprops={"ms": 3})
            for patch, i in zip(box["boxes"], positions):
                patch.set_facecolor(PALETTE[(i - 1) % len(PALETTE)])
                patch.set_alpha(0.55)
        ax.set_xticks(range(1, len(groups) + 1))
        ax.set_xticklabels([f"{g}\n{len(ok)} ok" + (f"\n{bad} failed" if bad else "") for g, ok, bad in groups],
                           fontsize=7.5)
        for i, d in enumerate(data):
            if not d:
                ax.annotate("no ok init", (i + 1, 0.5), xycoords=("data", "axes fraction"), rotation=90,
                            ha="center", va="center", fontsize=8, color="#555555")
        ax.set_xlim(0.4, len(groups) + 0.6)
        vals = [v for d in data for v in d]
        if vals and min(vals) > 0 and max(vals) / min(vals) > 50:
            ax.set_yscale("log")
        ax.set_title(label)
        ax.set_ylabel("ms")
    fig.suptitle(f"communicator init per phase and mode (ok inits, every rank)\n{_titles(results)}")
    fig.tight_layout()
    return save(fig, path)


# --- comparison -------------------------------------------------------------------------------
_VERDICT_MARK = {"regression": ("v", "#D55E00"), "improvement": ("^", "#009E73")}


def compare_bench(rows: list[dict], collective: str, title: str, path: Path) -> Path:
    """busbw ratio (this run / the other) per size, per series; flagged sizes marked."""
    fig, ax = figure(figsize=(8, 4.4))
    mine = [r for r in rows if r["collective"] == collective]
    series = list(dict.fromkeys((r["series"], r["place"]) for r in mine))
    for i, (s, place) in enumerate(series):
        pts = sorted((r for r in mine if (r["series"], r["place"]) == (s, place)), key=lambda r: r["size"])
        ax.plot([r["size"] for r in pts], [r["ratio"] for r in pts], color=PALETTE[(i // 2) % len(PALETTE)],
                ls="-" if place == "out_of_place" else "--", lw=1.2, marker=".",
                label=f"{s} ({place.replace('_', '-')})")
    for verdict, (marker, colour) in _VERDICT_MARK.items():
        hit = [r for r in mine if r["verdict"] == verdict]
        if hit:
            ax.scatter([r["size"] for r in hit], [r["ratio"] for r in hit], marker=marker, s=45, color=colour,
                       zorder=3, label=f"{verdict} ({len(hit)})")
    floor = min((r["threshold"] for r in mine), default=0.03)
    ax.axhspan(1 - floor, 1 + floor, color="#999999", alpha=0.18, lw=0, label=f"±{floor:.0%} floor")
    ax.axhline(1.0, color="#333333", lw=0.8)
    _size_axis(ax)
    ax.set_ylabel("busbw ratio (this run / compared run)")
    ax.set_title(f"run-to-run: {collective}\n{title}")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def compare_bars(rows: list[dict], what: str, ylabel: str, title: str, path: Path) -> Path:
    """Ratio per (group, item) as a point on a log axis; the grey bar around 1 is its no-change zone
    (the measured spread); regressions and improvements are coloured and marked."""
    fig, ax = figure(figsize=(max(5.5, 0.5 * len(rows) + 2.5), 4.6))
    lo_cap, hi_cap = 0.2, 5.0  # zones wider than this are drawn to the edge
    for x, r in enumerate(rows):
        thr = r["threshold"] or 0.0
        ax.plot([x, x], [max(1 / (1 + thr), lo_cap), min(1 + thr, hi_cap)], color="#bbbbbb", lw=7,
                solid_capstyle="butt", zorder=1)
        marker, colour = _VERDICT_MARK.get(r["verdict"], ("o", "#333333"))
        ax.scatter([x], [r["ratio"]], marker=marker, color=colour, s=50, zorder=3, edgecolors="#1a1a1a",
                   linewidths=0.5)
    groups = list(dict.fromkeys(r["group"] for r in rows))
    for i, g in enumerate(groups):  # shade every other group, name each above its items
        xs = [x for x, r in enumerate(rows) if r["group"] == g]
        if i % 2:
            ax.axvspan(xs[0] - 0.5, xs[-1] + 0.5, color="#000000", alpha=0.04, lw=0)
        ax.annotate(g, ((xs[0] + xs[-1]) / 2, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                    fontsize=8, fontweight="bold", xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="#333333", lw=0.8)
    ax.set_yscale("log")
    ratios = [r["ratio"] for r in rows]
    ax.set_ylim(min(0.8, min(ratios) / 1.15), max(1.25, max(ratios) * 1.15))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if len(f"{v:g}") <= 4 else ""))
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["item"] for r in rows], rotation=40, ha="right", fontsize=7.5)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(f"run-to-run: {what}\n{title}", pad=16)
    handles = [Line2D([], [], color="#bbbbbb", lw=7, label="no-change zone (measured spread)")]
    for v, (marker, colour) in (("no change", ("o", "#333333")), *_VERDICT_MARK.items()):
        handles.append(Line2D([], [], ls="", marker=marker, color=colour, label=v))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, path)
