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
