"""Rank 0's account of a run, folded as rounds are kept: which rounds are done, the per-mode
tally, the leak watch's trends and any round kept twice. Its size depends on the plan's length
(one byte a round) and on the number of ranks, never on how many rounds have run; the journal
is the full record, and --resume replays it through the same fold."""
from __future__ import annotations

from nccl_bench.core.leaks import LeakWatch
from stress.tally import Tally
from stress.diagnose import History


class Ledger:
    def __init__(self, plan_len: int, modes: list[str], warmup: int, history: History, seq_of,
                 backend: str | None = None):
        self.done = bytearray(plan_len)  # seq -> 1 once the round is journaled
        self.seq_of = seq_of  # (mode, round) -> its seq in this run's plan (stress.plans.seq_of)
        self.tally = Tally(modes)
        self.leaks = LeakWatch(warmup, backend)
        self.history = history
        self.repeated = 0  # rounds journaled twice (a resume that went wrong)
        # the leak watch's x: inits in the order they ran, not seqs (a mode its --duration ended leaves its seqs
        # unrun, and a gap of phantom inits would flatten the slope per init); the same as the seq in a run of
        # every round from the first
        self.inits = 0

    def add(self, row: dict) -> None:
        seq = row["seq"]
        if 0 <= seq < len(self.done):
            self.repeated += self.done[seq]
            self.done[seq] = 1
        self.tally.add(row)
        for rec in row.get("ranks") or []:
            if rec and rec.sample:
                self.leaks.add(rec.rank, self.inits, rec.sample)
        self.inits += 1

    def replay(self, row: dict) -> None:
        """A round read back from the journal (--resume): its IDs join the history too. Its seq is this plan's,
        from its mode and round: the journal's was its own run's, whose --rounds (or --duration, which sizes them)
        may have been fewer, and the modes after the first began at other seqs then."""
        self.history.add(row["mode"], row["round"], row.get("ranks") or [])
        self.add({**row, "seq": self.seq_of(row["mode"], row["round"])})

    @property
    def rounds(self) -> int:
        return self.tally.rounds

    def failed(self) -> bool:
        return self.tally.failures > 0
