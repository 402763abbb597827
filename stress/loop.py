"""The worker: rounds in order, each resynchronised, judged from every rank's evidence, journaled.

Every rank runs the same rounds; rank 0 owns the journal, the progress line and the
summary. After each round the ranks gather their records through the store, bounded so
that a rank that never arrives is named instead of waited for. With destroys behind the
rounds (stress.behind) a round is kept once its teardown on every rank is known.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from nccl_bench.core import launch, results, sysinfo
from nccl_bench.comm import scenario
from nccl_bench.comm import gpu_count
from nccl_bench.core.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, BarrierTimeout, UsageError
from nccl_bench.comm.lifetime import destroy_note
from stress import baseline, failpoint, inject, journal, peers, schedule
from stress.behind import Behind, worst
from stress.diagnose import History, judge
from stress.options import StressOptions
from stress.round import RoundPlan, absent, run_round
from nccl_bench.report.rounds import summarize
from stress.summary import Progress, Rate, failure_line, render
from stress.verify import Verification

SHOWN_FAILURES = 20  # per mode; the journal has them all


POLL_S = 0.25  # gather: how often to look for ranks that died instead of reporting
LEAVE_AFTER_LOSS_S = 2.0  # the exit barrier, when a rank died or the store went away


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


class Stop:
    """SIGTERM (the launcher stopping the group, e.g. because a rank died) or Ctrl-C: finish the round
    in flight, journal it, and end with a verdict instead of dying mid-line. Ranks learn of the signal
    at different moments, so each round's records carry it and every rank stops after the same round."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.since: float | None = None
        self.signum: int | None = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                signal.signal(sig, self._on)

    def _on(self, signum, frame) -> None:
        if self.since is None:  # a Ctrl-C reaches each rank twice (the terminal, then the launcher)
            self.since, self.signum = time.monotonic(), signum
            launch.note_stop(signum)

    @property
    def requested(self) -> bool:
        return self.since is not None

    @property
    def reason(self) -> str:
        name = signal.Signals(self.signum).name if self.signum else "a signal"
        return f"{name} (the launcher or the user is stopping the job)"


def gather(job, seq: int, rec: dict, timeout: float, everyone: peers.Peers, stop: Stop,
           stop_grace: float) -> tuple[list, list, dict]:
    """Every rank's record (None for a rank that never reported), [(rank, host)] missing, and
    the missing ranks found dead. Waiting ends early once every missing rank is dead, or a
    while after the launcher asked us to stop; a lost store raises StoreLost."""
    raw, n = job.store.raw, job.nranks
    keys = [f"stress/{seq}/rec/{r}" for r in range(n)]
    name = f"stress/{seq}/rec"
    try:
        raw.set(keys[job.rank], json.dumps(rec))
        if raw.add(f"{name}/count", 1) == n:
            raw.set(f"{name}/done", b"1")
        end = time.monotonic() + timeout
        while True:
            try:
                raw.wait([f"{name}/done"], timedelta(seconds=min(POLL_S, max(end - time.monotonic(), 0.001))))
                return [json.loads(v) for v in raw.multi_get(keys)], [], {}
            except dist.DistNetworkError:
                raise
            except Exception:
                pass  # one slice passed: look at who is missing
            present = [raw.check([k]) for k in keys]
            missing = [r for r in range(n) if not present[r]]
            dead = everyone.dead(missing)
            now = time.monotonic()
            if now >= end or len(dead) == len(missing) or (stop.requested and now - stop.since > stop_grace):
                recs = [json.loads(raw.get(k)) if present[r] else None for r, k in enumerate(keys)]
                return recs, [(r, job.store.host_of(r)) for r in missing], dead
    except Exception as e:
        lost = store_lost(e, job.rank, "gather")
        if lost is None:
            raise
        raise lost from None


