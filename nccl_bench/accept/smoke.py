"""`smoke`: the quickest "does this node work": per mode one init, one checked all_reduce, one destroy."""
from __future__ import annotations

from nccl_bench.job.cli import Parser, add_job_args, job_options, prog

from nccl_bench.job.driver import run_job
from nccl_bench.job.runner import Job
from nccl_bench.job.spec import JobSpec, WorkerRef
from nccl_bench.comm import InitPlan
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import EXIT_FAILED, BarrierTimeout, CommError
from nccl_bench.comm.lifetime import communicator
from nccl_bench.job.options import JobOptions


def parser() -> Parser:
    p = Parser(prog=prog("smoke"), description="one init, one checked all_reduce and one destroy per init mode")
    add_job_args(p, init_default="regular,stock,scoped", allow_all=True)
    return p


def smoke_mode(job: Job, opts: JobOptions, mode: str, counter: int) -> dict:
    """One init + checked all_reduce + destroy; returns this rank's outcome."""
    import torch  # here, on the rank: the command's parsing and options stay free of it
    out = {"mode": mode, "ok": False, "init_ms": None, "exchange_ms": None, "destroy_ms": None, "error": None}
    plan = InitPlan(rank=job.rank, nranks=job.nranks, mode=mode, ranks_per_root=opts.ranks_per_root,
                    counter=counter, store=job.store, local_rank=job.ident.local_rank, namespace="smoke")

    def closed(comm, ok, seconds):
        out["destroy_ms"] = seconds * 1e3

    deadline = Deadline(opts.timeout)
    try:
        with communicator(opts.backend, plan, deadline, on_close=closed) as comm:
            t = comm.timings
            out["init_ms"] = (t.init or 0) * 1e3  # the whole create call, the exchange inside it
            out["exchange_ms"] = None if t.exchange is None else t.exchange * 1e3
            x = torch.full((1024,), float(job.rank + 1), device=comm.device)
            comm.all_reduce(x, x, "sum")
            comm.wait(deadline, "all_reduce")
            want = job.nranks * (job.nranks + 1) / 2
            wrong = int((x != want).sum())
            if wrong:
                out["error"] = f"all_reduce: {wrong} of {x.numel()} elements wrong"
            else:
                out["ok"] = True
    except CommError as e:
        out["error"] = str(e)
    return out


def worker(opts: JobOptions):
    def run(job: Job) -> int:
        lines, ok = [], True
        for i, mode in enumerate(opts.init):
            mine = smoke_mode(job, opts, mode, counter=i)
            try:
                everyone = job.store.all_gather_obj(f"smoke/{mode}", mine, timeout=opts.timeout + 30)
            except BarrierTimeout as e:
                everyone, ok = [mine], False
                mine["error"] = str(e)
            bad = [o for o in everyone if not o["ok"]]
            ok &= not bad
            inits = [o["init_ms"] for o in everyone if o["init_ms"] is not None]
            if bad:
                status = "FAIL " + "; ".join(f"{o['error']}" for o in bad[:3])
            else:
                ex = [o["exchange_ms"] for o in everyone if o["exchange_ms"] is not None]
                status = (f"ok    init {max(inits):8.1f} ms" + (f"  (id exchange in it {max(ex):.2f} ms)" if ex else "")
                          + f"  all_reduce ok  destroy {max(o['destroy_ms'] or 0 for o in everyone):.1f} ms")
            lines.append(f"{mode:8s} {status}")
            job.say(f"smoke {opts.backend} x{job.nranks} {lines[-1]}")
        return 0 if ok else EXIT_FAILED
    return run


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    opts = job_options(a, allow_all=True)
    return run_job(JobSpec("smoke", opts, WorkerRef.of(worker, opts)))
