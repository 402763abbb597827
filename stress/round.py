"""One round on one rank: skew, ID exchange, init, one verified collective, destroy.

Each phase is an NVTX range inside the round's range; a failure leaves a mark. The
lifetime helper destroys the communicator on success and aborts it on failure. The
returned record is this rank's evidence for the diagnosis (see stress.diagnose).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import timedelta

from nccl_bench.core import markers
from nccl_bench.comm import InitPlan
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import BarrierTimeout, CommError, DeadlineExceeded
from nccl_bench.comm.lifetime import communicator
from nccl_bench.comm.scenario import GroupSlot
from stress import inject
from stress.record import RankRecord
from stress.verify import Verification

PHASES = ("start", "skew", "bootstrap", "init", "verify", "destroy")  # in order; a rank's last is evidence
SKIP_GRACE_S = 1.0  # skip-collective: the skipping rank stays away this long past the deadline


class StaleIdCaught(CommError):
    """--check-ids: the ranks hold different IDs; the init is skipped on every rank."""

    kind = "stale"


@dataclass
class RoundPlan:
    """Everything one round needs that is the same on every rank."""

    seq: int  # position in the whole run (all modes): the per-communicator counter
    mode: str
    round: int  # within the mode
    skew: float  # this rank's sleep before its init, seconds
    timeout: float
    check_ids: bool = False
    inject_wrong: bool = False  # legacy `wrong`: one result element changed after the collective
    faults: tuple[str, ...] = ()  # injected kinds on this rank in this round (stress.inject)
    held_roots: tuple[int, ...] = ()  # stale-key: roots held back until the others have read
    group: GroupSlot | None = None  # same-group: the process group this round's communicator joins


class CollectiveSkipped(Exception):
    """skip-collective: leave the communicator's body so that it is aborted, not destroyed."""


def hold_back(job, plan: RoundPlan, deadline: Deadline) -> None:
    """stale-key: this root publishes only after every other rank has read (the stock race, forced)."""
    keys = [f"stress/{plan.seq}/read/{r}" for r in range(job.nranks) if r not in plan.held_roots]
    try:
        job.store.raw.wait(keys, timedelta(seconds=max(deadline.remaining(), 0.001)))
    except Exception:
        pass  # they never read: go on, the round shows what happened


def check_ids_hook(job, seq: int, deadline: Deadline):
    """Before create: all ranks compare the fingerprints they read (one store round trip)."""
    def check(ids) -> None:
        try:
            seen = job.store.all_gather_obj(f"stress/{seq}/ids", ids.fingerprints,
                                            timeout=max(deadline.remaining(), 0.001))
        except BarrierTimeout as e:
            raise DeadlineExceeded("check-ids", "ranks never compared IDs",
                                   str(e), rank=job.rank, host=job.ident.host) from None
        if any(s != seen[0] for s in seen):
            raise StaleIdCaught("check-ids", "stale ID caught before init",
                                "; ".join(f"rank {k} holds {s}" for k, s in enumerate(seen)),
                                rank=job.rank, host=job.ident.host)
    return check


def run_round(job, backend: str, ranks_per_root: int, plan: RoundPlan, verify: Verification,
              reaper=None) -> RankRecord:
    """Run one round on this rank; never raises CommError (it becomes the record's verdict).

    With `reaper` the communicator's destroy (or abort) is handed to it under the round's seq
    and runs behind the next rounds; `teardown_s` is then filled in later (stress.inflight).

    Evidence kept for the diagnosis: the phases this rank entered (also set in the store as it
    goes, so a rank that dies leaves its last phase behind), how late it entered bootstrap,
    whether its input matched the table, and which ranks' data arrived wrong.
    """
    rnd = Round(job, backend, ranks_per_root, plan, verify, reaper)
    with markers.span("round", round=plan.round, rank=job.rank, mode=plan.mode):
        with markers.span("skew", round=plan.round, rank=job.rank):
            time.sleep(plan.skew)
        try:
            rnd.bootstrap_and_init()
        except CollectiveSkipped:
            pass  # this rank saw nothing wrong; the others' evidence shows it never came
        except CommError as e:
            rnd.failed(e)
        except Exception as e:  # anything else is this round's error too: the run goes on
            rnd.crashed(e)
        finally:
            rnd.phases.close()
        if rnd.rec.verdict != "ok":
            markers.mark("failure", round=plan.round, rank=job.rank, verdict=rnd.rec.verdict)
    rnd.rec.elapsed_s = time.perf_counter() - rnd.started
    rnd.rec.evidence = evidence(rnd.seen.get("comm"))
    return rnd.rec


