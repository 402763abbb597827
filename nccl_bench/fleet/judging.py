"""The fleet's verdict over result files, written once for both ways in (`fleet FILES` and `fleet run`): nodes
against the fleet and their own verdicts (fleet.outliers), the links between them from 2-node bench files
(fleet.links), and what a run knows beyond the files (nodes Slurm had out of service, steps that failed). Printed
as one line per named node or link, and written as fleet.md, fleet.png, fleet.json and JUnit."""
from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from nccl_bench.core import figures
from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.fleet import links as links_mod
from nccl_bench.fleet import outliers

PICTURE_ROWS = 1000  # a picture's rows at most: more than its pixels would be averaged away by the drawing
TABLE_NODES = 200  # fleet.md tabulates every node up to this many; beyond, the flagged ones (fleet.json has all)


@dataclass(frozen=True)
class Settings:
    k: float = outliers.K
    min_deviation: float = outliers.MIN_DEVIATION
    link_margin: float = links_mod.MARGIN
    link_floor: float | None = None
    junit: str | None = None
    picture: bool = True

    def __post_init__(self):
        if not self.k > 0:
            raise UsageError(f"--k must be above 0, got {self.k:g}")
        if not 0 <= self.min_deviation < 1:
            raise UsageError(f"--min-deviation must be in [0, 1), got {self.min_deviation:g}")
        if not 0 < self.link_margin < 1:
            raise UsageError(f"--link-margin must be in (0, 1), got {self.link_margin:g}")
        if self.link_floor is not None and not self.link_floor > 0:
            raise UsageError(f"--link-floor must be above 0 GB/s, got {self.link_floor:g}")


@dataclass
class Known:
    """What a run knows that no file says: nodes it could not accept (host -> why), pairs whose step failed."""
    nodes: dict[str, list[str]] = field(default_factory=dict)
    pairs: list[links_mod.Pair] = field(default_factory=list)


def add_arguments(p) -> None:
    """How the fleet's verdict judges and where its JUnit goes: shared by `fleet` and `fleet run`."""
    p.add_argument("--junit", default=None, help="the verdict's JUnit XML here instead of fleet.xml beside it")
    p.add_argument("--k", type=float, default=outliers.K,
                   help=f"scaled MADs from the median to stand out ({outliers.K})")
    p.add_argument("--min-deviation", type=float, default=outliers.MIN_DEVIATION,
                   help=f"and at least this fraction away from the median ({outliers.MIN_DEVIATION})")
    p.add_argument("--link-margin", type=float, default=links_mod.MARGIN,
                   help=f"a pair of nodes is slow below (1 - this) x a healthy pair's busbw ({links_mod.MARGIN})")
    p.add_argument("--link-floor", type=float, default=None, metavar="GBPS",
                   help="a healthy pair's busbw in GB/s (from the NICs' rate or a recorded fleet); default: the "
                        "median of the fleet's best quarter of pairs")
    p.add_argument("--no-picture", action="store_true", help="no heatmap")


def settings(a) -> Settings:
    """The verdict's settings from add_arguments' flags; a bad value is one line, by its flag."""
    return Settings(a.k, a.min_deviation, a.link_margin, a.link_floor, a.junit, not a.no_picture)


