"""The worker: rounds in order, each resynchronised, judged from every rank's evidence, journaled.

Every rank runs the same rounds; rank 0 owns the journal, the progress line and the
summary. After each round the ranks gather their records through the store, bounded so
that a rank that never arrives is named instead of waited for.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from nccl_bench import results, sysinfo
from nccl_bench.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, BarrierTimeout, UsageError
from stress import baseline, journal, schedule
from stress.diagnose import History, judge
from stress.options import StressOptions
from stress.round import RoundPlan, run_round
from stress.summary import Progress, Rate, failure_line, render, summarize
from stress.verify import Verification

SHOWN_FAILURES = 20  # per mode; the journal has them all


def gather(job, seq: int, rec: dict, timeout: float) -> tuple[list, list]:
    """Every rank's record (None for a rank that never arrived) and [(rank, host)] missing."""
    raw, n = job.store.raw, job.nranks
    keys = [f"stress/{seq}/rec/{r}" for r in range(n)]
    raw.set(keys[job.rank], json.dumps(rec))
    try:
        job.store.barrier(f"stress/{seq}/rec", timeout=timeout)
        return [json.loads(v) for v in raw.multi_get(keys)], []
    except BarrierTimeout as e:
        recs = [json.loads(raw.get(k)) if raw.check([k]) else None for k in keys]
        return recs, e.missing


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

    # --- start: rank 0 opens the journal and tells the others what is left ------------------
    def open_journal(self) -> list[int]:
        """Rank 0: the seqs already done (resume) after checking the journal; writes the header."""
        if self.opts.resume:
            contents = journal.read(self.journal_path)
            journal.check_resumable(contents, self.identity, self.journal_path)
            self.rows = contents.rounds
            for row in self.rows:
                self.history.add(row["mode"], row["round"], row.get("ranks") or [])
            self.writer = journal.Writer(self.journal_path)
            self.writer.note({"type": "resume", "after_rounds": len(self.rows), "torn_lines": contents.torn,
                              "time": time.time()})
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

    def start(self) -> set[int] | None:
        """Agree on the seqs to skip; None when rank 0 could not open the journal (exit 2)."""
        mine = {}
        if self.job.rank == 0:
            try:
                mine = {"done": self.open_journal()}
            except UsageError as e:
                mine = {"error": str(e)}
        got = self.job.store.all_gather_obj("stress/start", mine, timeout=self.resync_timeout)[0]
        if "error" in got:
            if self.job.rank == 0:
                raise UsageError(got["error"])
            return None
        return set(got["done"])

    # --- the rounds ------------------------------------------------------------------------
    def skew(self, r: int) -> list[float]:
        extra = {i.rank: i.seconds for i in self.opts.inject if i.kind == "delay" and i.round == r}
        return [schedule.skew(self.opts.seed, r, k, self.opts.skew_max) + extra.get(k, 0.0) for k in range(self.n)]

    def one(self, seq: int, mode: str, r: int) -> dict:
        job, opts = self.job, self.opts
        skews = self.skew(r)
        wrong = any(i.kind == "wrong" and i.round == r and i.rank == job.rank for i in opts.inject)
        plan = RoundPlan(seq, mode, r, skews[job.rank], opts.job.timeout, opts.check_ids, wrong)
        try:
            job.store.barrier(f"stress/{seq}/start", timeout=self.resync_timeout)
        except BarrierTimeout as e:  # a rank is gone: this round cannot run
            row = judge(mode, r, self.n, [None] * self.n, e.missing, self.history)
            row["diagnosis"] = "at the start of the round: " + row["diagnosis"]
            return {"seq": seq, "mode": mode, "round": r, **row, "skew_ms": [], "ranks": [], "lost": True}
        rec = run_round(job, opts.job.backend, opts.job.ranks_per_root, plan, self.verify)
        records, missing = gather(job, seq, rec, self.gather_timeout)
        row = judge(mode, r, self.n, records, missing, self.history)

        def worst(key):
            vals = [x[key] for x in records if x and x.get(key) is not None]
            return max(vals) * 1e3 if vals and len(vals) == self.n else None
        return {"seq": seq, "mode": mode, "round": r, **row, "skew_ms": [round(s * 1e3, 3) for s in skews],
                "init_ms": worst("init_s"), "exchange_ms": worst("exchange_s"), "verify_ms": worst("verify_s"),
                "destroy_ms": worst("teardown_s"), "ranks": records}

    def __call__(self) -> int:
        job, opts = self.job, self.opts
        done = self.start()
        if done is None:
            return EXIT_USAGE
        todo = [p for p in self.plan() if p[0] not in done]
        self.announce(len(done), len(todo))
        base = None
        if opts.baseline:
            base = baseline.measure(job, opts.job.backend, opts.job.ranks_per_root, opts.baseline,
                                    opts.job.timeout, self.verify)
            if self.writer:
                self.writer.note({"type": "baseline", **base})
        rate, failed_here, shown = Rate(), 0, {}
        last = time.perf_counter()
        for seq, mode, r in todo:
            row = self.one(seq, mode, r)
            now = time.perf_counter()
            row["seconds"], last = now - last, now
            failed = row["verdict"] != "ok"
            failed_here += failed
            if job.rank == 0:
                self.writer.round(row)
                self.rows.append(row)
                self.progress.update(mode, r + 1, opts.rounds, failed_here, rate.tick())
                if failed:
                    shown[mode] = shown.get(mode, 0) + 1
                    if shown[mode] <= SHOWN_FAILURES:
                        self.progress.clear()
                        print(failure_line(row), flush=True)
            if row.get("lost") or (failed and opts.on_failure == "stop"):
                break
        if job.rank != 0:
            return EXIT_FAILED if failed_here else EXIT_OK
        return self.finish(base, shown)

    # --- rank 0's words ----------------------------------------------------------------------
    def announce(self, done: int, todo: int) -> None:
        if self.job.rank != 0:
            return
        o, j = self.opts, self.opts.job
        print(f"stress: {j.backend} x{self.n}, init {','.join(j.init)}, {o.rounds} rounds per mode, "
              f"skew-max {o.skew_max:g} s (seed {o.seed}), deadline {j.timeout:g} s, "
              f"verify {o.collective} {o.bytes} B, ranks-per-root {j.ranks_per_root}"
              + (", check-ids" if o.check_ids else ""), flush=True)
        print(f"journal: {self.journal_path}" + (f" (resuming: {done} rounds done, {todo} to go)" if o.resume else ""),
              flush=True)

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
        self.writer.note({"type": "end", "summary": table, "baseline": base, "time": time.time()})
        self.writer.close()
        path = Path(self.opts.summary_json) if self.opts.summary_json else summary_path(self.journal_path)
        write_summary(path, self.rows, table, base, self.identity, self.journal_path)
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


