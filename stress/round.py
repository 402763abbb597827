"""One round on one rank: skew, ID exchange, init, one verified collective, destroy.

Each phase is an NVTX range inside the round's range; a failure leaves a mark. The
lifetime helper destroys the communicator on success and aborts it on failure. The
returned record is this rank's evidence for the diagnosis (see stress.diagnose).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from nccl_bench import markers
from nccl_bench.comm import InitPlan
from nccl_bench.deadline import Deadline
from nccl_bench.errors import BarrierTimeout, CommError, DeadlineExceeded
from nccl_bench.lifetime import communicator
from stress.verify import Verification


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
    inject_wrong: bool = False


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


def run_round(job, backend: str, ranks_per_root: int, plan: RoundPlan, verify: Verification) -> dict:
    """Run one round on this rank; never raises CommError (it becomes the record's verdict)."""
    rec = {"rank": job.rank, "verdict": "ok", "error": None, "wrong": 0, "exchange_s": None,
           "init_s": None, "verify_s": None, "teardown_s": None, "evidence": None}
    seen = {}
    phases = contextlib.ExitStack()

    def closed(comm, ok, seconds):
        phases.close()
        seen["comm"] = comm
        rec["teardown_s"] = seconds

    def after_exchange(ids):  # bootstrap range ends, init range begins, optionally check IDs
        phases.close()
        phases.enter_context(markers.span("init", round=plan.round, rank=job.rank))
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
                             namespace="stress", before_create=after_exchange)
        # torch exchanges IDs inside PyTorch: its whole create is the init range
        phases.enter_context(markers.span("init" if backend == "torch" else "bootstrap",
                                          round=plan.round, rank=job.rank))
        try:
            with communicator(backend, init_plan, deadline, on_close=closed) as comm:
                phases.close()
                rec["exchange_s"], rec["init_s"] = comm.timings.exchange, comm.timings.create
                with markers.span("verify", round=plan.round, rank=job.rank):
                    t0 = time.perf_counter()
                    send, recv = verify.buffers(comm.device)
                    verify.run(comm, send, recv)
                    comm.wait(deadline, verify.check.name)
                    if plan.inject_wrong:
                        recv[0] += 1
                    rec["wrong"] = verify.wrong(recv)
                    rec["verify_s"] = time.perf_counter() - t0
                phases.enter_context(markers.span("destroy", round=plan.round, rank=job.rank))
            if rec["wrong"]:
                rec["verdict"] = "wrong"
        except CommError as e:
            rec["verdict"], rec["error"] = e.kind, e.as_dict()
        except Exception as e:  # anything else is this round's error too: the run goes on
            rec["verdict"] = "error"
            rec["error"] = {"kind": "error", "op": "round", "lib_error": type(e).__name__,
                            "detail": str(e).strip().splitlines()[0][:300] if str(e).strip() else "",
                            "rank": job.rank, "host": job.ident.host}
        finally:
            phases.close()
        if rec["verdict"] != "ok":
            markers.mark("failure", round=plan.round, rank=job.rank, verdict=rec["verdict"])
    rec["elapsed_s"] = time.perf_counter() - t_round
    rec["evidence"] = evidence(seen.get("comm"))
    return rec


def evidence(comm) -> dict | None:
    """The IDs this rank used, as fingerprints (None when it never got as far as an exchange)."""
    ids = getattr(comm, "ids_used", None)
    return None if ids is None else ids.evidence()