class Round:
    """One round's phases on one rank, each an NVTX range inside the round's, feeding one RankRecord."""

    def __init__(self, job, backend: str, ranks_per_root: int, plan: RoundPlan, verify: Verification, reaper):
        self.job, self.backend, self.plan, self.verify, self.reaper = job, backend, plan, verify, reaper
        self.ranks_per_root = ranks_per_root
        self.rec = RankRecord(job.rank)
        self.faults = set(plan.faults)
        self.seen: dict = {}
        self.phases = contextlib.ExitStack()
        self.started = time.perf_counter()
        self.phase_started = self.started
        self.deadline: Deadline | None = None

    def reached(self, phase: str) -> None:
        self.phase_started = time.perf_counter()
        self.rec.phases.append(phase)
        self.job.store.raw.set(f"stress/{self.plan.seq}/at/{self.job.rank}", phase)

    def _span(self, name: str):
        return markers.span(name, round=self.plan.round, rank=self.job.rank)

    def _closed(self, comm, ok, seconds) -> None:
        self.phases.close()
        self.seen["comm"] = comm
        self.rec.teardown_s = seconds

    def _after_exchange(self, ids) -> None:
        """The bootstrap range ends and the init range begins; --check-ids compares the IDs first."""
        job, plan = self.job, self.plan
        self.phases.close()
        self.phases.enter_context(self._span("init"))
        self.reached("init")
        if plan.held_roots and job.rank not in plan.held_roots:
            job.store.raw.set(f"stress/{plan.seq}/read/{job.rank}", b"1")
        if "crash" in self.faults:
            inject.die()
        if plan.check_ids:
            check_ids_hook(job, plan.seq, self.deadline)(ids)

    def bootstrap_and_init(self) -> None:
        job, plan = self.job, self.plan
        self.deadline = Deadline(plan.timeout)
        init_plan = InitPlan(rank=job.rank, nranks=job.nranks, mode=plan.mode, ranks_per_root=self.ranks_per_root,
                             counter=plan.seq, store=job.store, local_rank=job.ident.local_rank,
                             namespace="stress", before_create=self._after_exchange, group=plan.group)
        first = "init" if self.backend == "torch" else "bootstrap"  # torch exchanges IDs inside its create
        self.phases.enter_context(self._span(first))
        self.rec.late_s = time.perf_counter() - self.started
        self.reached(first)
        if job.rank in plan.held_roots:
            hold_back(job, plan, self.deadline)
        with communicator(self.backend, init_plan, self.deadline, on_close=self._closed, reaper=self.reaper,
                          key=plan.seq, round=plan.round, rank=job.rank) as comm:
            self.phases.close()
            self.rec.exchange_s, self.rec.init_s = comm.timings.exchange, comm.timings.init
            with self._span("verify"):
                self.verified_collective(comm)
            self.reached("destroy")
            if self.reaper is None:  # else the reaper's thread has the destroy range
                self.phases.enter_context(self._span("destroy"))
        if self.rec.wrong:
            self.rec.verdict = "wrong"

    def verified_collective(self, comm) -> None:
        rec, verify, deadline = self.rec, self.verify, self.deadline
        t0 = time.perf_counter()
        send, recv = verify.buffers(comm.device)
        if "corrupt" in self.faults:
            send = inject.flip_bit(send)
        if "skip-collective" in self.faults:  # as if busy elsewhere: the others wait in vain
            time.sleep(deadline.remaining() + SKIP_GRACE_S)
            raise CollectiveSkipped()
        self.reached("verify")
        verify.run(comm, send, recv)
        if "crash-collective" in self.faults:
            inject.die()
        comm.wait(deadline, verify.name)
        if self.plan.inject_wrong:
            verify.spoil(recv)
        rec.wrong = verify.wrong(recv)
        rec.input_wrong = verify.input_wrong(send)
        rec.wrong_from = verify.sources(recv) if rec.wrong else None
        rec.verify_s = time.perf_counter() - t0

    def failed(self, e: CommError) -> None:
        self.rec.verdict, self.rec.error = e.kind, {**e.as_dict(), **self.when()}
        if self.rec.error["rank"] < 0:  # raised where the rank is not known (the ID exchange)
            self.rec.error.update(rank=self.job.rank, host=self.job.ident.host)

    def crashed(self, e: Exception) -> None:
        self.rec.verdict = "error"
        self.rec.error = {"kind": "error", "op": "round", "lib_error": type(e).__name__,
                          "detail": str(e).strip().splitlines()[0][:300] if str(e).strip() else "",
                          "rank": self.job.rank, "host": self.job.ident.host,
                          "phase": self.rec.last_phase or "skew", **self.when()}

    def when(self) -> dict:
        """When a failure ended this rank's round: seconds from the round's start (every rank leaves its
        start barrier at once, so these order the ranks' failures in time) and into its last phase."""
        now = time.perf_counter()
        return {"at_s": round(now - self.started, 4), "phase_s": round(now - self.phase_started, 4),
                "last_phase": self.rec.last_phase or "skew"}


def absent(job, plan: RoundPlan) -> RankRecord:
    """missing-rank: this rank does not join the round; its record says only that it was not there."""
    return RankRecord(job.rank, elapsed_s=0.0)


def evidence(comm) -> dict | None:
    """The IDs this rank used, as fingerprints (None when it never got as far as an exchange)."""
    ids = getattr(comm, "ids_used", None)
    return None if ids is None else ids.evidence()
