"""Figures, drawn the same way by every feature (matplotlib, headless Agg, imported on first use):
readable in a light or a dark viewer (an opaque white figure, dark text, a mid-grey grid) with the
Okabe-Ito colour-blind-safe palette, and the heatmaps more than one feature draws."""
from __future__ import annotations

from pathlib import Path

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
STYLE = {"figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
         "savefig.transparent": False, "text.color": "#1a1a1a", "axes.labelcolor": "#1a1a1a",
         "axes.edgecolor": "#555555", "xtick.color": "#1a1a1a", "ytick.color": "#1a1a1a",
         "axes.grid": True, "grid.color": "#b0b0b0", "grid.linewidth": 0.6, "grid.alpha": 0.7,
         "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 11, "legend.fontsize": 8,
         "legend.framealpha": 0.9, "legend.facecolor": "white", "legend.edgecolor": "#888888"}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # headless: no display, same output everywhere
    import matplotlib.pyplot as plt
    return plt


def figure(*args, **kw):
    """plt.subplots(...) in the house style."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        return plt.subplots(*args, **kw)


def save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


TEXT_IN_CELLS = 32  # ranks up to which each cell prints its ratio; past that the figure stops growing
MAX_HEATMAP_INCHES = 20  # about 2,200 pixels a side at the figures' 110 dpi, however many ranks


def pair_heatmap(cells: list[tuple[int, int, float, bool]], n: int, title: str, path: Path) -> Path:
    """A rank-by-rank matrix (rows send, columns receive): each cell (src, dst, ratio, outlined) is a pair's
    bandwidth over its class median, printed in it up to TEXT_IN_CELLS ranks; outlined cells are the suspects."""
    import numpy as np
    from matplotlib.patches import Rectangle
    grid = np.full((n, n), np.nan)
    for src, dst, ratio, _ in cells:
        grid[src, dst] = ratio
    fig, ax = figure(figsize=(min(1.2 + 0.55 * n, MAX_HEATMAP_INCHES), min(1.0 + 0.5 * n, MAX_HEATMAP_INCHES)))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=max(1.2, float(np.nanmax(grid)) if cells else 1.2))
    for src, dst, ratio, outlined in cells:
        if n <= TEXT_IN_CELLS:
            ax.text(dst, src, f"{ratio:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if ratio < 0.6 else "black")
        if outlined:
            ax.add_patch(Rectangle((dst - 0.5, src - 0.5), 1, 1, fill=False, edgecolor="#D55E00", lw=2))
    every = -(-n // TEXT_IN_CELLS)  # past TEXT_IN_CELLS ranks, every k-th rank named
    ax.set_xticks(range(0, n, every))
    ax.set_yticks(range(0, n, every))
    ax.set_xlabel("receiving rank")
    ax.set_ylabel("sending rank")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="busbw / class median")
    return save(fig, path)
