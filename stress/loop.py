"""The worker: rounds in order, each resynchronised, judged from every rank's evidence, journaled.

Every rank runs the same rounds; rank 0 owns the journal, the progress line and the
summary. After each round the ranks gather their records through the store, bounded so
that a rank that never arrives is named instead of waited for. With destroys behind the
rounds (stress.inflight) a round is kept once its teardown on every rank is known.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from nccl_bench import first_to_say
from nccl_bench.core import resources, sysinfo
from nccl_bench.comm import scenario
from nccl_bench.comm import gpu_count
from nccl_bench.core.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, BarrierTimeout, UsageError
from nccl_bench.core.resources import default_warmup
from stress import baseline, inject, journal, peers, plans
from stress.inflight import Behind, worst
from stress.diagnose import History, judge
from stress.closing import SHOWN_FAILURES, announce_lines, report_lines, restarts_left, summary_path, write_summary
from stress.stall import StallGuard
from stress.gather import StoreLost, gather, grace, start_wait, store_lost
from stress.ledger import Ledger
from stress.record import RankRecord
from stress.options import StressOptions
from stress.round import absent, run_round
from stress.stop import Stop
from stress.summary import Progress, Rate, failure_line
from stress.storekeys import Sweeper, own_keys
from stress.verify import Verification

LEAVE_AFTER_LOSS_S = 2.0  # the exit barrier, when a rank died or the store went away


class Run:
    """One stress run on one rank."""

    def __init__(self, job, opts: StressOptions, journal_path: str):
        self.job, self.opts = job, opts
        self.n = job.nranks
        self.identity = opts.identity(self.n)
        self.journal_path = Path(journal_path)
        self.verify = Verification(opts.collective, opts.bytes, job.rank, self.n)
        self.history = History()
        self.plan_len = opts.rounds * len(opts.job.init)
        warmup = default_warmup(self.plan_len) if opts.leak_warmup is None else opts.leak_warmup
        self.ledger = Ledger(self.plan_len, list(opts.job.init), warmup, self.history, opts.job.backend)  # rank 0's
        self.writer = None
        self.progress = Progress()
        t = opts.job.timeout
        self.gather_timeout = opts.skew_max + t + grace(opts.job.backend)  # aborts and torch's grace fit inside
        self.resync_timeout = self.gather_timeout + grace(opts.job.backend)
        self.stop = Stop()
        self.last_missing: tuple[int, list[int]] = (0, [])  # the last round's seq and the ranks its gather missed
        self.restart = job.ident.restart  # > 0: the launcher restarted the worker group
        # a restarted group continues the journal its predecessor was writing
        self.resume = opts.resume or (self.restart > 0 and self.journal_path.exists())
        self.notes: list[dict] = []  # the journal's non-round lines, earlier runs included (a few)
        self.leak = inject.Leak(opts.inject, job.rank)
        self.device = job.ident.local_rank % max(gpu_count(), 1) if opts.job.backend != "gloo" else None
        self.sweeper = Sweeper(job.store.raw, opts.destroys_in_flight or 0)
        self.everyone = peers.Peers(peers.me(job), [])
        self.behind: Behind | None = None  # --destroys-in-flight > 0: rounds waiting for their teardown
        self.judged: tuple[list, dict] = ([], {})  # the last round's judge inputs (missing, context)
        self.groups = scenario.Groups(list(self.plan()), scenario_group_size(opts)) \
            if opts.scenario == "same-group" else None

    # --- start: rank 0 opens the journal and tells the others what is left ------------------
    def open_journal(self) -> list[list[int]] | None:
        """Rank 0: the seqs already done (resume, as [first, end) ranges) after checking the journal (read
        back through the ledger, one round at a time); writes the header."""
        if self.resume:
            contents = journal.read(self.journal_path, on_round=self.ledger.replay)
            journal.check_resumable(contents, self.identity, self.journal_path)
            self.notes = contents.notes
            if self.restart and contents.ended:
                return None  # the run this group belonged to had finished: nothing to add
            self.writer = journal.Writer(self.journal_path)
            note = {"type": "resume", "after_rounds": self.ledger.rounds, "torn_lines": contents.torn,
                    "restart": self.restart, "time": time.time()}
            self.notes.append(note)
            self.writer.note(note)
        else:
            journal.check_new(self.journal_path)
            hosts = self.job.store.hosts(self.resync_timeout)  # ranks on other nodes may still be connecting
            self.writer = journal.Writer(self.journal_path, {
                "options": self.identity, "time": time.time(),
                "meta": sysinfo.collect(self.opts.job.backend, sorted(set(hosts)))})
        return ranges(self.ledger.done)

    def plan(self):
        """(seq, mode, round) in order, made as they are needed: a soak's plan is not held."""
        rounds = self.opts.rounds
        return ((i * rounds + r, mode, r) for i, mode in enumerate(self.opts.job.init) for r in range(rounds))

    def start(self) -> bytearray | dict | None:
        """Agree on the seqs to skip and share pids; None when rank 0 could not open the journal
        (exit 2); {'ended': code} when a restarted group finds its run already finished."""
        mine = {"me": peers.me(self.job)}
        if self.job.rank == 0:
            try:
                done = self.open_journal()
                mine.update({"done": done} if done is not None else
                            {"ended": EXIT_FAILED if self.ledger.failed() else EXIT_OK})
            except UsageError as e:
                mine["error"] = str(e)
        every = self.job.store.all_gather_obj("stress/start", mine, timeout=self.resync_timeout)
        self.everyone = peers.Peers(mine["me"], [e["me"] for e in every])
        got = every[0]
        if "error" in got:
            if self.job.rank == 0:
                raise UsageError(got["error"])
            return None
        if "ended" in got:
            return {"ended": got["ended"]}
        done = bytearray(self.plan_len)
        for first, end in got["done"]:
            done[first:end] = b"\x01" * (end - first)
        return done

    # --- the rounds ------------------------------------------------------------------------
    def lost_row(self, seq: int, mode: str, r: int, skews: list[float], rec: RankRecord | None,
                 lost: StoreLost) -> dict:
        """The store is gone: judge from this rank's own record; the run cannot go on."""
        info = dict(lost.info)
        err = (rec.error if rec else None) or {}
        if err.get("lib_error") in ("DistNetworkError", "ConnectionError"):
            info.update(error=f"{err['lib_error']}: {err['detail']}", phase=err.get("phase", info["phase"]))
        records = [rec if k == self.job.rank else None for k in range(self.n)]
        row = judge(mode, r, self.n, records, [], self.history, {"store_lost": info})
        return {"seq": seq, "mode": mode, "round": r, **row, "injected": inject.in_round(self.opts.inject, r),
                "skew_ms": [round(s * 1e3, 3) for s in skews], "ranks": [x for x in records if x], "lost": True}

    def one(self, seq: int, mode: str, r: int) -> dict:
        job, opts = self.job, self.opts
        skews = plans.skews(opts, self.n, r)
        plan = plans.round_plan(opts, job.rank, seq, mode, r, skews, self.restart,
                                self.groups.take(seq) if self.groups else None)
        faults, held = plan.faults, plan.held_roots
        try:
            job.store.barrier(f"stress/{seq}/start", timeout=start_wait(job.store.raw, self.last_missing,
                                                                          self.resync_timeout))
        except BarrierTimeout as e:  # a rank is gone: this round cannot run
            row = judge(mode, r, self.n, [None] * self.n, e.missing, self.history,
                        {"dead": self.everyone.dead([m for m, _ in e.missing]), "hosts": self.everyone.hosts})
            row["diagnosis"] = "at the start of the round: " + row["diagnosis"]
            return {"seq": seq, "mode": mode, "round": r, **row, "skew_ms": [], "ranks": [], "lost": True}
        except Exception as e:  # a lost store's network error is told apart below; anything else goes on up
            lost = store_lost(e, job.rank, "start")
            if lost is None:
                raise
            return self.lost_row(seq, mode, r, skews, None, lost)
        self.sweeper.started(seq)
        if self.behind:  # every rank published the due round's teardown before this barrier
            self.keep(self.behind.collect(self.behind.due(seq)))
        self.leak.round(r)
        if "store-loss" in faults:  # rank 0 hosts the store: dropping its server takes it away
            job.store.server = None
        rec = absent(job, plan) if "missing-rank" in faults else run_round(
            job, opts.job.backend, opts.job.ranks_per_root, plan, self.verify,
            self.behind.reaper if self.behind else None)
        if opts.leak_every and seq % opts.leak_every == opts.leak_every - 1:  # after init number seq + 1
            rec.sample = resources.sample(self.device, job.store.raw if job.rank == 0 else None)
        if self.stop.requested:
            rec.stop = self.stop.reason
        self.sweeper.add(seq, own_keys(seq, job.rank, rec, self.behind is not None, opts.check_ids, bool(held)))
        try:
            records, missing, dead = gather(job, seq, rec, self.gather_timeout, self.everyone, self.stop,
                                            opts.job.timeout + 2.0)
            last = {m: self.last_phase(seq, m) for m, _ in missing}
        except StoreLost as lost:
            return self.lost_row(seq, mode, r, skews, rec, lost)
        context = {"timeout": opts.job.timeout, "dead": dead, "last_phase": last, "hosts": self.everyone.hosts}
        row = judge(mode, r, self.n, records, missing, self.history, context)
        self.judged = (missing, context)  # to judge again if a teardown behind this round fails
        row["injected"] = inject.in_round(opts.inject, r)
        if dead:  # a rank died: the job cannot go on without the launcher restarting it
            row["lost"] = True
        return {"seq": seq, "mode": mode, "round": r, **row, "skew_ms": [round(s * 1e3, 3) for s in skews],
                "init_ms": worst(records, "init_s", self.n), "exchange_ms": worst(records, "exchange_s", self.n),
                "verify_ms": worst(records, "verify_s", self.n), "destroy_ms": worst(records, "teardown_s", self.n),
                "ranks": records}

    def last_phase(self, seq: int, rank: int) -> str | None:
        """The last phase a rank that never reported had announced in the store."""
        key = f"stress/{seq}/at/{rank}"
        raw = self.job.store.raw
        return raw.get(key).decode() if raw.check([key]) else None

    def __call__(self) -> int:
        job, opts = self.job, self.opts
        self.stop.install()
        done = self.start()
        if done is None:
            return EXIT_USAGE
        if isinstance(done, dict):  # restarted after the run had finished: say so, add nothing
            if job.rank == 0:
                print(f"stress: restart {self.restart} found {self.journal_path} already complete "
                      f"({self.ledger.rounds} rounds); nothing to run", flush=True)
            return done["ended"]
        todo = (p for p in self.plan() if not done[p[0]])
        finished = sum(done)
        self.announce(finished, self.plan_len - finished)
        base = None
        if opts.baseline:
            base = baseline.measure(job, opts.job.backend, opts.job.ranks_per_root, opts.baseline,
                                    opts.job.timeout, self.verify)
            if self.writer:
                self.writer.note({"type": "baseline", **base})
        self.rate, self.failed_here, self.shown, self.stop_now = Rate(), 0, {}, False
        k = opts.destroys_in_flight
        self.behind = Behind(job, k, opts.job.timeout, self.history) if k else None
        try:
            with StallGuard(2 * (self.gather_timeout + self.resync_timeout) + 30.0, job.rank) as self.guard:
                cut = self.rounds(todo)
        except KeyboardInterrupt:  # Ctrl-C: journal the rounds behind (as far as their teardown is known)
            self.drain(LEAVE_AFTER_LOSS_S)
            raise
        self.drain(self.gather_timeout if cut is None else LEAVE_AFTER_LOSS_S)
        if job.rank != 0:
            return EXIT_FAILED if self.failed_here else EXIT_OK
        if cut is not None:
            left = restarts_left(self.restart)
            self.writer.note({"type": "stopped", **cut, "restarts_left": left, "time": time.time()})
            if left > 0:  # not the end: the restarted group resumes this journal
                self.progress.clear()
                print(f"stress: stopped after {cut['mode']} round {cut['after_round']} ({cut['reason']}); the "
                      f"launcher restarts the worker group ({left} restarts left), which resumes the journal",
                      flush=True)
                self.writer.close()
                return EXIT_FAILED
            self.progress.clear()
            if first_to_say():  # a stop's one line (the launcher then says nothing more)
                print(f"stress: stopped after {cut['mode']} round {cut['after_round']} ({cut['reason']}); "
                      f"--resume goes on from the journal", flush=True)
        return self.finish(base, self.shown)

    def rounds(self, todo) -> dict | None:
        """The rounds in order; why the run was cut short, or None. Rows are kept as they complete."""
        job, opts = self.job, self.opts
        cut = None
        last = time.perf_counter()
        for seq, mode, r in todo:
            if self.behind:  # backpressure: the due round's teardown ends before this round starts
                self.behind.publish(self.behind.due(seq))
            row = self.one(seq, mode, r)
            self.last_missing = (seq, row.get("missing") or [])
            self.guard.tick()
            if self.groups:  # a failed round ends its process group on every rank
                self.groups.finished(row["verdict"] == "ok")
            now = time.perf_counter()
            row["seconds"], last = now - last, now
            if self.behind and not row.get("lost"):
                self.behind.add(row, *self.judged)
            else:
                self.drain(LEAVE_AFTER_LOSS_S if row.get("lost") else self.gather_timeout)
                self.keep([row])
            if row.get("lost"):
                job.leave_timeout = LEAVE_AFTER_LOSS_S  # a rank or the store is gone: do not wait for it
                cut = {"reason": "a rank or the job store was lost", "mode": mode, "after_round": r}
                break
            if (row["verdict"] != "ok" or self.stop_now) and opts.on_failure == "stop":
                break
            asked = [rec.stop for rec in row.get("ranks") or [] if rec and rec.stop]
            if asked:  # a rank was told to stop before this round's records met: every rank stops here
                cut = {"reason": asked[0], "mode": mode, "after_round": r}
                break
        return cut

    def keep(self, rows: list[dict]) -> None:
        """Rounds whose every part is known: rank 0 journals them; every rank counts failures."""
        for row in rows:
            failed = row["verdict"] != "ok"
            self.failed_here += failed
            self.stop_now |= failed
            if self.job.rank != 0:
                continue
            mode = row["mode"]
            self.writer.round(row)
            self.ledger.add(row)
            self.progress.update(mode, row["round"] + 1, self.opts.rounds, self.failed_here, self.rate.tick())
            if failed:
                self.shown[mode] = self.shown.get(mode, 0) + 1
                if self.shown[mode] <= SHOWN_FAILURES:
                    self.progress.clear()
                    print(failure_line(row), flush=True)

    def drain(self, wait_s: float) -> None:
        """Every round still behind its teardown, completed and kept; the wait counts in the last one's time."""
        if not self.behind:
            return
        t0 = time.perf_counter()
        rows = self.behind.drain(wait_s)
        if rows:
            rows[-1]["seconds"] += time.perf_counter() - t0
        self.keep(rows)

    # --- rank 0's words ----------------------------------------------------------------------
    def announce(self, done: int, todo: int) -> None:
        if self.job.rank == 0:
            for line in announce_lines(self.opts, self.n, self.journal_path, self.resume, self.restart, done, todo):
                print(line, flush=True)

    def finish(self, base: dict | None, shown: dict) -> int:
        self.progress.clear()
        findings = self.ledger.leaks.findings() if self.opts.leak_every else []
        restarts = [n for n in self.notes if n.get("type") == "resume" and n.get("restart")]
        for line in report_lines(self.ledger, self.opts, base, shown, restarts, findings):
            print(line, flush=True)
        self.writer.note({"type": "end", "summary": self.ledger.tally.table(), "baseline": base,
                          "restarts": len(restarts), "leaks": findings, "time": time.time()})
        self.writer.close()
        path = Path(self.opts.summary_json) if self.opts.summary_json else summary_path(self.journal_path)
        write_summary(path, self.ledger, base, self.identity, self.journal_path, len(restarts), findings)
        print(f"summary: {path}", flush=True)
        leaked = self.opts.fail_on_leak and any(f["verdict"] == "LEAK" for f in findings)
        return EXIT_FAILED if self.ledger.failed() or leaked else EXIT_OK


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


def scenario_group_size(opts: StressOptions) -> int | None:
    """same-group on torch: a process group holds one communicator per device (local GPUs)."""
    return max(gpu_count(), 1) if opts.job.backend == "torch" else None


def worker(opts: StressOptions, journal_path: str):
    def run(job) -> int:
        try:
            return Run(job, opts, journal_path)()
        finally:
            sys.stdout.flush()
    return run
