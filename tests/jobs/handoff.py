"""Test job: the driver draws a token no rank could draw again and records each time its main runs; every rank
writes the token its worker was handed and its sys.argv. A rank of ours runs on the options its driver checked
(nccl_bench.job.spec) and never runs the command's main; a rank of a user's launcher runs main itself.
With --exit-traps each rank's worker leaves what its process's end must do and must not: an exit function
(Python's atexit) that writes OUT.atexit<rank>, a line on sys.stdout and one in C's stdout buffer, neither flushed,
and a C exit handler that aborts the process (libc's on_exit(abort)), as a library's exit-time teardown did.
usage: python tests/jobs/handoff.py OUT [--nranks N] [--exit-traps]
"""
import argparse
import atexit
import ctypes
import json
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nccl_bench.job.driver import run_job  # noqa: E402
from nccl_bench.job.options import JobOptions  # noqa: E402
from nccl_bench.job.runner import guarded  # noqa: E402
from nccl_bench.job.spec import JobSpec, WorkerRef  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--exit-traps", action="store_true")
    a = p.parse_args()
    with open(f"{a.out}.mains", "a") as f:
        f.write(f"{os.getpid()} {os.environ.get('RANK', '-')}\n")
    token = uuid.uuid4().hex  # what the driver checked: no rank of ours may draw its own
    opts = JobOptions(backend="gloo", nranks=a.nranks)
    ref = WorkerRef("handoff", "worker", (a.out, token, a.exit_traps),
                    search_path=str(Path(__file__).resolve().parent))
    return run_job(JobSpec("handoff", opts, ref))


def worker(out: str, token: str, exit_traps: bool = False):
    def run(job):
        Path(f"{out}.rank{job.rank}").write_text(json.dumps({"token": token, "argv": sys.argv, "pid": os.getpid()}))
        job.store.barrier("done", timeout=30)
        if exit_traps:
            libc = ctypes.CDLL(None)
            libc.on_exit(ctypes.cast(libc.abort, ctypes.c_void_p), None)
            atexit.register(Path(f"{out}.atexit{job.rank}").write_text, "ran")
            sys.stdout.write(f"rank {job.rank}: python's line\n")
            libc.printf(f"rank {job.rank}: C's line\n".encode())
        return 0
    return run


if __name__ == "__main__":
    sys.exit(guarded(main))
