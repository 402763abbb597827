"""`fleet`: which nodes stand out? Reads accept, bench and locate files from many nodes (one or more
per node, or folders of them), tabulates each metric per node, and names every node that is far from
the fleet by robust statistics (median and MAD) or that failed on its own (its profile's verdicts,
wrong values, locate's suspects): one line per bad node, markdown, a node x metric heatmap, JUnit and
JSON; exit 1 when a node is flagged.

    python -m nccl_bench fleet results/fleet/*.json [--out DIR] [--junit PATH] [--k 3.5] [--min-deviation 0.05]
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from nccl_bench.core import figures, results
from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.job.cli import Parser, prog
from nccl_bench.fleet import outliers


def parser() -> Parser:
    p = Parser(prog=prog("fleet"), description="nodes that stand out in a fleet, from their result files")
    p.add_argument("files", nargs="+", help="accept, bench or locate JSON files, or folders of them")
    p.add_argument("--out", default=None, help="folder for fleet.md, fleet.png, fleet.json, fleet.xml "
                                               "(default results/runs/fleet-<time>)")
    p.add_argument("--junit", default=None, help="JUnit XML here instead of <out>/fleet.xml")
    p.add_argument("--k", type=float, default=outliers.K,
                   help=f"scaled MADs from the median to stand out ({outliers.K})")
    p.add_argument("--min-deviation", type=float, default=outliers.MIN_DEVIATION,
                   help=f"and at least this fraction away from the median ({outliers.MIN_DEVIATION})")
    p.add_argument("--no-picture", action="store_true", help="no heatmap")
    return p


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if not a.k > 0:
        raise UsageError(f"--k must be above 0, got {a.k:g}")
    if not 0 <= a.min_deviation < 1:
        raise UsageError(f"--min-deviation must be in [0, 1), got {a.min_deviation:g}")
    out = Path(a.out) if a.out else results.RUNS / f"fleet-{time.strftime('%Y%m%d-%H%M%S')}"
    if a.out:
        results.check_out_folder(out)
    else:
        results.check_folder(results.RUNS, "the default folder for fleet results", make=True)
    results.check_writable(a.junit, "--junit")
    t0 = time.perf_counter()
    nodes = outliers.read(a.files)
    for line in outliers.folded(nodes):
        print(f"fleet: {line}", flush=True)
    bad, stats = outliers.verdict(nodes, a.k, a.min_deviation)
    out.mkdir(parents=True, exist_ok=True)
    metrics = sorted({m for n in nodes.values() for m in n.values})
    names = sorted(nodes)
    nfiles = sum(len(n.files) for n in nodes.values())
    print(f"fleet: {len(nodes)} node(s) from {nfiles} file(s), {len(metrics)} metric(s); "
          + ("robust statistics over the fleet and each node's own verdicts" if len(nodes) >= 3 else
             "fewer than 3 nodes: judged against their profiles only"), flush=True)
    for name, why in bad.items():
        print(f"BAD {name}: " + "; ".join(why), flush=True)
    try:
        _write(out, a, nodes, names, metrics, bad, stats)
    except OSError as e:  # a full disk: the verdict's files go to the temporary folder, and that is said
        kept = Path(tempfile.mkdtemp(prefix="nccl-bench-fleet-"))
        a.junit = None if a.junit is None else str(kept / Path(a.junit).name)
        _write(kept, a, nodes, names, metrics, bad, stats)
        print(f"cannot write {out} ({e.strerror or e}); the fleet's verdict is kept in {kept}", file=sys.stderr,
              flush=True)
        out = kept
    print(f"fleet: {len(bad) or 'no'} node(s) flagged of {len(nodes)} ({time.perf_counter() - t0:.1f} s); "
          f"{out}", flush=True)
    return EXIT_FAILED if bad else 0


def _write(out: Path, a, nodes, names, metrics, bad, stats) -> None:
    import json
    from tabulate import tabulate
    from nccl_bench import records
    from nccl_bench.core import junit
    rows = [{"node": n, "flagged": n in bad, "reasons": bad.get(n, []), "files": nodes[n].files,
             **{m: nodes[n].value(m) for m in metrics}} for n in names]
    meta = {"k": a.k, "min_deviation": a.min_deviation, "nodes": len(names),
            "fleet": {m: {"median": s[0], "scaled_mad": s[1], "nodes": s[2]} for m, s in stats.items()}}
    (out / "fleet.json").write_text(json.dumps(records.document("fleet", rows, meta), indent=1) + "\n")
    body = [[("**BAD** " if n in bad else "") + n, *(_cell(nodes[n].value(m)) for m in metrics)] for n in names]
    fleet_line = [["fleet median", *(_cell(stats[m][0]) if m in stats else "-" for m in metrics)]]
    lines = ["# Fleet verdict", "", f"{len(names)} nodes, {len(bad)} flagged (K = {a.k:g} scaled MADs, at least "
             f"{a.min_deviation * 100:g} % from the median; and each node's own verdicts).", ""]
    lines += [f"- **{n}**: " + "; ".join(why) for n, why in bad.items()] + [""]
    if not a.no_picture and metrics:
        grid, flagged = [], set()
        for i, n in enumerate(names):
            row = []
            for j, m in enumerate(metrics):
                v, med = nodes[n].value(m), stats.get(m, (None,))[0]
                if v is None or not med:
                    row.append(None)
                else:  # above 1: better than the fleet's median
                    row.append(v / med if outliers.higher_is_better(m) else med / v if v else None)
                if any(m in w for w in bad.get(n, [])):
                    flagged.add((i, j))
            grid.append(row)
        pic = fleet_heatmap(names, metrics, grid, flagged, f"fleet: {len(names)} nodes", out / "fleet.png")
        lines += [f"![fleet heatmap]({pic.name})", ""]
    lines += [tabulate(fleet_line + body, headers=["node", *metrics], tablefmt="github", disable_numparse=True), ""]
    (out / "fleet.md").write_text("\n".join(lines))
    cases = [junit.Case(name=n, classname="fleet", status="fail" if n in bad else "pass",
                        message="; ".join(bad.get(n, []))[:500], detail="\n".join(bad.get(n, []))) for n in names]
    junit.write(a.junit or str(out / "fleet.xml"), junit.Suite("fleet", cases), name="fleet")


def fleet_heatmap(nodes: list[str], metrics: list[str], grid: list[list[float | None]],
                  flagged: set[tuple[int, int]], title: str, path: Path) -> Path:
    """Nodes x metrics, each cell the node's value against the fleet median, turned so that below 1 is
    worse whatever the metric (bandwidth / median, median / latency); flagged cells outlined. A fleet of
    hundreds draws every node as a thin row and names only the flagged ones."""
    import numpy as np
    from matplotlib.patches import Rectangle
    data = np.array([[np.nan if v is None else v for v in row] for row in grid], dtype=float)
    tall = len(nodes) > 60
    fig, ax = figures.figure(figsize=(2.5 + 0.9 * len(metrics), 1.5 + (8 if tall else 0.3 * len(nodes))))
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
    return figures.save(fig, path)


def _cell(v) -> str:
    return "-" if v is None else f"{v:.4g}"


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