def judge(files: list[str], out: Path, s: Settings, known: Known | None = None, say: str = "fleet") -> int:
    """Read, judge, print and write; exit 1 when a node or a link is named. `out` was proven writable."""
    known = known or Known()
    t0 = time.perf_counter()
    nodes, pairs = outliers.read(files) if files else ({}, [])
    for line in outliers.folded(nodes):
        print(f"{say}: {line}", flush=True)
    table = outliers.grid(nodes)
    bad, stats = outliers.verdict(nodes, s.k, s.min_deviation, table)
    net = links_mod.judge(pairs + known.pairs, s.link_margin, s.link_floor) if pairs or known.pairs else None
    for host, why in [*known.nodes.items(), *(net.nodes.items() if net else [])]:
        bad.setdefault(host, []).extend([why] if isinstance(why, str) else why)
    bad = dict(sorted(bad.items()))
    nfiles = sum(len(n.files) for n in nodes.values()) + len(pairs)
    print(f"{say}: {len(nodes)} node(s) from {nfiles} file(s), {len(table.metrics)} metric(s); "
          + ("robust statistics over the fleet and each node's own verdicts" if len(nodes) >= 3 else
             "fewer than 3 nodes: judged against their profiles only"), flush=True)
    if net:
        print(f"{say}: links: {net.line()}", flush=True)
    for name, why in bad.items():
        print(f"BAD {name}: " + "; ".join(why), flush=True)
    for name, why in (net.links.items() if net else []):
        print(f"BAD link {name}: {why}", flush=True)
    try:
        write(out, s, nodes, table, bad, stats, net)
    except OSError as e:  # a full disk: the verdict's files go to the temporary folder, and that is said
        kept = Path(tempfile.mkdtemp(prefix="nccl-bench-fleet-"))
        s = replace(s, junit=None if s.junit is None else str(kept / Path(s.junit).name))
        write(kept, s, nodes, table, bad, stats, net)
        print(f"cannot write {out} ({e.strerror or e}); the fleet's verdict is kept in {kept}", file=sys.stderr,
              flush=True)
        out = kept
    nlinks = len(net.links) if net else 0
    print(f"{say}: {len(bad) or 'no'} node(s) flagged of {len(set(nodes) | set(bad))}"
          + (f", {nlinks or 'no'} link(s) of {len(net.pairs)} pair(s)" if net else "")
          + f" ({time.perf_counter() - t0:.1f} s); {out}", flush=True)
    return EXIT_FAILED if bad or nlinks else 0


def write(out: Path, s: Settings, nodes, table: outliers.Grid, bad, stats, net) -> None:
    import json
    from tabulate import tabulate
    from nccl_bench import records
    from nccl_bench.core import junit
    out.mkdir(parents=True, exist_ok=True)
    names, metrics = table.names, table.metrics
    rows = [{"node": n, "flagged": n in bad, "reasons": bad.get(n, []), "files": nodes[n].files,
             **{m: _num(table.values[i, j]) for j, m in enumerate(metrics)}} for i, n in enumerate(names)]
    meta = {"k": s.k, "min_deviation": s.min_deviation, "nodes": len(names),
            "fleet": {m: {"median": st[0], "scaled_mad": st[1], "nodes": st[2]} for m, st in stats.items()},
            "unjudged_nodes": {n: why for n, why in bad.items() if n not in nodes},
            "links": None if net is None else {
                "reference_GBps": net.reference, "reference_from": net.source, "margin": net.margin,
                "named": net.links, "pairs": [{"a": p.a, "b": p.b, "busbw_GBps": p.busbw, "metric": p.metric,
                                               "file": p.file, "slow": p in net.slow,
                                               "measurements": list(p.tries) or [p.busbw]} for p in net.pairs]}}
    # indented for a person where it is small; compact (the C encoder) where it is a fleet of thousands
    (out / "fleet.json").write_text(json.dumps(records.document("fleet", rows, meta),
                                               indent=1 if len(names) <= TABLE_NODES else None) + "\n")
    index = {n: i for i, n in enumerate(names)}
    tabled = names if len(names) <= TABLE_NODES else [n for n in names if n in bad]
    body = [[("**BAD** " if n in bad else "") + n, *(_cell(table.values[index[n], j]) for j in range(len(metrics)))]
            for n in tabled]
    fleet_line = [["fleet median", *(_cell(stats[m][0]) if m in stats else "-" for m in metrics)]]
    lines = ["# Fleet verdict", "", f"{len(set(names) | set(bad))} nodes, {len(bad)} flagged (K = {s.k:g} scaled "
             f"MADs, at least {s.min_deviation * 100:g} % from the median; and each node's own verdicts).", ""]
    lines += [f"- **{n}**: " + "; ".join(why) for n, why in bad.items()] + [""]
    if net:
        lines += ["## Links", "", net.line() + ".", ""]
        lines += [f"- **link {n}**: {why}" for n, why in net.links.items()] + [""]
    if s.picture and metrics:
        pic = heatmap(table, stats, bad, out / "fleet.png")
        lines += [f"![fleet heatmap]({pic.name})", ""]
    if len(tabled) < len(names):
        lines += [f"The table holds the flagged nodes and the fleet's median; all {len(names)} nodes' values are in "
                  "fleet.json.", ""]
    lines += [tabulate(fleet_line + body, headers=["node", *metrics], tablefmt="github", disable_numparse=True), ""]
    (out / "fleet.md").write_text("\n".join(lines))
    cases = [junit.Case(name=n, classname="fleet", status="fail" if n in bad else "pass",
                        message="; ".join(bad.get(n, []))[:500], detail="\n".join(bad.get(n, [])))
             for n in sorted(set(names) | set(bad))]
    cases += [junit.Case(name=p.name, classname="fleet.links", status="fail" if p.name in net.links else "pass",
                         message=net.links.get(p.name, "")[:500], detail=net.links.get(p.name, ""))
              for p in (net.pairs if net else [])]
    junit.write(s.junit or str(out / "fleet.xml"), junit.Suite("fleet", cases), name="fleet")