class Run:
    """One stress run on one rank."""

    def __init__(self, job, opts: StressOptions, journal_path: str):
        self.job, self.opts = job, opts
        self.n = job.nranks
        self.identity = opts.identity(self.n)
        self.journal_path = Path(journal_path)
        self.verify = Verification(opts.collective, opts.bytes, job.rank, self.n)
        self.history = History()
        self.rows: list[dict] = []  # every round of the journal, earlier runs included
        self.writer = None
        self.progress = Progress()
        t = opts.job.timeout
        self.gather_timeout = opts.skew_max + t + 15.0  # aborts and torch's grace fit inside
        self.resync_timeout = self.gather_timeout + 15.0
        self.stop = Stop()
        self.restart = job.ident.restart  # > 0: the launcher restarted the worker group
        # a restarted group continues the journal its predecessor was writing
        self.resume = opts.resume or (self.restart > 0 and self.journal_path.exists())
        self.notes: list[dict] = []  # the journal's non-round lines, earlier runs included
        self.everyone = peers.Peers(peers.me(job), [])
        self.behind: Behind | None = None  # --destroys-in-flight > 0: rounds waiting for their teardown
        self.judged: tuple[list, dict] = ([], {})  # the last round's judge inputs (missing, context)
        self.groups = scenario.Groups(self.plan(), scenario_group_size(opts)) \
            if opts.scenario == "same-group" else None

    # --- start: rank 0 opens the journal and tells the others what is left ------------------
    def open_journal(self) -> list[int]:
        """Rank 0: the seqs already done (resume) after checking the journal; writes the header."""
        if self.resume:
            contents = journal.read(self.journal_path)
            journal.check_resumable(contents, self.identity, self.journal_path)
            self.rows, self.notes = contents.rounds, contents.notes
            for row in self.rows:
                self.history.add(row["mode"], row["round"], row.get("ranks") or [])
            if self.restart and contents.ended:
                return None  # the run this group belonged to had finished: nothing to add
            self.writer = journal.Writer(self.journal_path)
            note = {"type": "resume", "after_rounds": len(self.rows), "torn_lines": contents.torn,
                    "restart": self.restart, "time": time.time()}
            self.notes.append(note)
            self.writer.note(note)
        else:
            journal.check_new(self.journal_path)
            hosts = [self.job.store.host_of(r) for r in range(self.n)]
            self.writer = journal.Writer(self.journal_path, {
                "options": self.identity, "time": time.time(),
                "meta": sysinfo.collect(self.opts.job.backend, sorted(set(hosts)))})
        done = {(r["mode"], r["round"]) for r in self.rows}
        return [seq for seq, mode, r in self.plan() if (mode, r) in done]

    def plan(self) -> list[tuple[int, str, int]]:
        rounds = self.opts.rounds
        return [(i * rounds + r, mode, r) for i, mode in enumerate(self.opts.job.init) for r in range(rounds)]

    def start(self) -> set[int] | dict | None:
        """Agree on the seqs to skip and share pids; None when rank 0 could not open the journal
        (exit 2); {'ended': code} when a restarted group finds its run already finished."""
        mine = {"me": peers.me(self.job)}
        if self.job.rank == 0:
            try:
                done = self.open_journal()
                mine.update({"done": done} if done is not None else
                            {"ended": EXIT_FAILED if any(r["verdict"] != "ok" for r in self.rows) else EXIT_OK})
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
        return set(got["done"])

    # --- the rounds ------------------------------------------------------------------------
    def skew(self, r: int) -> list[float]:
        extra = {i.rank: i.seconds for i in self.opts.inject if i.kind == "delay" and i.round == r}
        for i in self.opts.inject:
            if i.kind == "slow-rank" and i.round == r:
                extra[i.rank] = extra.get(i.rank, 0.0) + self.opts.job.timeout + inject.SLOW_EXTRA_S
        return [schedule.skew(self.opts.seed, r, k, self.opts.skew_max) + extra.get(k, 0.0) for k in range(self.n)]

    def faults(self, mode: str, r: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The injected kinds on this rank in this round, and the roots stale-key holds back."""
        mine = [i.kind for i in self.opts.inject if i.round == r and i.rank == self.job.rank
                and i.kind not in inject.LEGACY]
        if "crash" in mine or "crash-collective" in mine:
            if self.restart:  # a crash fires once: never again in the group the launcher restarted
                mine = [k for k in mine if not k.startswith("crash")]
        held = tuple(sorted({i.rank for i in self.opts.inject if i.kind == "stale-key" and i.round == r
                             and mode == "stock"}))
        return tuple(mine), held

    def lost_row(self, seq: int, mode: str, r: int, skews: list[float], rec: dict | None, lost: StoreLost) -> dict:
        """The store is gone: judge from this rank's own record; the run cannot go on."""
        info = dict(lost.info)
        err = (rec or {}).get("error") or {}
        if err.get("lib_error") in ("DistNetworkError", "ConnectionError"):
            info.update(error=f"{err['lib_error']}: {err['detail']}", phase=err.get("phase", info["phase"]))
        records = [rec if k == self.job.rank else None for k in range(self.n)]
        row = judge(mode, r, self.n, records, [], self.history, {"store_lost": info})
        return {"seq": seq, "mode": mode, "round": r, **row, "injected": inject.in_round(self.opts.inject, r),
                "skew_ms": [round(s * 1e3, 3) for s in skews], "ranks": [x for x in records if x], "lost": True}

    def one(self, seq: int, mode: str, r: int) -> dict:
        job, opts = self.job, self.opts
        skews = self.skew(r)
        wrong = any(i.kind == "wrong" and i.round == r and i.rank == job.rank for i in opts.inject)
        faults, held = self.faults(mode, r)
        plan = RoundPlan(seq, mode, r, skews[job.rank], opts.job.timeout, opts.check_ids, wrong, faults, held,
                         self.groups.take(seq) if self.groups else None)
        try:
            job.store.barrier(f"stress/{seq}/start", timeout=self.resync_timeout)
        except BarrierTimeout as e:  # a rank is gone: this round cannot run
            row = judge(mode, r, self.n, [None] * self.n, e.missing, self.history,
                        {"dead": self.everyone.dead([m for m, _ in e.missing])})
            row["diagnosis"] = "at the start of the round: " + row["diagnosis"]
            return {"seq": seq, "mode": mode, "round": r, **row, "skew_ms": [], "ranks": [], "lost": True}
        except Exception as e:
            lost = store_lost(e, job.rank, "start")
            if lost is None:
                raise
            return self.lost_row(seq, mode, r, skews, None, lost)
        if self.behind:  # every rank published the due round's teardown before this barrier
            self.keep(self.behind.collect(self.behind.due(seq)))
        if "store-loss" in faults:  # rank 0 hosts the store: dropping its server takes it away
            job.store.server = None
        rec = absent(job, plan) if "missing-rank" in faults else run_round(
            job, opts.job.backend, opts.job.ranks_per_root, plan, self.verify,
            self.behind.reaper if self.behind else None)
        if self.stop.requested:
            rec["stop"] = self.stop.reason
        try:
            records, missing, dead = gather(job, seq, rec, self.gather_timeout, self.everyone, self.stop,
                                            opts.job.timeout + 2.0)
            last = {m: self.last_phase(seq, m) for m, _ in missing}
        except StoreLost as lost:
            return self.lost_row(seq, mode, r, skews, rec, lost)
        context = {"timeout": opts.job.timeout, "dead": dead, "last_phase": last}
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
                      f"({len(self.rows)} rounds); nothing to run", flush=True)
            return done["ended"]
        todo = [p for p in self.plan() if p[0] not in done]
        self.announce(len(done), len(todo))
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
            cut = self.rounds(todo)
        except KeyboardInterrupt:  # Ctrl-C: journal the rounds behind (as far as their teardown is known)
            self.drain(LEAVE_AFTER_LOSS_S)
            raise
        self.drain(self.gather_timeout if cut is None else LEAVE_AFTER_LOSS_S)
        if job.rank != 0:
            return EXIT_FAILED if self.failed_here else EXIT_OK
        if cut is not None:
            left = self.restarts_left()
            self.writer.note({"type": "stopped", **cut, "restarts_left": left, "time": time.time()})
            if left > 0:  # not the end: the restarted group resumes this journal
                self.progress.clear()
                print(f"stress: stopped after {cut['mode']} round {cut['after_round']} ({cut['reason']}); the "
                      f"launcher restarts the worker group ({left} restarts left), which resumes the journal",
                      flush=True)
                self.writer.close()
                return EXIT_FAILED
            self.progress.clear()
            print(f"stress: stopped after {cut['mode']} round {cut['after_round']} ({cut['reason']}); "
                  f"--resume goes on from the journal", flush=True)
        return self.finish(base, self.shown)

    def rounds(self, todo: list[tuple[int, str, int]]) -> dict | None:
        """The rounds in order; why the run was cut short, or None. Rows are kept as they complete."""
        job, opts = self.job, self.opts
        cut = None
        last = time.perf_counter()
        for seq, mode, r in todo:
            if self.behind:  # backpressure: the due round's teardown ends before this round starts
                self.behind.publish(self.behind.due(seq))
            row = self.one(seq, mode, r)
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
            asked = [rec.get("stop") for rec in row.get("ranks") or [] if rec and rec.get("stop")]
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
            self.rows.append(row)
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

    def restarts_left(self) -> int:
        """How many more times the launcher (torchrun, our self-launch) will restart the group."""
        try:
            return max(0, int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) - self.restart)
        except ValueError:
            return 0

    # --- rank 0's words ----------------------------------------------------------------------
    def announce(self, done: int, todo: int) -> None:
        if self.job.rank != 0:
            return
        o, j = self.opts, self.opts.job
        print(f"stress: {j.backend} x{self.n}, init {','.join(j.init)}, {o.rounds} rounds per mode, "
              f"skew-max {o.skew_max:g} s (seed {o.seed}), deadline {j.timeout:g} s, "
              f"verify {o.collective} {o.bytes} B, ranks-per-root {j.ranks_per_root}, scenario {o.scenario}"
              + (", check-ids" if o.check_ids else "")
              + (f", up to {o.destroys_in_flight} destroys behind each round" if o.destroys_in_flight
                 else ", serial destroy"), flush=True)
        again = f"restart {self.restart}: " if self.restart else ""
        print(f"journal: {self.journal_path}" + (f" ({again}resuming: {done} rounds done, {todo} to go)"
                                                  if self.resume else ""), flush=True)
        if o.inject:
            print("inject: " + ", ".join(map(str, o.inject)), flush=True)

    def finish(self, base: dict | None, shown: dict) -> int:
        self.progress.clear()
        hidden = sum(max(0, k - SHOWN_FAILURES) for k in shown.values())
        if hidden:
            print(f"... {hidden} more failures in the journal", flush=True)
        modes = [m for m in self.opts.job.init if any(r["mode"] == m for r in self.rows)]
        table = summarize(modes, self.rows)
        if len(modes) > 1:
            print(f"comparison ({', '.join(modes)}: same seed, same skew schedule, same deadline):", flush=True)
        print(render(table), flush=True)
        if base:
            print(baseline_line(base, table), flush=True)
        note = destroy_note(self.opts.job.backend, [x["teardown_s"] for row in self.rows for x in row["ranks"]
                                                    if x and x["verdict"] == "ok" and x.get("teardown_s")])
        if note:
            print(note + (f"; here up to {self.opts.destroys_in_flight} ran behind the next rounds"
                          if self.opts.destroys_in_flight else ""), flush=True)
        restarts = [n for n in self.notes if n.get("type") == "resume" and n.get("restart")]
        if restarts:
            print(restart_line(restarts, self.rows), flush=True)
        self.writer.note({"type": "end", "summary": table, "baseline": base, "restarts": len(restarts),
                          "time": time.time()})
        self.writer.close()
        path = Path(self.opts.summary_json) if self.opts.summary_json else summary_path(self.journal_path)
        write_summary(path, self.rows, table, base, self.identity, self.journal_path, len(restarts))
        print(f"summary: {path}", flush=True)
        return EXIT_FAILED if any(r["verdict"] != "ok" for r in self.rows) else EXIT_OK


