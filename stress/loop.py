"""The worker: rounds in order, each resynchronised, judged from every rank's evidence, journaled.

Every rank runs the same rounds (stress.judged: one round lined up, run, gathered and judged); rank 0
keeps the journal, the progress line and the summary (stress.keeper). After each round the ranks gather
their records through the store, bounded so that a rank that never arrives is named instead of waited for.
With destroys behind the rounds (stress.inflight) a round is kept once its teardown on every rank is known.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from nccl_bench import first_to_say
from nccl_bench.core.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from nccl_bench.comm import startcost
from stress import baseline, peers
from stress.closing import restarts_left
from stress.diagnose import History
from stress.inflight import Behind
from stress.judged import Deadlines, JudgedRound
from stress.keeper import Keeper
from stress.options import StressOptions
from stress.stall import StallGuard
from stress.stop import Stop

LEAVE_AFTER_LOSS_S = 2.0  # the exit barrier, when a rank died or the store went away


class Run:
    """One stress run on one rank: the plan of rounds, a judged round at a time, what is kept."""

    def __init__(self, job, opts: StressOptions, journal_path: str):
        self.job, self.opts = job, opts
        self.plan_len = opts.rounds * len(opts.job.init)
        self.deadlines = Deadlines.of(opts)
        history = History()
        self.restart = job.ident.restart  # > 0: the launcher restarted the worker group
        self.keeper = Keeper(job, opts, Path(journal_path), self.plan_len, history, self.restart)
        self.round = JudgedRound(job, opts, self.deadlines, history, self.restart)
        self.stop = Stop()
        self.ended: set[str] = set()  # modes whose --duration is up
        self.behind: Behind | None = None  # --destroys-in-flight > 0: rounds waiting for their teardown

    def plan(self):
        """(seq, mode, round) in order, made as they are needed: a soak's plan is not held. A mode whose
        --duration is up (self.ended) yields no more rounds."""
        rounds = self.opts.rounds
        for i, mode in enumerate(self.opts.job.init):
            for r in range(rounds):
                if mode in self.ended:
                    break
                yield i * rounds + r, mode, r

    def left_to_run(self, done: bytearray) -> int:
        """The rounds not done yet in the modes whose --duration is not up (a resumed run's)."""
        n = self.opts.rounds
        return sum(n - done.count(1, i * n, (i + 1) * n) for i, mode in enumerate(self.opts.job.init)
                   if mode not in self.ended)

    def start(self) -> bytearray | dict | None:
        """Agree on the seqs to skip and share pids; None when rank 0 could not open the journal
        (exit 2); {'ended': code} when a restarted group finds its run already finished, or when a
        rank could not start (exit 1). Every rank pays its start (nccl_bench.comm.startcost) before
        round 0, so that no round's deadline holds it."""
        job, keeper = self.job, self.keeper
        mine = {"me": peers.me(job)}
        if job.rank == 0:
            try:
                done = keeper.open(lambda: job.store.hosts(self.deadlines.resync))
                mine.update({"done": done, "modes_ended": keeper.modes_ended()} if done is not None else
                            {"ended": EXIT_FAILED if keeper.ledger.failed() else EXIT_OK})
            except UsageError as e:
                mine["error"] = str(e)
        if "error" not in mine:
            mine["start"] = startcost.pay_once(self.opts.job.backend, job, self.opts.job.timeout).as_dict()
        wait = self.deadlines.resync + startcost.start_bound(self.opts.job.timeout)
        every = job.store.all_gather_obj("stress/start", mine, timeout=wait)
        self.round.everyone = peers.Peers(mine["me"], [e["me"] for e in every])
        got = every[0]
        if "error" in got:
            if job.rank == 0:
                raise UsageError(got["error"])
            return None
        if "ended" in got:
            return {"ended": got["ended"]}
        starts = [e.get("start") or {} for e in every]
        if job.rank == 0:
            keeper.started(starts)
        if any(s.get("error") for s in starts):
            return {"start_failed": True}
        self.ended.update(got.get("modes_ended") or [])  # a resumed or restarted run never reopens such a mode
        done = bytearray(self.plan_len)
        for first, end in got["done"]:
            done[first:end] = b"\x01" * (end - first)
        return done

    def __call__(self) -> int:
        job, opts, keeper = self.job, self.opts, self.keeper
        self.stop.install()
        done = self.start()
        if done is None:
            return EXIT_USAGE
        if isinstance(done, dict) and done.get("start_failed"):  # a rank could not start: no round can run
            return keeper.finish(None, failed=True) if job.rank == 0 else EXIT_FAILED
        if isinstance(done, dict):  # restarted after the run had finished: say so, add nothing
            if job.rank == 0:
                print(f"stress: restart {self.restart} found {keeper.path} already complete "
                      f"({keeper.ledger.rounds} rounds); nothing to run", flush=True)
            return done["ended"]
        todo = (p for p in self.plan() if not done[p[0]])
        keeper.announce(done.count(1), self.left_to_run(done), tuple(m for m in opts.job.init if m in self.ended))
        base = None
        if opts.baseline:
            base = baseline.measure(job, opts.job.backend, opts.job.ranks_per_root, opts.baseline,
                                    opts.job.timeout, self.round.verify)
            if keeper.writer:
                keeper.note({"type": "baseline", **base})
        k = opts.destroys_in_flight
        self.behind = Behind(job, k, opts.job.timeout, self.round.history) if k else None
        try:
            with StallGuard(2 * (self.deadlines.gather + self.deadlines.resync) + 30.0, job.rank) as guard:
                cut = self.rounds(todo, guard)
        except KeyboardInterrupt:  # Ctrl-C: journal the rounds behind (as far as their teardown is known)
            self.drain(LEAVE_AFTER_LOSS_S)
            raise
        self.drain(self.deadlines.gather if cut is None else LEAVE_AFTER_LOSS_S)
        if job.rank != 0:
            return EXIT_FAILED if keeper.failed else EXIT_OK
        if cut is not None:
            left = restarts_left(self.restart)
            keeper.stopped(cut, left)
            if left > 0:  # not the end: the restarted group resumes this journal
                print(f"stress: stopped after {cut['mode']} round {cut['after_round']} ({cut['reason']}); the "
                      f"launcher restarts the worker group ({left} restarts left), which resumes the journal",
                      flush=True)
                keeper.writer.close()
                return EXIT_FAILED
            if first_to_say():  # a stop's one line (the launcher then says nothing more)
                print(f"stress: stopped after {cut['mode']} round {cut['after_round']} ({cut['reason']}); "
                      f"--resume goes on from the journal", flush=True)
        return keeper.finish(base)

    def rounds(self, todo, guard) -> dict | None:
        """The rounds in order; why the run was cut short, or None. Rows are kept as they complete."""
        cut, current = None, None
        last = time.perf_counter()
        for seq, mode, r in todo:
            if mode != current:  # a mode's --duration counts from its first round here (a resume's too)
                current = mode
                self.stop.arm(self.opts.duration)
            if self.behind:  # backpressure: the due round's teardown ends before this round starts
                self.behind.publish(self.behind.due(seq))
            row = self.round.one(seq, mode, r, self.behind, self.stop, self.keeper.keep)
            self.round.finished(row)
            guard.tick()
            now = time.perf_counter()
            row["seconds"], last = now - last, now
            if self.behind and not row.get("lost"):
                self.behind.add(row, *self.round.judged)
            else:
                self.drain(LEAVE_AFTER_LOSS_S if row.get("lost") else self.deadlines.gather)
                self.keeper.keep([row])
            if row.get("lost"):
                self.job.leave_timeout = LEAVE_AFTER_LOSS_S  # a rank or the store is gone: do not wait for it
                cut = {"reason": "a rank or the job store was lost", "mode": mode, "after_round": r}
                break
            if (row["verdict"] != "ok" or self.keeper.failed) and self.opts.on_failure == "stop":
                if self.job.rank == 0:  # why the table ends here, and the modes after it never ran
                    self.keeper.say(f"stress: stopped after {mode} round {r}, the first failure (--on-failure stop); "
                                    "--resume goes on from the journal")
                break
            asked = [rec.stop for rec in row.get("ranks") or [] if rec and rec.stop]
            signalled = [why for why in asked if why != Stop.TIME_UP]
            if signalled:  # a rank was told to stop before this round's records met: every rank stops here
                cut = {"reason": signalled[0], "mode": mode, "after_round": r}
                break
            if asked:  # a rank's --duration was up: every rank ends this mode here and goes on with the next
                self.ended.add(mode)
                # the rounds behind, completed first: the next mode's first seq is past this mode's unrun ones,
                # and its backpressure would wait for their teardowns by number
                self.drain(self.deadlines.gather)
                self.keeper.mode_ended(mode, r, self.opts.duration)
        return cut

    def drain(self, wait_s: float) -> None:
        """Every round still behind its teardown, completed and kept; the wait counts in the last one's time."""
        if not self.behind:
            return
        t0 = time.perf_counter()
        rows = self.behind.drain(wait_s)
        if rows:
            rows[-1]["seconds"] += time.perf_counter() - t0
        self.keeper.keep(rows)


def worker(opts: StressOptions, journal_path: str):
    def run(job) -> int:
        try:
            return Run(job, opts, journal_path)()
        finally:
            sys.stdout.flush()
    return run
