"""Test job: a job whose ranks load no torch (as a `--backend nccl` bench's), on our own launcher and job store.

Each rank meets the others at a barrier, exchanges unique IDs through the store as a scalable init does
(nccl_bench.comm.bootstrap, stock and scoped key layouts), and gathers whether torch is loaded; rank 0
writes what it gathered, and the launcher (which also loads no torch) adds its own line.
usage: python -m torchfreejob OUT.json [--nranks N] [--hold]   (with tests/jobs on PYTHONPATH)
--hold: after the gather each rank writes its pid beside OUT and waits, to be stopped by a signal.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nccl_bench.comm.bootstrap import exchange_ids  # noqa: E402
from nccl_bench.core.deadline import Deadline  # noqa: E402
from nccl_bench.job.options import JobOptions  # noqa: E402
from nccl_bench.job.driver import run_job  # noqa: E402
from nccl_bench.job.runner import guarded  # noqa: E402
from nccl_bench.job.spec import JobSpec, WorkerRef  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--nranks", type=int, default=3)
    p.add_argument("--hold", action="store_true")
    a = p.parse_args()
    opts = JobOptions(backend="gloo", nranks=a.nranks)
    ref = WorkerRef("torchfreejob", "worker", (a,), search_path=str(Path(__file__).resolve().parent))
    code = run_job(JobSpec("torchfreejob", opts, ref, torch_free=True))
    if "RANK" not in os.environ:  # the launcher, after its job
        doc = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}
        doc["launcher_torch"] = "torch" in sys.modules
        Path(a.out).write_text(json.dumps(doc))
    return code


def worker(a):
    def run(job):
        job.store.barrier("start", timeout=30)
        ids = {}
        for counter, mode in enumerate(("stock", "scoped", "stock")):
            ex = exchange_ids(job.store.raw, "ids", mode, job.rank, job.nranks, 1, counter,
                              lambda: os.urandom(128), Deadline(30))
            ids[f"{counter}/{mode}"] = [b.hex()[:8] for b in ex.ids]
        mine = {"rank": job.rank, "torch": "torch" in sys.modules, "ids": ids,
                "store": type(job.store.raw).__name__}
        everyone = job.store.all_gather_obj("everyone", mine, timeout=30)
        if job.rank == 0:
            Path(a.out).write_text(json.dumps({"ranks": everyone}))
        if a.hold:
            Path(f"{a.out}.rank{job.rank}.pid").write_text(str(os.getpid()))
            while True:
                time.sleep(0.05)
        return 0
    return run


def cli() -> int:
    return guarded(main)


if __name__ == "__main__":  # as a command of ours starts: SIGTERM is the one line and 143 (nccl_bench.entry)
    from nccl_bench import entry
    sys.exit(entry("torchfreejob", "cli"))
