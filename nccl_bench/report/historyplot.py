"""History figures: one PNG per asv benchmark and machine, one line per parameter set across commits,
each named regression (nccl_bench.report.history) shaded between its last good and first bad commit and
labelled with its change; labels are moved apart until none overlaps another.

A benchmark with many parameter sets (bandwidth: collective x algo x init x size) is split into
panels by its first parameter, so that no panel holds more lines than a reader can follow.
"""
from __future__ import annotations

import math
from pathlib import Path

from nccl_bench.core.figures import MARKERS, PALETTE, figure, save

PANEL_SPLIT = 8  # more series than this: one panel per value of the first parameter
MAX_PANEL_COLUMNS = 3
# Commits named on the x axis: past about 16 their labels overlap in a panel 5 inches wide, and a tick per commit
# was most of the report's time (docs/validation.md). The steps' commits always.
LABELLED_COMMITS = 16
MARKED_COMMITS = 40  # more commits than this: lines without a marker per commit


def labelled(n: int, steps, most: int = LABELLED_COMMITS) -> list[int]:
    """The commits (indices of n) named on the x axis: all of them when n <= most; else the steps' first bad
    commits, then the first and the last, then evenly spaced ones, each only if no named one is nearer than
    three quarters of the even spacing (about `most` in all, however many steps)."""
    if n <= most:
        return list(range(n))
    gap, chosen = 0.75 * (n - 1) / (most - 1), []
    evenly = [round(k * (n - 1) / (most - 1)) for k in range(most)]
    for x in [*sorted(set(steps)), 0, n - 1, *evenly]:
        if all(abs(x - c) >= gap for c in chosen):
            chosen.append(x)
    return sorted(chosen)


def _panels(series) -> dict[str, list]:
    if len(series) <= PANEL_SPLIT or not all(", " in s.params for s in series):
        return {"": series}
    panels: dict[str, list] = {}
    for s in series:
        panels.setdefault(s.params.split(", ", 1)[0], []).append(s)
    return panels


def _label(s, panel: str) -> str:
    rest = s.params.split(", ", 1)[1] if panel else s.params
    return rest or "(no parameters)"


def benchmark(history, machine: str, name: str, path: Path) -> Path:
    commits = history.commits[machine]
    panels = _panels(history.of(machine, name))
    cols = min(MAX_PANEL_COLUMNS, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = figure(rows, cols, figsize=(5.2 * cols + 1.5, 3.4 * rows + 0.8), squeeze=False)
    bad = {(r.params, r.first_bad.sha): r for r in history.regressions if r.machine == machine and r.benchmark == name}
    x_of = {c.sha: i for i, c in enumerate(commits)}
    unit, labels = None, []
    for ax, (panel, series) in zip(axes.flat, panels.items()):
        shaded, steps = set(), {}  # steps: commit -> (highest level after, changes) of the lines stepping there
        for k, s in enumerate(series):
            unit = unit or s.unit
            xs = [i for i, v in enumerate(s.values) if v is not None]
            ys = [s.values[i] for i in xs]
            marker = MARKERS[k % len(MARKERS)] if len(commits) <= MARKED_COMMITS else None
            ax.plot(xs, ys, color=PALETTE[k % len(PALETTE)], marker=marker, ms=3.5, lw=1.2,
                    ls=("-", "--", ":")[k // len(PALETTE) % 3], label=_label(s, panel))
            for (params, sha), r in bad.items():
                if params == s.params:
                    span = (x_of[r.last_good.sha], x_of[sha])
                    if span not in shaded:  # one shade per commit range, however many lines step there
                        shaded.add(span)
                        ax.axvspan(*span, color="#D55E00", alpha=0.15, lw=0)
                    top, changes = steps.get(x_of[sha], (r.after, []))
                    steps[x_of[sha]] = (max(top, r.after), changes + [r.change])
        for x, (top, changes) in sorted(steps.items()):  # one label per commit and panel
            lo, hi = min(changes), max(changes)
            text = f"{lo:+.0%}" if f"{lo:+.0%}" == f"{hi:+.0%}" else f"{lo:+.0%}..{hi:+.0%}"
            labels.append(ax.annotate(text + (f" ({len(changes)})" if len(changes) > 1 else ""), (x, top),
                                      color="#D55E00", fontsize=7, xytext=(3, 3), textcoords="offset points"))
        values = [v for s in series for v in s.values if v]
        if values and max(values) / min(values) > 20:
            ax.set_yscale("log")
        ax.set_title(panel or name.rsplit(".", 1)[-1], fontsize=9)
        named = labelled(len(commits), [x_of[sha] for _, sha in bad])
        ax.set_xticks(named)
        ax.set_xticklabels([commits[i].short for i in named], rotation=45, ha="right", fontsize=7)
        ax.set_xlim(-0.3, len(commits) - 0.7)
        if len(named) < len(commits):
            ax.set_xlabel(f"{len(named)} of {len(commits)} commits named", fontsize=7)
        ax.set_ylabel(unit or "value")
        ax.legend(fontsize=6 if len(series) > 6 else 7, ncol=2 if len(series) > 10 else 1, loc="best")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    stamp = "; ".join(dict.fromkeys(versions(c.versions) for c in commits if c.versions)) or "versions unknown"
    fig.suptitle(f"{name} on {machine}: commits oldest to newest\n{stamp}", fontsize=10)
    fig.tight_layout()
    apart(fig, labels)
    return save(fig, path)


LABEL_STEP = 9  # points a label moves while it overlaps one placed before it


def apart(fig, labels) -> None:
    """Moves each label, in steps, up and then down, until its text overlaps no label placed before it."""
    from matplotlib.text import Text
    renderer = fig.canvas.get_renderer()
    placed = []

    def box(t):
        return Text.get_window_extent(t, renderer)  # the text alone

    for text in sorted(labels, key=lambda t: (t.xy[1], t.xy[0])):
        x, y0 = text.xyann
        for k in range(1, 40):
            if not any(box(text).overlaps(b) for b in placed):
                break
            text.xyann = (x, y0 + LABEL_STEP * (k + 1) // 2 * (1 if k % 2 else -1))
        placed.append(box(text))


def versions(v: dict) -> str:
    return ", ".join(f"{k} {v[k]}" for k in ("torch", "nccl", "driver") if v.get(k)) or "python " + str(v.get("python"))
