"""The pair matrix on the terminal: whole up to MAX_MATRIX_RANKS ranks; past that (a job across nodes: 64 ranks
drew 64 columns, over 400 characters a line) one line per class of pair and the slowest pairs, the whole matrix
being in the JSON and the PNG."""
from __future__ import annotations

import statistics

MAX_MATRIX_RANKS = 16  # 16 columns of busbw fit a 120-character terminal
SLOWEST = 8  # the slowest pairs against their class, a line each under the class lines


def lines(rows: list[dict], n: int, picture: bool = True) -> list[str]:
    """What the terminal shows of the pairs' busbw (rows: locate's pair rows, every ordered pair of n ranks;
    picture: a heatmap is drawn beside the result file)."""
    from tabulate import tabulate
    if n <= MAX_MATRIX_RANKS:
        grid = [[f"{x['busbw']:.3g}" for x in sorted((r for r in rows if r["src"] == s), key=lambda r: r["dst"])]
                for s in range(n)]
        body = [[s, *(row[:s] + ["-"] + row[s:])] for s, row in enumerate(grid)]
        return tabulate(body, headers=["src\\dst", *range(n)], tablefmt="simple", disable_numparse=True).splitlines()
    table = []
    for c in sorted({r["class"] for r in rows}):
        of = [r for r in rows if r["class"] == c]
        low = min(of, key=lambda r: r["busbw"])
        table.append([c, len(of), f"{statistics.median(r['busbw'] for r in of):.3g}", f"{low['busbw']:.3g}",
                      f"{low['src']}>{low['dst']}"])
    slowest = sorted(rows, key=lambda r: r["ratio"])[:SLOWEST]
    return [*tabulate(table, headers=["class", "pairs", "median", "slowest", "src>dst"], tablefmt="simple",
                      disable_numparse=True).splitlines(),
            f"the {len(slowest)} slowest pairs against their class median (src>dst):",
            *(f"  {r['src']}>{r['dst']}: {r['busbw']:.3g} GB/s, {r['ratio']:.2f} x" for r in slowest),
            f"(the {n} x {n} matrix of every pair: the result file's rows"
            + (" and its heatmap PNG)" if picture else ")")]
