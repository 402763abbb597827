"""Test job: N rounds of init + checked all_reduce + destroy under seeded random skew.

Rank 0 writes one JSON line per round with every rank's ID evidence and outcome.
usage: python tests/jobs/churn.py OUT.jsonl MODE ROUNDS SKEW_MAX TIMEOUT [--nranks N]
"""
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from nccl_bench.cli import guarded, run_job  # noqa: E402
from nccl_bench.comm import InitPlan  # noqa: E402
from nccl_bench.deadline import Deadline  # noqa: E402
from nccl_bench.errors import CommError  # noqa: E402
from nccl_bench.lifetime import communicator  # noqa: E402
from nccl_bench.options import JobOptions  # noqa: E402


def main() -> int:
    out, mode, rounds, skew_max, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    nranks = int(sys.argv[7]) if len(sys.argv) > 7 else 3
    opts = JobOptions(backend="gloo", nranks=nranks, init=[mode], ranks_per_root=1, timeout=timeout)

    def worker(job):
        rng = random.Random(1234 + job.rank)
        for r in range(rounds):
            job.store.barrier(f"churn/{r}", timeout=timeout + 30)
            time.sleep(rng.uniform(0, skew_max))
            plan = InitPlan(job.rank, job.nranks, mode, 1, r, job.store, namespace="churn")
            rec = {"round": r, "rank": job.rank, "ok": False, "error": None}
            t0 = time.monotonic()
            comm_ref = {}

            def closed(c, ok, seconds):
                comm_ref["c"] = c
            try:
                with communicator("gloo", plan, Deadline(timeout), on_close=closed) as c:
                    x = torch.full((16,), float(job.rank + 1))
                    c.all_reduce(x, x, "sum")
                    c.wait(Deadline(timeout))
                    rec["ok"] = bool((x == job.nranks * (job.nranks + 1) / 2).all())
            except CommError as e:
                rec["error"] = e.as_dict()
            rec["elapsed"] = time.monotonic() - t0
            ev = None
            if "c" in comm_ref and comm_ref["c"].ids_used is not None:
                ev = comm_ref["c"].ids_used.evidence()
            rec["evidence"] = ev
            everyone = job.store.all_gather_obj(f"churn/{r}/rec", rec, timeout=timeout + 30)
            if job.rank == 0:
                with open(out, "a") as f:
                    f.write(json.dumps({"round": r, "ranks": everyone}) + "\n")
        return 0

    return run_job([__file__, *sys.argv[1:]], opts, worker)


if __name__ == "__main__":
    sys.exit(guarded(main))
