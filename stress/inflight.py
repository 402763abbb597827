"""Rounds whose communicators are still being torn down (`--destroys-in-flight K`).

A round hands its communicator to a Reaper and the next round starts at once. Its row is
judged as soon as the ranks report, but journaled only once every rank's teardown of that
communicator is known, so the journal holds complete rounds only and `--resume` stays
exact: a kill -9 loses at most the round in flight and the K rounds behind it.

The outcomes travel through the store under `stress/<seq>/down/<rank>`. Before round M
starts, each rank publishes every teardown that has finished and waits for its own of
round M - K - 1; round M's start barrier then proves every rank has published it, and
each rank reads them all. Every rank completes the same rows from the same outcomes, so
they all decide alike (a failed destroy, `--on-failure stop`, the exit code).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import timedelta

from nccl_bench.comm.reaper import Reaper
from stress.diagnose import History, judge

DESTROY_GRACE_S = 10.0  # a teardown must end within the round's deadline plus this, from its hand-over


def worst(records: list, key: str, n: int) -> float | None:
    """The slowest rank's value in ms, when every rank has one."""
    vals = [getattr(x, key) for x in records if x and getattr(x, key) is not None]
    return max(vals) * 1e3 if vals and len(vals) == n else None


class Behind:
    """Judged rows waiting for their teardowns, in round order, on one rank."""

    def __init__(self, job, depth: int, timeout: float, history: History):
        self.job, self.depth, self.history = job, depth, history
        self.reaper = Reaper(timeout + DESTROY_GRACE_S)
        self.rows: list[tuple[dict, list, dict]] = []  # (row, missing, judge context)
        self.mine: dict[int, dict | None] = {}  # seq -> this rank's outcome, once published
        self.sent: set[int] = set()  # seqs whose outcome this rank has published

    def due(self, seq: int) -> int:
        """The last round whose teardown must be known before round `seq` starts (K = depth behind it)."""
        return seq - self.depth - 1

    def add(self, row: dict, missing: list, context: dict) -> None:
        self.rows.append((row, missing, context))

    def _key(self, seq: int, rank: int) -> str:
        return f"stress/{seq}/down/{rank}"

    def _publish(self, seq: int) -> None:
        out = self.reaper.outcome(seq)  # None: this rank had nothing to tear down (it never joined)
        self.mine[seq] = None if out is None else asdict(out)
        self.sent.add(seq)
        try:
            self.job.store.raw.set(self._key(seq, self.job.rank), json.dumps(self.mine[seq]))
        except Exception:
            pass  # the store is gone: the round that noticed says so; this rank's outcome stays local

    def publish(self, upto: int) -> None:
        """Publish every finished teardown, and wait (up to its deadline) for those of rounds <= upto."""
        for row, _, _ in self.rows:
            seq = row["seq"]
            if seq not in self.sent and (seq <= upto or seq not in self.reaper.pending()
                                         or self.reaper.finished(seq)):
                self._publish(seq)

    def collect(self, upto: int, wait_s: float = 0.0) -> list[dict]:
        """The rows of rounds <= upto, completed with every rank's teardown (unknown where a rank never
        published within `wait_s`), in order; they leave this object."""
        done = [x for x in self.rows if x[0]["seq"] <= upto]
        self.rows = [x for x in self.rows if x[0]["seq"] > upto]
        end = time.monotonic() + wait_s  # one budget for all of them
        for row, missing, context in done:
            self.complete(row, missing, context, self.outcomes(row["seq"], max(0.0, end - time.monotonic())))
        return [row for row, _, _ in done]

    def outcomes(self, seq: int, wait_s: float) -> list[dict | None]:
        n, raw = self.job.nranks, self.job.store.raw
        keys = [self._key(seq, r) for r in range(n)]
        got = [None] * n
        try:
            if wait_s > 0:
                try:
                    raw.wait(keys, timedelta(seconds=wait_s))
                except Exception:
                    pass  # someone never published: what is there is read below
            for r, k in enumerate(keys):
                if raw.check([k]):
                    got[r] = json.loads(raw.get(k)) or {"none": True}
        except Exception:
            pass  # store gone: only this rank's own outcome is known
        mine = self.mine.pop(seq, None)
        self.sent.discard(seq)
        if got[self.job.rank] is None and mine is not None:
            got[self.job.rank] = mine
        return got

    def complete(self, row: dict, missing: list, context: dict, outs: list[dict | None]) -> None:
        """Teardown seconds per rank; a destroy that failed or ran past its deadline fails the round on
        that rank, as it would have inside the round, and the round is judged again."""
        records = row["ranks"]
        changed = False
        for rec in records:
            o = outs[rec.rank] if rec else None
            if not o or o.get("none"):
                continue  # unknown (the rank never published) or nothing to tear down
            rec.teardown_s = o["seconds"]
            if not o["ok"]:
                rec.teardown_error = o["error"]
                if rec.verdict == "ok":
                    rec.verdict, rec.error = o["error"]["kind"], o["error"]
                    changed = True
        row["destroy_ms"] = worst(records, "teardown_s", self.job.nranks)
        unknown = [r for r in range(self.job.nranks) if outs[r] is None]
        if unknown:  # e.g. a rank that died before it published: its teardown is not known
            row["teardown_unknown"] = unknown
        if changed:
            row.update(judge(row["mode"], row["round"], self.job.nranks, records, missing, self.history, context))

    def drain(self, wait_s: float) -> list[dict]:
        """Every row left, completed: wait for this rank's teardowns, then for the others' outcomes.
        Teardowns of rounds that have no row here (a lost round's) are waited for too, before the exit."""
        self.publish(float("inf"))
        for seq in self.reaper.pending():
            self.reaper.outcome(seq)
        return self.collect(float("inf"), wait_s)