def baseline_line(base: dict, table: list[dict]) -> str:
    def f(v):
        return "-" if v is None else f"{v:.2f}/s"
    best = max((s["rounds_per_s"] or 0 for s in table), default=0)
    parts = [f"baseline ({base['cycles']} bare cycles): init+destroy {f(base['init_destroy_per_s'])}, "
             f"init+verify+destroy {f(base['init_verify_destroy_per_s'])}; stress {f(best)}"]
    for key in ("init_destroy_per_s", "init_verify_destroy_per_s"):
        if base.get(key):
            parts.append(f"{100 * best / base[key]:.0f}% of {key.replace('_per_s', '').replace('_', '+')}")
    errs = [base[k] for k in ("init_destroy_error", "init_verify_destroy_error") if base.get(k)]
    return ", ".join(parts) + ("" if not errs else f"; baseline errors: {'; '.join(errs)}")


def restart_line(restarts: list[dict], rows: list[dict]) -> str:
    """How often the launcher restarted the worker group, and that no completed round was lost."""
    keys = [(r["mode"], r["round"]) for r in rows]
    at = ", ".join(f"after {n['after_rounds']} rounds" for n in restarts)
    kept = "no completed round lost or repeated" if len(keys) == len(set(keys)) else "ROUNDS REPEATED"
    return f"restarts: {len(restarts)} (worker group restarted by the launcher {at}; resumed from the journal, {kept})"


