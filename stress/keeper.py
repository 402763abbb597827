"""Rank 0's account of a run: the journal (opened new or resumed), the ledger of kept rounds, the progress
line and the failures shown, the closing lines and the summary. Every other rank only counts its failures."""
from __future__ import annotations

import time
from pathlib import Path

from nccl_bench.core import resources, sysinfo
from nccl_bench.core.errors import EXIT_FAILED, EXIT_OK
from stress import journal, plans
from stress.closing import (SHOWN_FAILURES, announce_lines, report_lines, start_line, summary_path,
                            write_summary)
from stress.diagnose import History
from stress.ledger import Ledger
from stress.options import StressOptions, duration_words
from stress.summary import Progress, Rate, failure_line


class Keeper:
    def __init__(self, job, opts: StressOptions, path: Path, plan_len: int, history: History, restart: int):
        self.job, self.opts, self.path, self.restart = job, opts, path, restart
        self.identity = opts.identity(job.nranks)
        warmup = resources.default_warmup(plan_len) if opts.leak_warmup is None else opts.leak_warmup
        self.ledger = Ledger(plan_len, list(opts.job.init), warmup, history, plans.seq_of(opts), opts.job.backend)
        # a restarted group continues the journal its predecessor was writing
        self.resume = opts.resume or (restart > 0 and path.exists())
        self.writer: journal.Writer | None = None
        self.notes: list[dict] = []  # the journal's non-round lines, earlier runs included (a few)
        self.progress, self.rate = Progress(), Rate()
        self.failed = 0  # this rank's failed rounds
        self.shown: dict[str, int] = {}  # failures printed per mode
        self.start_said: str | None = None  # rank 0: every rank's start in a line, said before round 0

    def open(self, hosts) -> list[list[int]] | None:
        """The seqs already done (resume, as [first, end) ranges) after checking the journal (read back
        through the ledger, one round at a time); a new journal's header. None: a restarted group whose run
        had finished. `hosts()` names every rank's host (ranks on other nodes may still be connecting)."""
        if self.resume:
            contents = journal.read(self.path, on_round=self.ledger.replay)
            journal.check_resumable(contents, self.identity, self.path)
            self.notes = contents.notes
            if self.restart and contents.ended:
                return None
            self.writer = journal.Writer(self.path)
            self.note({"type": "resume", "after_rounds": self.ledger.rounds, "torn_lines": contents.torn,
                       "restart": self.restart, "time": time.time()})
        else:
            journal.check_new(self.path)
            self.writer = journal.Writer(self.path, {
                "options": self.identity, "time": time.time(),
                "meta": sysinfo.collect(self.opts.job.backend, sorted(set(hosts())))})
        return ranges(self.ledger.done)

    def note(self, obj: dict) -> None:
        self.notes.append(obj)
        self.writer.note(obj)

    def started(self, starts: list[dict]) -> None:
        """Rank 0: every rank's start (its seconds, or the error that ended it) journaled and said in one line."""
        self.note({"type": "start", "ranks": starts, "time": time.time()})
        self.start_said = start_line(starts, self.opts.job.backend)
        if any(s.get("error") for s in starts):  # said at once: no round follows
            print(self.start_said, flush=True)

    def keep(self, rows: list[dict]) -> None:
        """Rounds whose every part is known: rank 0 journals them; every rank counts its failures."""
        for row in rows:
            failed = row["verdict"] != "ok"
            self.failed += failed
            if self.job.rank != 0:
                continue
            mode = row["mode"]
            self.writer.round(row)
            self.ledger.add(row)
            self.progress.update(mode, row["round"] + 1, self.opts.rounds, self.failed, self.rate.tick())
            if failed:
                self.shown[mode] = self.shown.get(mode, 0) + 1
                if self.shown[mode] <= SHOWN_FAILURES:
                    self.say(failure_line(row))

    def say(self, line: str) -> None:
        self.progress.clear()
        print(line, flush=True)

    def announce(self, done: int, todo: int, ended: tuple[str, ...] = ()) -> None:
        if self.job.rank == 0:
            for line in announce_lines(self.opts, self.job.nranks, self.path, self.resume, self.restart, done, todo,
                                       ended):
                print(line, flush=True)
            if self.start_said:
                print(self.start_said, flush=True)

    def modes_ended(self) -> list[str]:
        """The modes whose --duration the journal says was up (a resumed or restarted run goes on after them)."""
        return [n["mode"] for n in self.notes if n.get("type") == "duration" and isinstance(n.get("mode"), str)]

    def mode_ended(self, mode: str, after_round: int, duration: float) -> None:
        """A mode's --duration is up: said and journaled by rank 0 (the other modes, and the verdict, follow)."""
        if self.job.rank != 0:
            return
        self.say(f"stress: {mode}: --duration {duration_words(duration)} reached after round {after_round} "
                 f"({after_round + 1} of {self.opts.rounds} rounds)")
        self.note({"type": "duration", "mode": mode, "after_round": after_round, "duration_s": duration,
                   "time": time.time()})

    def stopped(self, cut: dict, restarts_left: int) -> None:
        self.writer.note({"type": "stopped", **cut, "restarts_left": restarts_left, "time": time.time()})
        self.progress.clear()

    def finish(self, base: dict | None, failed: bool = False) -> int:
        """The closing lines, the journal's end line and the summary; the run's exit code (1 where the ledger
        holds a failure, or `failed`: a rank could not start)."""
        self.progress.clear()
        findings = self.ledger.leaks.findings() if self.opts.leak_every else []
        restarts = [n for n in self.notes if n.get("type") == "resume" and n.get("restart")]
        for line in report_lines(self.ledger, self.opts, base, self.shown, restarts, findings):
            print(line, flush=True)
        self.writer.note({"type": "end", "summary": self.ledger.tally.table(), "baseline": base,
                          "restarts": len(restarts), "leaks": findings, "time": time.time()})
        self.writer.close()
        journal_path = self.writer.path  # where the journal went on, if the disk filled up
        path = Path(self.opts.summary_json) if self.opts.summary_json else summary_path(journal_path)
        path = write_summary(path, self.ledger, base, self.identity, journal_path, len(restarts), findings)
        print(f"summary: {path}", flush=True)
        leaked = self.opts.fail_on_leak and any(f["verdict"] == "LEAK" for f in findings)
        return EXIT_FAILED if failed or self.ledger.failed() or leaked else EXIT_OK


def ranges(done: bytearray) -> list[list[int]]:
    """The set bytes of `done` as [first, end) ranges: a resumed soak's done rounds in a few numbers."""
    out, i, n = [], 0, len(done)
    while i < n:
        if done[i]:
            j = done.find(0, i)
            j = n if j < 0 else j
            out.append([i, j])
            i = j
        else:
            j = done.find(1, i)
            i = n if j < 0 else j
    return out
