"""One round on this rank, as the run sees it: lined up with every rank, run, its records gathered through the
store and judged from every rank's evidence. What a round needs from the run (the deadlines, the ranks'
pids and hosts, the history of earlier verdicts) is given; what it leaves (who its gather missed, the
inputs its judge had) stays here for the next round and for a teardown judged behind it."""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.comm import gpu_count, scenario
from nccl_bench.core import launch, resources
from nccl_bench.core.errors import BarrierTimeout
from stress import inject, peers, plans
from stress.diagnose import History, judge
from stress.gather import StoreLost, gather, grace, start_wait, store_lost
from stress.inflight import worst
from stress.options import StressOptions
from stress.record import RankRecord
from stress.round import absent, run_round
from stress.storekeys import Sweeper, own_keys
from stress.verify import Verification


@dataclass(frozen=True)
class Deadlines:
    """How long a round's gather may wait for every rank, and the resync after it (aborts and torch's grace
    fit inside both)."""

    gather: float
    resync: float

    @classmethod
    def of(cls, opts: StressOptions) -> "Deadlines":
        g = opts.skew_max + opts.job.timeout + grace(opts.job.backend)
        return cls(g, g + grace(opts.job.backend))


class JudgedRound:
    """Runs round after round on this rank; `one` returns each round's row (rank 0 journals it)."""

    def __init__(self, job, opts: StressOptions, deadlines: Deadlines, history: History, restart: int):
        self.job, self.opts, self.deadlines, self.history, self.restart = job, opts, deadlines, history, restart
        self.n = job.nranks
        self.verify = Verification(opts.collective, opts.bytes, job.rank, self.n)
        self.leak = inject.Leak(opts.inject, job.rank)
        self.device = launch.local_device(job.ident.local_rank, gpu_count()) if opts.job.backend != "gloo" else None
        self.sweeper = Sweeper(job.store.raw, opts.destroys_in_flight or 0)
        self.everyone = peers.Peers(peers.me(job), [])
        self.groups = scenario.Groups(plans.mode_of(opts), scenario_group_size(opts)) if opts.scenario == "same-group" \
            else None
        self.last_missing: tuple[int, list[int]] = (0, [])  # the last round's seq and the ranks its gather missed
        self.judged: tuple[list, dict] = ([], {})  # the last round's judge inputs (missing, context)

    def one(self, seq: int, mode: str, r: int, behind=None, stop=None, keep=None) -> dict:
        """The round's row. `behind` (stress.inflight.Behind) holds rounds waiting for their teardown; those due
        now go to `keep` before this round runs, so a kill loses none of them."""
        job, opts = self.job, self.opts
        skews = plans.skews(opts, self.n, r)
        plan = plans.round_plan(opts, job.rank, seq, mode, r, skews, self.restart,
                                self.groups.take(seq) if self.groups else None)
        lined_up = self.line_up(seq, mode, r, skews)
        if lined_up is not None:
            return lined_up
        self.sweeper.started(seq)
        if behind:  # every rank published the due round's teardown before this round's barrier
            keep(behind.collect(behind.due(seq)))
        self.leak.round(r)
        if "store-loss" in plan.faults:  # rank 0 hosts the store: its server stops, and the store is gone
            job.store.stop_serving()
        rec = absent(job, plan) if "missing-rank" in plan.faults else run_round(
            job, opts.job.backend, opts.job.ranks_per_root, plan, self.verify, behind.reaper if behind else None)
        if opts.leak_every and seq % opts.leak_every == opts.leak_every - 1:  # after init number seq + 1
            rec.sample = resources.sample(self.device, job.store.raw if job.rank == 0 else None)
        if stop is not None and stop.requested:
            rec.stop = stop.reason
        elif stop is not None and stop.time_up:
            rec.stop = stop.TIME_UP
        self.sweeper.add(seq, own_keys(seq, job.rank, rec, behind is not None, opts.check_ids, bool(plan.held_roots)))
        return self.gathered(seq, mode, r, skews, rec, stop)

    def line_up(self, seq: int, mode: str, r: int, skews: list[float]) -> dict | None:
        """Every rank at the round's start; a row that says why not where a rank or the store is gone."""
        try:
            self.job.store.barrier(f"stress/{seq}/start", timeout=start_wait(self.job.store.raw, self.last_missing,
                                                                           self.deadlines.resync))
        except BarrierTimeout as e:  # a rank is gone: this round cannot run
            row = judge(mode, r, self.n, [None] * self.n, e.missing, self.history,
                        {"dead": self.everyone.dead([m for m, _ in e.missing]), "hosts": self.everyone.hosts})
            row["diagnosis"] = "at the start of the round: " + row["diagnosis"]
            return {"seq": seq, "mode": mode, "round": r, **row, "skew_ms": [], "ranks": [], "lost": True}
        except Exception as e:  # a lost store's network error is told apart below; anything else goes on up
            lost = store_lost(e, self.job.rank, "start")
            if lost is None:
                raise
            return self.lost_row(seq, mode, r, skews, None, lost)
        return None

    def gathered(self, seq: int, mode: str, r: int, skews: list[float], rec: RankRecord, stop) -> dict:
        opts = self.opts
        try:
            records, missing, dead = gather(self.job, seq, rec, self.deadlines.gather, self.everyone, stop,
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

    def last_phase(self, seq: int, rank: int) -> str | None:
        """The last phase a rank that never reported had announced in the store."""
        key = f"stress/{seq}/at/{rank}"
        raw = self.job.store.raw
        return raw.get(key).decode() if raw.check([key]) else None

    def finished(self, row: dict) -> None:
        """After the round: who its gather missed; on same-group, a failed round ends its process group."""
        self.last_missing = (row["seq"], row.get("missing") or [])
        if self.groups:
            self.groups.finished(row["verdict"] == "ok")


def scenario_group_size(opts: StressOptions) -> int | None:
    """same-group on torch: a process group holds one communicator per device (local GPUs)."""
    return max(gpu_count(), 1) if opts.job.backend == "torch" else None
