"""Store keys of finished rounds, deleted: the job store (hosted by rank 0) holds O(K) rounds'
keys, not every round's, so a soak's store does not grow with its rounds.

Each rank deletes the keys it wrote itself (its record, its phase marks, its teardown outcome,
its barrier arrival, the ID it published as a root), rank 0 also the counters every rank adds
to. A round's keys go once every rank is known to be done with them: at round M's start barrier
every rank has read everything of rounds <= M - K - 2 (K destroys in flight; stress.inflight). An
ID published under `stock`'s shared keys is never deleted: the next init overwrites it, and a
slow reader seeing the old one is the bug this tool reproduces.
"""
from __future__ import annotations

from collections import deque

from stress.record import RankRecord


def own_keys(seq: int, rank: int, rec: RankRecord | None, behind: bool, check_ids: bool, held: bool) -> list[str]:
    """The keys this rank wrote for round `seq` (`held`: a stale-key injection made others mark their reads)."""
    keys = [f"stress/{seq}/rec/{rank}", f"stress/{seq}/at/{rank}", f"bar/stress/{seq}/start/{rank}"]
    if held:
        keys.append(f"stress/{seq}/read/{rank}")
    if behind:
        keys.append(f"stress/{seq}/down/{rank}")
    if check_ids:
        keys += [f"ag/stress/{seq}/ids/{rank}", f"bar/ag/stress/{seq}/ids/{rank}"]
    ev = (rec.evidence if rec else None) or {}
    root = ev.get("published_root", -1)
    if root is not None and root >= 0 and ev.get("namespace"):
        key = ev["keys"][root]
        if not key.startswith("UniqueNCCLID:"):  # stock's shared key: left for the next init to overwrite
            keys.append(f"{ev['namespace']}/{key}")
    if rank == 0:
        keys += [f"stress/{seq}/rec/count", f"stress/{seq}/rec/done", f"bar/stress/{seq}/start/count",
                 f"bar/stress/{seq}/start/done"]
        if check_ids:
            keys += [f"bar/ag/stress/{seq}/ids/count", f"bar/ag/stress/{seq}/ids/done"]
    return keys


class Sweeper:
    """This rank's keys of the rounds not yet known to be done with, deleted as they become so."""

    def __init__(self, store, depth: int):
        self.store, self.depth = store, depth
        self.pending: deque[tuple[int, list[str]]] = deque()

    def add(self, seq: int, keys: list[str]) -> None:
        self.pending.append((seq, keys))

    def started(self, seq: int) -> None:
        """Round `seq`'s start barrier has passed on every rank: delete what every rank is done with."""
        safe = seq - self.depth - 2
        while self.pending and self.pending[0][0] <= safe:
            _, keys = self.pending.popleft()
            for k in keys:
                try:
                    self.store.delete_key(k)
                except Exception:
                    return  # the store is gone: the round that noticed says so
