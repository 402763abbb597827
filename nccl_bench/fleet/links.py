"""The network between nodes, from 2-node bench files (one per pair of nodes): is a slow pair its link, or one
of its nodes?

A pair is slow when its bus bandwidth is below (1 - margin) x the fleet's reference: the median of its best
quarter of pairs (a fault only ever takes bandwidth away, so a fleet's fastest pairs are its healthy ones, even
where many pairs are slow, as in a small fleet with one bad node), or a floor the user gives (`--link-floor`,
from the NICs' rate or a recorded fleet). Then:

- a node slow with every partner, and with at least MIN_PARTNERS of them, is the node (its NIC, its cable, its
  PCIe): named as a node, and its pairs are explained by it;
- a slow pair not explained by a named node is its link (a cable, a switch port, a route between the two):
  named as a link, with what each of its nodes reaches with its other partners;
- a slow pair whose nodes were measured with no other partner cannot be told apart: named as a pair, and said.

A pair measured more than once (fleet run measures a pair again before naming its link: `to_confirm`) counts
its fastest measurement, as a pair's bench counts its fastest iteration: noise only ever takes bandwidth away,
and a fault takes it every time. A node slow with every partner is named from pairs measured in rounds of their
own, at different times: that is its confirmation.
"""
from __future__ import annotations

from dataclasses import dataclass

MARGIN = 0.25  # below 75 % of the reference: healthy links of one fabric agree within a few percent
MIN_PARTNERS = 2  # a node is judged on its own from this many partners up


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    busbw: float | None  # GB/s; None where the file held no finite bandwidth
    metric: str
    file: str
    evidence: tuple[str, ...] = ()  # wrong values: the pair fails whatever its speed
    tries: tuple[float | None, ...] = ()  # every measurement of the pair, in the order given, where more than one

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"


@dataclass
class Links:
    reference: float | None  # GB/s a healthy pair reaches
    source: str  # where the reference came from, said beside every verdict
    slow: list[Pair]
    nodes: dict[str, str]  # node -> why it is named
    links: dict[str, str]  # "a-b" -> why the link is named
    pairs: list[Pair]
    margin: float

    def line(self) -> str:
        ref = f"{self.reference:.3g} GB/s ({self.source})" if self.reference else self.source
        return (f"{len(self.pairs)} pair(s) of {len({p.a for p in self.pairs} | {p.b for p in self.pairs})} nodes, "
                f"{len(self.slow)} slow (below {1 - self.margin:.0%} of {ref})")


def reference(pairs: list[Pair], floor: float | None) -> tuple[float | None, str]:
    if floor is not None:
        return floor, "the --link-floor given"
    bws = sorted((p.busbw for p in pairs if p.busbw), reverse=True)
    if not bws:
        return None, "no pair measured a bandwidth"
    best = bws[:max(1, len(bws) // 4)]
    return best[len(best) // 2], f"the median of the fleet's best {len(best)} of {len(bws)} pairs"


def fold(pairs: list[Pair]) -> list[Pair]:
    """One Pair per pair of nodes, in the order first given: the fastest of its measurements (its file and metric),
    with the evidence of them all."""
    by_name: dict[str, list[Pair]] = {}
    for p in pairs:
        by_name.setdefault(p.name, []).append(p)
    out = []
    for same in by_name.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        best = max(same, key=lambda p: -1.0 if p.busbw is None else p.busbw)
        evidence = tuple(dict.fromkeys(e for p in same for e in p.evidence))
        out.append(Pair(best.a, best.b, best.busbw, best.metric, best.file, evidence, tuple(p.busbw for p in same)))
    return out


def measured(p: Pair) -> int:
    return max(1, len(p.tries))


def to_confirm(net: Links, times: int) -> list[Pair]:
    """The pairs a link would be named for on their bandwidth alone, measured fewer than `times` times: measured
    again before the verdict. A pair with wrong values or no bandwidth is named on that, whatever its speed."""
    return [p for p in net.slow if p.name in net.links and p.busbw is not None and not p.evidence
            and measured(p) < times]


def judge(pairs: list[Pair], margin: float = MARGIN, floor: float | None = None) -> Links:
    pairs = fold(pairs)
    ref, source = reference(pairs, floor)
    cut = None if ref is None else (1 - margin) * ref
    slow = [p for p in pairs if p.evidence or p.busbw is None or (cut is not None and p.busbw < cut)]
    slow_names = {p.name for p in slow}
    partners: dict[str, list[Pair]] = {}
    for p in pairs:
        partners.setdefault(p.a, []).append(p)
        partners.setdefault(p.b, []).append(p)
    nodes: dict[str, str] = {}
    for node, its in sorted(partners.items()):
        if len(its) >= MIN_PARTNERS and all(p.name in slow_names for p in its):
            nodes[node] = (f"slow with every partner: {len(its)} of {len(its)} pairs below {cut:.3g} GB/s "
                           f"({_list(its, node)}; a healthy pair {ref:.3g} GB/s, {source})" if cut is not None else
                           f"no bandwidth with any of its {len(its)} partners")
    links: dict[str, str] = {}
    for p in slow:
        if p.a in nodes or p.b in nodes:
            continue  # its named node explains it
        if p.evidence:
            links[p.name] = "; ".join(p.evidence)
            continue
        others = {n: [q for q in partners[n] if q.name != p.name] for n in (p.a, p.b)}
        if not others[p.a] and not others[p.b]:
            links[p.name] = (f"pair slow ({_bw(p)} GB/s{_tries(p)}, below {cut:.3g}) and neither node measured with "
                             "another partner: the link or either node")
            continue
        said = "; ".join(f"{n} with its other partners {_list(qs, n)}" for n, qs in others.items() if qs)
        links[p.name] = (f"{_bw(p)} GB/s between them{_tries(p)}, below {cut:.3g} (a healthy pair {ref:.3g} GB/s, "
                         f"{source}); {said}")
    return Links(ref, source, slow, nodes, links, pairs, margin)


def _bw(p: Pair) -> str:
    return "no" if p.busbw is None else f"{p.busbw:.3g}"


def _tries(p: Pair) -> str:
    if len(p.tries) < 2:
        return ""
    each = ", ".join("no" if t is None else f"{t:.3g}" for t in p.tries)
    return f" (the fastest of {len(p.tries)} measurements: {each})"


def _list(pairs: list[Pair], node: str) -> str:
    return ", ".join(f"{p.b if p.a == node else p.a} {_bw(p)}" for p in pairs[:6]) + (" ..." if len(pairs) > 6 else "")
