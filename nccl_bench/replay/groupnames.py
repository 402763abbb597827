"""One group, one name, across the ranks that recorded it.

A group is told apart by its name (its process group's name), never by its ranks: a job can make several
groups of the same ranks (a DeviceMesh dimension, an enumerated subgroup and a split group of [0, 1], say).
But torch names a group made by `split_group` by a hash of its ranks and of how many groups the naming
process had made, and that count differs between processes: on torch 2.11, ranks 0 and 1 of one
`split_group([[0, 1], [2, 3]])` record it under two names (tests/fixtures/zoo/mesh). Those names are read
as one group only where nothing else fits: each name is held by part of the group's ranks, they agree on
the group's ranks and description, and their holders together are the group's ranks once each. Where a
rank holds several such names for the same ranks and description, the k-th it made goes with the k-th of
every other member (each rank lists its groups in the order it made them).
"""
from __future__ import annotations

Listed = dict[int, list[tuple[str, tuple[int, ...], str]]]  # rank -> [(name, ranks, desc)] in the order made


def joined(listed: Listed) -> tuple[dict[str, str], list[str]]:
    """({name: the name it is read as} for the names joined, a note for each group so read)."""
    holders: dict[str, set[int]] = {}
    shape: dict[str, tuple[tuple[int, ...], str]] = {}
    for r, groups in listed.items():
        for name, ranks, desc in groups:
            holders.setdefault(name, set()).add(r)
            shape.setdefault(name, (tuple(ranks), desc))
    partial = {name for name, h in holders.items() if h < set(shape[name][0])}
    # (ranks, desc) -> member rank -> its partial names of that shape, in the order it made them
    buckets: dict[tuple, dict[int, list[str]]] = {}
    for r, groups in sorted(listed.items()):
        for name, ranks, desc in groups:
            mine = buckets.setdefault(shape[name], {}).setdefault(r, [])
            if name in partial and name not in mine:
                mine.append(name)
    rename: dict[str, str] = {}
    notes = []
    for (ranks, desc), per_rank in buckets.items():
        for k in range(max(map(len, per_rank.values()), default=0)):
            names = {per_rank[r][k] for r in ranks if r in per_rank and k < len(per_rank[r])}
            covered = [r for name in names for r in holders[name]]
            if len(names) < 2 or sorted(covered) != sorted(ranks) or names & set(rename):
                continue  # not one group's names: each stays a group of its own (and is said incomplete)
            first = per_rank[min(ranks)][k]
            rename |= {name: first for name in names if name != first}
            who = "; ".join(f"{_short(name)} on rank(s) {sorted(holders[name])}" for name in sorted(
                names, key=lambda n: min(holders[n])))
            notes.append(f"group {desc or '(no description)'} {list(ranks)}: one group its ranks named apart ({who}), "
                         "read as one (torch names a split group by how many groups each process had made)")
    return rename, notes


def _short(name: str) -> str:
    return name if len(name) <= 12 else name[:8] + "..."
