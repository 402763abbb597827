"""Test job: its last rank carries out a SIGTERM the way stress's ranks do (nccl_bench.job.launcher.note_stop),
then every rank ends well, the last one without ending by the signal: the window where a rank's own exit loses
the stop (issue 72). The launcher must still end the job as stopped: 143 and one line.
usage: python -m stopjob   (with tests/jobs on PYTHONPATH)
"""
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nccl_bench.job import launcher  # noqa: E402
from nccl_bench.job.options import JobOptions  # noqa: E402
from nccl_bench.job.driver import run_job  # noqa: E402
from nccl_bench.job.runner import guarded  # noqa: E402
from nccl_bench.job.spec import JobSpec, WorkerRef  # noqa: E402


def main() -> int:
    return run_job(JobSpec("stopjob", JobOptions(backend="gloo", nranks=2), WorkerRef("stopjob", "worker")))


def worker():
    def run(job):
        job.store.barrier("start", timeout=30)
        if job.rank == job.nranks - 1:
            launcher.note_stop(signal.SIGTERM)
            launcher._stop_noted = None  # its own exit loses the signal: only the launcher can still tell
        job.store.barrier("done", timeout=30)
        return 0
    return run


if __name__ == "__main__":
    sys.exit(guarded(main))
