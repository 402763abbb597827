"""A fleet, node by node: metrics read from many nodes' accept, bench, locate and replay files
(nccl_bench.records.metrics), each node set
against the fleet by robust statistics and against its own profile's verdicts.

Per metric, over the nodes that have it: the median and the MAD (median absolute deviation, scaled
by 1.4826 to estimate a standard deviation). A node stands out when its value lies more than K (3.5,
Iglewicz and Hoaglin's cut) scaled MADs from the median on the bad side (low bandwidth, high latency)
and at least MIN_DEVIATION (5 %) away, so that a fleet of identical nodes does not flag a node for a
difference nobody would act on. That takes 3 nodes or more; with fewer, nodes are judged only
against their profiles. Apart from any statistics: wrong values, failed stress rounds, locate's
suspects and a FAIL against the profile flag a node on their own.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nccl_bench import records
from nccl_bench.fleet.links import Pair
from nccl_bench.core.errors import UsageError
from nccl_bench.records import metrics
from nccl_bench.records.metrics import higher_is_better

if TYPE_CHECKING:
    import numpy

K = 3.5
MIN_DEVIATION = 0.05
MAD_SCALE = 1.4826


@dataclass
class Node:
    name: str
    files: list[str] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)  # metric -> one value per file
    evidence: list[str] = field(default_factory=list)  # reasons of their own (wrong values, profile FAILs)
    kinds: dict[str, int] = field(default_factory=dict)  # files per kind: two of one kind are folded, and said
    _medians: dict[str, float | None] = field(default_factory=dict, repr=False)  # asked for per metric many times

    def value(self, metric: str) -> float | None:
        if metric not in self._medians:
            vs = sorted(self.values.get(metric) or [])
            self._medians[metric] = vs[len(vs) // 2] if vs else None
        return self._medians[metric]

    def add(self, other: "Node") -> None:
        """Another reading of the same node (its files read elsewhere) folded into this one."""
        self.files += other.files
        self.evidence += other.evidence
        for kind, n in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        for metric, vs in other.values.items():
            self.values.setdefault(metric, []).extend(vs)
        self._medians.clear()


PARALLEL_FROM = 400  # files; fewer are read in this process (a pool's start costs more than it saves)


def read(paths: list[str]) -> tuple[dict[str, Node], list[Pair]]:
    """Every file's metrics, by node (nccl_bench.records.metrics), and the pairs of nodes that 2-node bench
    files measured (fleet.links). Directories are read for *.json; a kind the fleet does not read is bad
    input. Many files are parsed by a pool of processes, one per core: a fleet's 12,500 accept files are
    250 MB of JSON, and parsing is what a verdict over them waits for."""
    files = result_files(paths)
    workers = min(len(os.sched_getaffinity(0)), len(files) // (PARALLEL_FROM // 2))
    if workers < 2 or len(files) < PARALLEL_FROM:
        return _read(files)
    import concurrent.futures as cf
    import multiprocessing
    chunks = [files[i::workers * 4] for i in range(workers * 4)]  # interleaved: big and small files spread
    nodes: dict[str, Node] = {}
    pairs: list[Pair] = []
    # forkserver: a clean child however this process was started (threads of a caller are not copied)
    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
        for part, its_pairs in pool.map(_read, chunks):
            pairs += its_pairs
            for name, node in part.items():
                if name in nodes:
                    nodes[name].add(node)
                else:
                    nodes[name] = node
    given = {f: i for i, f in enumerate(files)}
    for node in nodes.values():  # a node's files in the order given, whichever worker read them
        if len(node.files) > 1:
            node.files.sort(key=given.__getitem__)
    pairs.sort(key=lambda p: given[p.file])
    return nodes, pairs


def result_files(paths: list[str]) -> list[str]:
    """The files named, and the *.json in folders named; none, or a path that is not there, is bad input."""
    files = []
    for p in paths:
        q = Path(p)
        if q.is_dir():
            files += sorted(str(f) for f in q.glob("*.json"))
        elif q.is_file():
            files.append(p)
        else:
            raise UsageError(f"{p}: no such file or folder")
    if not files:
        raise UsageError("no result files given (accept, bench or locate JSON, or folders of them)")
    return files


def _read(files: list[str]) -> tuple[dict[str, Node], list[Pair]]:
    nodes: dict[str, Node] = {}
    pairs: list[Pair] = []
    for f in files:
        res = records.load(f)
        if res.kind == "bench" and len(set(res.hosts)) == 2:  # a bench across two nodes measured their link
            pairs.append(_pair(res, f))
            continue
        got = metrics.of(res)
        name = metrics.node_of(res)
        node = nodes.setdefault(name, Node(name))
        node.files.append(f)
        node.kinds[res.kind] = node.kinds.get(res.kind, 0) + 1
        node.evidence += got.evidence
        for metric, v in got.values.items():
            node.values.setdefault(metric, []).append(float(v))
    return nodes, pairs


def _pair(res, file: str) -> Pair:
    """A 2-node bench as the link between its nodes: all_reduce's bus bandwidth at its largest size where it ran,
    else the first collective's (any size: a pair is measured where it is asked). Where the bench timed each
    iteration (-I 1, as fleet run asks), the fastest iteration of either place: what the link can do, since
    noise on a node only ever adds time."""
    a, b = sorted(set(res.hosts))
    rows = sorted((r.get("collective") != "all_reduce", -int(r.get("size") or 0), i) for i, r in enumerate(res.rows))
    wrong = sum(int((r.get(p) or {}).get("nwrong") or 0) for r in res.rows for p in ("out_of_place", "in_place"))
    evidence = (f"{wrong} wrong values in the bench between them ({Path(file).name})",) if wrong else ()
    if not rows:
        return Pair(a, b, None, "busbw", file, (*evidence, f"no rows in {Path(file).name}"))
    top = res.rows[rows[0][2]]
    metric = f"busbw {top.get('collective', '?')} {metrics.size_label(int(top.get('size') or 0))}"
    bw = _finite((top.get("out_of_place") or {}).get("bus_bw"))
    best = []
    for place in ("out_of_place", "in_place"):
        timed, fastest = top.get(place) or {}, (top.get(f"{place}_per_iter") or {}).get("min_us")
        if _finite(timed.get("bus_bw")) and _finite(timed.get("time")) and _finite(fastest) and fastest > 0:
            best.append(timed["bus_bw"] * timed["time"] / fastest)  # busbw scales as 1 / time
    if best:
        bw, metric = max(best), metric + " (fastest iteration)"
    return Pair(a, b, bw, metric, file, evidence)


def _finite(v) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
    return float(v) if ok else None


def folded(nodes: dict[str, Node]) -> list[str]:
    """A line for each node that more than one file of a kind speaks for: its values are their median."""
    def files(node: Node) -> str:
        return ", ".join(Path(f).name for f in node.files)
    return [f"{name}: {n} {kind} files from this host, each metric their median ({files(node)})"
            for name, node in sorted(nodes.items()) for kind, n in node.kinds.items() if n > 1]


@dataclass
class Finding:
    node: str
    metric: str
    value: float
    median: float
    z: float | None  # robust z (None where the MAD is 0)
    words: str


@dataclass
class Grid:
    """Every node's value of every metric, once: nodes x metrics (NaN where a node has none), nodes by name."""
    names: list[str]
    metrics: list[str]
    values: "numpy.ndarray"


