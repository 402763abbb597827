"""A rank our launcher started: it reads the job its driver checked (nccl_bench.job.spec) and runs its part
(nccl_bench.job.runner.run_rank). Forked ranks come here from launcher.run_module; a rank started afresh
(NCCL_BENCH_RANK_START=exec) as `python -m nccl_bench.job.rank FILE`."""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """`argv`: the job's file. Bad input here is the driver's fault, not the user's: one line, exit 2."""
    from nccl_bench.core.startmarks import mark
    mark("python")  # the rank's Python is ready and its entry imported
    from nccl_bench.job.runner import guarded, run_rank
    from nccl_bench.job import spec
    return guarded(lambda: run_rank(spec.read(argv[0])))


def console() -> int:
    return main(sys.argv[1:])


if __name__ == "__main__":  # started afresh: it ends as a forked rank does (runner.end_rank_process)
    from nccl_bench import entry
    from nccl_bench.job.runner import end_rank_process
    end_rank_process(entry("nccl_bench.job.rank", "console"))
