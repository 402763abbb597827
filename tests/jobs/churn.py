"""Test job: rounds of init + checked all_reduce + destroy, with skew, on any backend.

Rank 0 writes one JSON line per round with every rank's ID evidence and outcome.
usage: python tests/jobs/churn.py OUT.jsonl --modes stock,stock,scoped [--backend gloo]
       [--skew-max S] [--delay ROUND:RANK:SECONDS] [--timeout T] [--ranks-per-root K] [--nranks N]
   or: python -m churn ... with tests/jobs on PYTHONPATH. Either way the ranks fork from a server that imported
       torch once and find this module by its folder (WorkerRef.search_path)
"""
import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nccl_bench.job.driver import run_job  # noqa: E402
from nccl_bench.job.runner import guarded  # noqa: E402
from nccl_bench.comm import InitPlan  # noqa: E402
from nccl_bench.core.deadline import Deadline  # noqa: E402
from nccl_bench.core.errors import CommError  # noqa: E402
from nccl_bench.comm.lifetime import communicator  # noqa: E402
from nccl_bench.job.options import JobOptions  # noqa: E402
from nccl_bench.job.spec import JobSpec, WorkerRef  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--modes", required=True)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--skew-max", type=float, default=0.0)
    p.add_argument("--delay", action="append", default=[])
    p.add_argument("--timeout", type=float, default=1.5)
    p.add_argument("--ranks-per-root", type=int, default=1)
    p.add_argument("--nranks", type=int, default=None)
    a = p.parse_args()
    opts = JobOptions(backend=a.backend, nranks=a.nranks, init=sorted(set(a.modes.split(","))),
                      ranks_per_root=a.ranks_per_root, timeout=a.timeout)
    ref = WorkerRef("churn", "worker", (a,), search_path=str(Path(__file__).resolve().parent))
    return run_job(JobSpec("churn", opts, ref, result=a.out))  # library logs beside the output


def worker(a):
    modes = a.modes.split(",")
    delays = {(int(r), int(k)): float(s) for r, k, s in (d.split(":") for d in a.delay)}

    def run(job):
        import torch  # in the ranks only: the launcher needs none
        rng = random.Random(1234 + job.rank)
        for r, mode in enumerate(modes):
            job.store.barrier(f"churn/{r}", timeout=a.timeout + 60)
            time.sleep(rng.uniform(0, a.skew_max) + delays.get((r, job.rank), 0.0))
            plan = InitPlan(job.rank, job.nranks, mode, a.ranks_per_root, r, job.store,
                            local_rank=job.ident.local_rank, namespace="churn")
            rec = {"round": r, "mode": mode, "rank": job.rank, "ok": False, "error": None}
            seen = {}

            def closed(c, ok, seconds):
                seen["c"], rec["teardown_s"] = c, seconds
            t0 = time.monotonic()
            try:
                with communicator(a.backend, plan, Deadline(a.timeout), on_close=closed) as c:
                    rec["init_s"] = c.timings.create
                    x = torch.full((16,), float(job.rank + 1), device=c.device)
                    c.all_reduce(x, x, "sum")
                    c.wait(Deadline(a.timeout))
                    rec["ok"] = bool((x == job.nranks * (job.nranks + 1) / 2).all())
            except CommError as e:
                rec["error"] = e.as_dict()
            rec["elapsed"] = time.monotonic() - t0
            ids = seen["c"].ids_used if "c" in seen else None
            rec["evidence"] = ids.evidence() if ids is not None else None
            if ids is not None and hasattr(ids, "before"):
                rec["evidence"]["before"] = ids.before
            everyone = job.store.all_gather_obj(f"churn/{r}/rec", rec, timeout=a.timeout + 60)
            if job.rank == 0:
                with open(a.out, "a") as f:
                    f.write(json.dumps({"round": r, "mode": mode, "ranks": everyone}) + "\n")
                print(f"round {r} {mode}: " + " ".join(
                    f"r{e['rank']}:{'ok' if e['ok'] else (e['error'] or {}).get('kind', 'wrong')}"
                    f"({e['elapsed']:.2f}s)" for e in everyone), flush=True)
        return 0
    return run


if __name__ == "__main__":
    sys.exit(guarded(main))
