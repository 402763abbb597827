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

from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench import records
from nccl_bench.core.errors import UsageError
from nccl_bench.records import metrics
from nccl_bench.records.metrics import higher_is_better

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

    def value(self, metric: str) -> float | None:
        vs = sorted(self.values.get(metric) or [])
        return vs[len(vs) // 2] if vs else None


def read(paths: list[str]) -> dict[str, Node]:
    """Every file's metrics, by node (nccl_bench.records.metrics). Directories are read for *.json; a kind
    the fleet does not read is bad input."""
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
    nodes: dict[str, Node] = {}
    for f in files:
        res = records.load(f)
        got = metrics.of(res)
        name = metrics.node_of(res)
        node = nodes.setdefault(name, Node(name))
        node.files.append(f)
        node.kinds[res.kind] = node.kinds.get(res.kind, 0) + 1
        node.evidence += got.evidence
        for metric, v in got.values.items():
            node.values.setdefault(metric, []).append(float(v))
    return nodes


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


def outliers(nodes: dict[str, Node], k: float = K, min_dev: float = MIN_DEVIATION) -> tuple[list[Finding], dict]:
    """Nodes far from the fleet on the bad side, per metric; and {metric: (median, scaled MAD, n)}."""
    stats, found = {}, []
    metrics = sorted({m for n in nodes.values() for m in n.values})
    for metric in metrics:
        vals = {name: v for name, n in nodes.items() if (v := n.value(metric)) is not None}
        if len(vals) < 3:
            continue
        xs = sorted(vals.values())
        med = _median(xs)
        mad = MAD_SCALE * _median(sorted(abs(x - med) for x in xs))
        stats[metric] = (med, mad, len(xs))
        good = higher_is_better(metric)
        for name, v in vals.items():
            dev = (v - med) / med if med else 0.0
            bad_side = dev < -min_dev if good else dev > min_dev
            z = (v - med) / mad if mad > 0 else None
            if bad_side and (z is None or abs(z) > k):
                found.append(Finding(name, metric, v, med, z,
                                     f"{metric} {v:.4g}, fleet median {med:.4g} ({abs(dev) * 100:.0f} % "
                                     f"{'below' if good else 'above'}"
                                     + (f", {abs(z):.1f} scaled MADs" if z is not None else ", the fleet agrees "
                                        "to the last digit") + f", {len(xs)} nodes)"))
    return found, stats


def _median(xs: list[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def verdict(nodes: dict[str, Node], k: float = K, min_dev: float = MIN_DEVIATION) -> tuple[dict, dict]:
    """{node: [reasons]} for every flagged node (outliers first, then evidence of its own); fleet stats."""
    found, stats = outliers(nodes, k, min_dev)
    bad: dict[str, list[str]] = {}
    for f in found:
        bad.setdefault(f.node, []).append(f.words)
    for name, n in nodes.items():
        if n.evidence:
            bad.setdefault(name, []).extend(n.evidence)
    return dict(sorted(bad.items())), stats