def summary_path(journal_path: Path) -> Path:
    """`<journal>-summary.json` beside the journal; a taken name gets a number, never overwritten."""
    stem = journal_path.name[:-len(journal_path.suffix)] if journal_path.suffix else journal_path.name
    n = 0
    while (path := journal_path.with_name(f"{stem}-summary{f'-{n}' if n else ''}.json")).exists():
        n += 1
    return path


def write_summary(path: Path, rows: list[dict], table: list[dict], base: dict | None, identity: dict,
                  journal_path: Path, restarts: int = 0) -> Path:
    """Flat rows (one per mode) plus one metadata block; `failures` and `rounds` on top for callers."""
    meta = {**sysinfo.collect(identity["backend"]), "options": identity, "journal": str(journal_path),
            "baseline": base}
    doc = {"kind": "stress-summary", "schema": results.SCHEMA_VERSION, "rounds": len(rows),
           "failures": sum(r["verdict"] != "ok" for r in rows), "restarts": restarts, "meta": meta, "rows": table}
    # Whole or not at all: written beside, then linked in under its name (which never overwrites), so
    # a kill mid-write leaves no half summary for --resume to trip over.
    for debris in path.parent.glob(f".{path.name}.*.tmp"):  # cut by a kill (we hold the journal: no one else writes)
        debris.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(doc, indent=1) + "\n"
    with open(tmp, "w") as f:
        if failpoint.armed("summary"):
            failpoint.write_then_die(f, text)
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise UsageError(f"{path} already exists; results are never overwritten") from None
    finally:
        os.unlink(tmp)
    return path


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