def heatmap(table: outliers.Grid, stats: dict, bad: dict, path: Path) -> Path:
    """Nodes x metrics, each cell the node's value against the fleet median, turned so that below 1 is
    worse whatever the metric (bandwidth / median, median / latency); flagged cells outlined. A fleet of
    hundreds draws every node as a thin row and names only the flagged ones."""
    import numpy as np
    from matplotlib.patches import Rectangle
    nodes, metrics = table.names, table.metrics
    med = np.array([stats[m][0] if m in stats and stats[m][0] else np.nan for m in metrics])
    up = np.array([outliers.higher_is_better(m) for m in metrics])
    with np.errstate(divide="ignore", invalid="ignore"):  # above 1: better than the fleet's median
        data = np.where(up, table.values / med, med / table.values)
    data[~np.isfinite(data)] = np.nan
    flagged = [(i, j) for i, n in enumerate(nodes) if n in bad for j, m in enumerate(metrics)
               if any(m in w for w in bad[n])]
    per_row = -(-len(nodes) // PICTURE_ROWS)  # a fleet of thousands: each row the worst of its nodes
    if per_row > 1:
        import warnings
        rows = -(-len(nodes) // per_row)
        pad = np.full((per_row * rows - len(nodes), len(metrics)), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN bin is NaN, as meant
            data = np.nanmin(np.vstack([data, pad]).reshape(rows, per_row, len(metrics)), axis=1)
        flagged = sorted({(i // per_row, j) for i, j in flagged})
        nodes = [f"{nodes[i * per_row]} +{per_row - 1}" for i in range(rows)]
        for i, _ in flagged:  # a row with a flagged node is labelled by it
            nodes[i] = next(n for n in table.names[i * per_row:(i + 1) * per_row] if n in bad)
    tall = len(nodes) > 60
    fig, ax = figures.figure(figsize=(min(2.5 + 0.9 * len(metrics), 30), 1.5 + (8 if tall else 0.3 * len(nodes))))
    im = ax.imshow(data, cmap="viridis", vmin=0.5, vmax=1.1, aspect="auto", interpolation="nearest")
    for i, j in flagged:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#D55E00", lw=2))
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels(metrics, rotation=40, ha="right", fontsize=8)
    named = sorted({i for i, _ in flagged}) if tall else range(len(nodes))
    ax.set_yticks(list(named))
    ax.set_yticklabels([nodes[i] for i in named], fontsize=7 if tall else 8)
    ax.set_title(f"fleet: {len(table.names)} nodes" + (f", each row the worst of {per_row}" if per_row > 1 else ""),
                 fontsize=9)
    fig.colorbar(im, ax=ax, label="value / fleet median (1 = the median; lower is worse)")
    return figures.save(fig, path)


def _num(v) -> float | None:
    return None if v != v else float(v)  # NaN: the node has no such value


def _cell(v) -> str:
    return "-" if v is None or v != v else f"{v:.4g}"
