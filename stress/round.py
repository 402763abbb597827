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
              reaper=None) -> dict:
    """Run one round on this rank; never raises CommError (it becomes the record's verdict).

    With `reaper` the communicator's destroy (or abort) is handed to it under the round's seq
    and runs behind the next rounds; `teardown_s` is then filled in later (stress.behind).

    Evidence kept for the diagnosis: the phases this rank entered (also set in the store as it
    goes, so a rank that dies leaves its last phase behind), how late it entered bootstrap,
    whether its input matched the table, and which ranks' data arrived wrong.
    """
    rec = {"rank": job.rank, "verdict": "ok", "error": None, "wrong": 0, "exchange_s": None,
           "init_s": None, "verify_s": None, "teardown_s": None, "evidence": None, "phases": [],
           "late_s": None, "input_wrong": 0, "wrong_from": None}
    faults = set(plan.faults)
    seen = {}
    phases = contextlib.ExitStack()

    def reached(phase: str) -> None:
        rec["phases"].append(phase)
        job.store.raw.set(f"stress/{plan.seq}/at/{job.rank}", phase)

    def closed(comm, ok, seconds):
        phases.close()
        seen["comm"] = comm
        rec["teardown_s"] = seconds

    def after_exchange(ids):  # bootstrap range ends, init range begins, optionally check IDs
        phases.close()
        phases.enter_context(markers.span("init", round=plan.round, rank=job.rank))
        reached("init")
        if plan.held_roots and job.rank not in plan.held_roots:
            job.store.raw.set(f"stress/{plan.seq}/read/{job.rank}", b"1")
        if "crash" in faults:
            inject.die()
        if plan.check_ids:
            check(ids)

    t_round = time.perf_counter()
    with markers.span("round", round=plan.round, rank=job.rank, mode=plan.mode):
        with markers.span("skew", round=plan.round, rank=job.rank):
            time.sleep(plan.skew)
        deadline = Deadline(plan.timeout)
        check = check_ids_hook(job, plan.seq, deadline)
        init_plan = InitPlan(rank=job.rank, nranks=job.nranks, mode=plan.mode, ranks_per_root=ranks_per_root,
                             counter=plan.seq, store=job.store, local_rank=job.ident.local_rank,
                             namespace="stress", before_create=after_exchange, group=plan.group)
        # torch exchanges IDs inside PyTorch: its whole create is the init range
        first = "init" if backend == "torch" else "bootstrap"
        phases.enter_context(markers.span(first, round=plan.round, rank=job.rank))
        try:
            rec["late_s"] = time.perf_counter() - t_round
            reached(first)
            if job.rank in plan.held_roots:
                hold_back(job, plan, deadline)
            with communicator(backend, init_plan, deadline, on_close=closed, reaper=reaper, key=plan.seq,
                              round=plan.round, rank=job.rank) as comm:
                phases.close()
                rec["exchange_s"], rec["init_s"] = comm.timings.exchange, comm.timings.create
                with markers.span("verify", round=plan.round, rank=job.rank):
                    t0 = time.perf_counter()
                    send, recv = verify.buffers(comm.device)
                    if "corrupt" in faults:
                        send = inject.flip_bit(send)
                    if "skip-collective" in faults:  # as if busy elsewhere: the others wait in vain
                        time.sleep(deadline.remaining() + SKIP_GRACE_S)
                        raise CollectiveSkipped()
                    reached("verify")
                    verify.run(comm, send, recv)
                    if "crash-collective" in faults:
                        inject.die()
                    comm.wait(deadline, verify.check.name)
                    if plan.inject_wrong:
                        recv[0] += 1
                    rec["wrong"] = verify.wrong(recv)
                    rec["input_wrong"] = verify.input_wrong(send)
                    rec["wrong_from"] = verify.sources(recv) if rec["wrong"] else None
                    rec["verify_s"] = time.perf_counter() - t0
                reached("destroy")
                if reaper is None:  # else the reaper's thread has the destroy range
                    phases.enter_context(markers.span("destroy", round=plan.round, rank=job.rank))
            if rec["wrong"]:
                rec["verdict"] = "wrong"
        except CollectiveSkipped:
            pass  # this rank saw nothing wrong; the others' evidence shows it never came
        except CommError as e:
            rec["verdict"], rec["error"] = e.kind, e.as_dict()
            if rec["error"]["rank"] < 0:  # raised where the rank is not known (the ID exchange)
                rec["error"].update(rank=job.rank, host=job.ident.host)
        except Exception as e:  # anything else is this round's error too: the run goes on
            rec["verdict"] = "error"
            rec["error"] = {"kind": "error", "op": "round", "lib_error": type(e).__name__,
                            "detail": str(e).strip().splitlines()[0][:300] if str(e).strip() else "",
                            "rank": job.rank, "host": job.ident.host, "phase": (rec["phases"] or ["skew"])[-1]}
        finally:
            phases.close()
        if rec["verdict"] != "ok":
            markers.mark("failure", round=plan.round, rank=job.rank, verdict=rec["verdict"])
    rec["elapsed_s"] = time.perf_counter() - t_round
    rec["evidence"] = evidence(seen.get("comm"))
    return rec


def absent(job, plan: RoundPlan) -> dict:
    """missing-rank: this rank does not join the round; its record says only that it was not there."""
    return {"rank": job.rank, "verdict": "ok", "error": None, "wrong": 0, "exchange_s": None, "init_s": None,
            "verify_s": None, "teardown_s": None, "evidence": None, "phases": [], "late_s": None,
            "input_wrong": 0, "wrong_from": None, "elapsed_s": 0.0}


def evidence(comm) -> dict | None:
    """The IDs this rank used, as fingerprints (None when it never got as far as an exchange)."""
    ids = getattr(comm, "ids_used", None)
    return None if ids is None else ids.evidence()