def summary_path(journal_path: Path) -> Path:
    """`<journal>-summary.json` beside the journal; a taken name gets a number, never overwritten."""
    stem = journal_path.name[:-len(journal_path.suffix)] if journal_path.suffix else journal_path.name
    n = 0
    while (path := journal_path.with_name(f"{stem}-summary{f'-{n}' if n else ''}.json")).exists():
        n += 1
    return path


def write_summary(path: Path, rows: list[dict], table: list[dict], base: dict | None, identity: dict,
                  journal_path: Path) -> Path:
    """Flat rows (one per mode) plus one metadata block; `failures` and `rounds` on top for callers."""
    meta = {**sysinfo.collect(identity["backend"]), "options": identity, "journal": str(journal_path),
            "baseline": base}
    doc = {"kind": "stress-summary", "schema": results.SCHEMA_VERSION, "rounds": len(rows),
           "failures": sum(r["verdict"] != "ok" for r in rows), "meta": meta, "rows": table}
    try:
        with open(path, "x") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    except FileExistsError:
        raise UsageError(f"{path} already exists; results are never overwritten") from None
    return path


def worker(opts: StressOptions, journal_path: str):
    def run(job) -> int:
        try:
            return Run(job, opts, journal_path)()
        finally:
            sys.stdout.flush()
    return run
