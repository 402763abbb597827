"""locate's pair matrix as a heatmap: rows send, columns receive, each cell the pair's bandwidth as a
fraction of its class median (the number printed in it), suspects outlined."""
from __future__ import annotations

from pathlib import Path

from matplotlib.patches import Rectangle

from nccl_bench.report.plot import _figure, _save


def pair_heatmap(rows: list[dict], n: int, title: str, path: Path) -> Path:
    import numpy as np
    grid = np.full((n, n), np.nan)
    for r in rows:
        grid[r["src"], r["dst"]] = r["ratio"]
    fig, ax = _figure(figsize=(1.2 + 0.55 * n, 1.0 + 0.5 * n))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=max(1.2, float(np.nanmax(grid)) if rows else 1.2))
    for r in rows:
        ax.text(r["dst"], r["src"], f"{r['ratio']:.2f}", ha="center", va="center", fontsize=7,
                color="white" if r["ratio"] < 0.6 else "black")
        if r["slow"]:
            ax.add_patch(Rectangle((r["dst"] - 0.5, r["src"] - 0.5), 1, 1, fill=False, edgecolor="#D55E00", lw=2))
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xlabel("receiving rank")
    ax.set_ylabel("sending rank")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="busbw / class median")
    return _save(fig, path)


def fleet_heatmap(nodes: list[str], metrics: list[str], grid: list[list[float | None]],
                  flagged: set[tuple[int, int]], title: str, path: Path) -> Path:
    """Nodes x metrics, each cell the node's value against the fleet median, turned so that below 1 is
    worse whatever the metric (bandwidth / median, median / latency); flagged cells outlined. A fleet of
    hundreds draws every node as a thin row and names only the flagged ones."""
    import numpy as np
    data = np.array([[np.nan if v is None else v for v in row] for row in grid], dtype=float)
    tall = len(nodes) > 60
    fig, ax = _figure(figsize=(2.5 + 0.9 * len(metrics), 1.5 + (8 if tall else 0.3 * len(nodes))))
    im = ax.imshow(data, cmap="viridis", vmin=0.5, vmax=1.1, aspect="auto", interpolation="nearest")
    for i, j in flagged:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#D55E00", lw=2))
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels(metrics, rotation=40, ha="right", fontsize=8)
    named = sorted({i for i, _ in flagged}) if tall else range(len(nodes))
    ax.set_yticks(list(named))
    ax.set_yticklabels([nodes[i] for i in named], fontsize=7 if tall else 8)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="value / fleet median (1 = the median; lower is worse)")
    return _save(fig, path)
