"""After each round, every rank's record through the store: bounded, so that a rank that never
arrives is named instead of waited for, and a store whose host went away is told apart."""
from __future__ import annotations

import json
import time
from datetime import timedelta

import torch.distributed as dist

from stress import peers
from stress.record import RankRecord
from stress.stop import Stop


POLL_S = 0.25  # gather: how often to look for ranks that died instead of reporting
LOST_WAIT_S = 5.0  # the next round's start, for ranks not heard from since they missed a gather


def grace(backend: str) -> float:
    """What a gather waits past the deadline: a hung rank's abort (and for the torch backend, PyTorch's
    own grace after it) must fit inside. gloo aborts nothing: its inits end at the deadline."""
    return 5.0 if backend == "gloo" else 15.0


def start_wait(raw, last: tuple[int, list[int]], usual: float) -> float:
    """How long the next round's start barrier waits: `usual`, unless ranks that missed the last
    gather (`last`: its seq, the missing ranks) have not written their record since, even late. A
    slow rank writes it; a node cut off from the store, or a process gone, never will: then
    LOST_WAIT_S, and the run ends on that evidence instead of waiting the full resync."""
    seq, missing = last
    if missing and any(not raw.check([f"stress/{seq}/rec/{r}"]) for r in missing):
        return LOST_WAIT_S
    return usual


class StoreLost(Exception):
    """The job store's host went away: store calls fail with a network error."""

    def __init__(self, rank: int, error: str, phase: str):
        self.info = {"rank": rank, "error": error, "phase": phase}
        super().__init__(f"rank {rank}: job store lost in {phase}: {error}")


def store_lost(e: Exception, rank: int, phase: str) -> StoreLost | None:
    """A network error from the store (not a timeout) means its host is gone."""
    if isinstance(e, dist.DistNetworkError) or isinstance(e, ConnectionError):
        return StoreLost(rank, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120] if str(e).strip() else ''}",
                         phase)
    return None


def gather(job, seq: int, rec: RankRecord, timeout: float, everyone: peers.Peers, stop: Stop,
           stop_grace: float) -> tuple[list, list, dict]:
    """Every rank's record (None for a rank that never reported), [(rank, host)] missing, and
    the missing ranks found dead. Waiting ends early once every missing rank is dead, or a
    while after the launcher asked us to stop; a lost store raises StoreLost."""
    raw, n = job.store.raw, job.nranks
    keys = [f"stress/{seq}/rec/{r}" for r in range(n)]
    name = f"stress/{seq}/rec"
    try:
        raw.set(keys[job.rank], json.dumps(rec.to_json()))
        if raw.add(f"{name}/count", 1) == n:
            raw.set(f"{name}/done", b"1")
        end = time.monotonic() + timeout
        while True:
            try:
                raw.wait([f"{name}/done"], timedelta(seconds=min(POLL_S, max(end - time.monotonic(), 0.001))))
                return [RankRecord.from_json(json.loads(v)) for v in raw.multi_get(keys)], [], {}
            except dist.DistNetworkError:
                raise
            except Exception:
                pass  # one slice passed: look at who is missing
            present = [raw.check([k]) for k in keys]
            missing = [r for r in range(n) if not present[r]]
            dead = everyone.dead(missing)
            now = time.monotonic()
            if now >= end or len(dead) == len(missing) or (stop.requested and now - stop.since > stop_grace):
                recs = [RankRecord.from_json(json.loads(raw.get(k))) if present[r] else None
                        for r, k in enumerate(keys)]
                return recs, [(r, job.store.host_of(r)) for r in missing], dead
    except Exception as e:  # a lost store's network error is told apart below; anything else goes on up
        lost = store_lost(e, job.rank, "gather")
        if lost is None:
            raise
        raise lost from None
