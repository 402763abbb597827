"""The driver hands each rank the job as it checked it (nccl_bench.job.spec): a rank of ours never runs the
command's main or parses its command line again, however it is started; a rank of a user's launcher runs main
itself and goes straight to its part. A rank's process that would end through the interpreter's exit (started
afresh, or by a user's launcher) ends with its code, its Python exit functions run and its lines flushed (C's too),
and no C exit handler run: PyTorch's profiler aborted ranks of torchrun in one (runner.end_rank_process); here a
planted one aborts. Real processes: our launcher, torchrun, a real store, gloo."""
import json
import pickle

import pytest

from helpers import REPO, run
from nccl_bench.bench.options import BenchOptions
from nccl_bench.job.options import JobOptions
from nccl_bench.job.spec import JobSpec, WorkerRef, read, remove, write

JOB = REPO / "tests" / "jobs" / "handoff.py"


def ranks_of(out, n: int) -> list[dict]:
    return [json.loads((out.parent / f"{out.name}.rank{r}").read_text()) for r in range(n)]


def assert_ended_whole(proc, out, n: int) -> None:
    """Each rank's exit functions ran and its lines came out, and its planted C exit handler (an abort) did not run."""
    said = proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, said
    assert [(out.parent / f"{out.name}.atexit{r}").read_text() for r in range(n)] == ["ran"] * n, said
    for r in range(n):
        assert f"rank {r}: python's line" in proc.stdout and f"rank {r}: C's line" in proc.stdout, said


@pytest.mark.parametrize("start", ["forkserver", "exec"])
def test_a_rank_of_ours_runs_on_its_drivers_options_and_never_runs_main(tmp_path, start):
    out = tmp_path / "handoff"
    traps = ["--exit-traps"] if start == "exec" else []  # a forked rank ends through multiprocessing (os._exit)
    proc = run([str(JOB), str(out), "--nranks", "3", *traps], env={"NCCL_BENCH_RANK_START": start,
                                                                     "PYTHONUNBUFFERED": ""}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if traps:
        assert_ended_whole(proc, out, 3)
    mains = (tmp_path / "handoff.mains").read_text().splitlines()
    assert len(mains) == 1 and mains[0].endswith(" -"), mains  # the driver's, no rank's
    ranks = ranks_of(out, 3)
    assert len({r["token"] for r in ranks}) == 1  # the one the driver drew
    assert all(r["argv"][1:] == [str(out), "--nranks", "3", *traps] for r in ranks)  # the command line, as typed


def test_a_rank_of_a_users_launcher_runs_main_itself_and_ends_whole(tmp_path):
    out = tmp_path / "handoff"
    proc = run(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(JOB), str(out),
                "--nranks", "2", "--exit-traps"], env={"PYTHONUNBUFFERED": ""}, timeout=120)
    assert_ended_whole(proc, out, 2)
    assert len((tmp_path / "handoff.mains").read_text().splitlines()) == 2  # each rank parsed its own


def test_a_bench_job_survives_the_file_unchanged():
    o = BenchOptions(job=JobOptions(backend="gloo", nranks=2), collective=["all_reduce"])
    spec = JobSpec("bench", o.job, WorkerRef("nccl_bench.bench.worker", "worker", (o,)), result="x.json",
                   torch_free=False, argv=("nccl_bench", "bench"))
    path = write(spec)
    try:
        assert read(path) == spec
    finally:
        remove(path)


def test_a_file_its_driver_did_not_write_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "job.pickle"
    bad.write_bytes(pickle.dumps({"not": "a job"}))
    proc = run(["-m", "nccl_bench.job.rank", str(bad)], env={"RANK": "0", "WORLD_SIZE": "1"})
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "not a job its driver wrote" in proc.stderr