def grid(nodes: dict[str, Node]) -> Grid:
    import numpy as np
    names = sorted(nodes)
    metrics = sorted({m for n in nodes.values() for m in n.values})
    col = {m: j for j, m in enumerate(metrics)}
    values = np.full((len(names), len(metrics)), np.nan)
    for i, name in enumerate(names):
        for metric, vs in nodes[name].values.items():  # most nodes hold one value per metric: no median to take
            values[i, col[metric]] = vs[0] if len(vs) == 1 else nodes[name].value(metric)
    return Grid(names, metrics, values)


def outliers(nodes: dict[str, Node], k: float = K, min_dev: float = MIN_DEVIATION,
             table: Grid | None = None) -> tuple[list[Finding], dict]:
    """Nodes far from the fleet on the bad side, per metric; and {metric: (median, scaled MAD, n)}."""
    import numpy as np
    table = table or grid(nodes)
    stats, found = {}, []
    for j, metric in enumerate(table.metrics):
        column = table.values[:, j]
        have = ~np.isnan(column)
        xs = column[have]
        if len(xs) < 3:
            continue
        med = float(np.median(xs))
        mad = MAD_SCALE * float(np.median(np.abs(xs - med)))
        stats[metric] = (med, mad, len(xs))
        good = higher_is_better(metric)
        dev = (column - med) / med if med else np.zeros_like(column)
        bad_side = (dev < -min_dev) if good else (dev > min_dev)
        far = bad_side & have & ((np.abs(column - med) > k * mad) if mad > 0 else True)
        for i in np.flatnonzero(far):
            v, d = float(column[i]), float(dev[i])
            z = (v - med) / mad if mad > 0 else None
            found.append(Finding(table.names[i], metric, v, med, z,
                                 f"{metric} {v:.4g}, fleet median {med:.4g} ({abs(d) * 100:.0f} % "
                                 f"{'below' if good else 'above'}"
                                 + (f", {abs(z):.1f} scaled MADs" if z is not None else ", the fleet agrees "
                                    "to the last digit") + f", {len(xs)} nodes)"))
    return found, stats


def verdict(nodes: dict[str, Node], k: float = K, min_dev: float = MIN_DEVIATION,
            table: Grid | None = None) -> tuple[dict, dict]:
    """{node: [reasons]} for every flagged node (outliers first, then evidence of its own); fleet stats."""
    found, stats = outliers(nodes, k, min_dev, table)
    bad: dict[str, list[str]] = {}
    for f in found:
        bad.setdefault(f.node, []).append(f.words)
    for name, n in nodes.items():
        if n.evidence:
            bad.setdefault(name, []).extend(n.evidence)
    return dict(sorted(bad.items())), stats
