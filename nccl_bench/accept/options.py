"""accept's options: what a run measures and judges; bad values fail by name before anything runs, and every
output is proven writable."""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.core import junit, results
from nccl_bench.core.errors import UsageError, seconds
from nccl_bench.job.options import check_launch


@dataclass
class AcceptOptions:
    backend: str | None = None
    nranks: int | None = None
    profile: str | None = None
    json: str | None = None
    junit: str | None = None
    init_rounds: int = 10
    stress_rounds: int = 20
    step_timeout: float = 300.0  # seconds for each step's job
    locate: bool = False  # on FAIL, run `locate` to name the GPU, link or node
    margin: float = 0.85  # a derived profile's floors: this x the expectation
    record_baseline: str | None = None  # write the run as a golden node's profile here
    workload: list[str] | None = None  # a job's dumps, trace or workload file: replayed and judged
    workload_max_slowdown: float = 1.25  # the replay's sequence may take this x the job's own
    network: str | None = None  # a bench file across the nodes: its busbw judged by this node's NICs

    def __post_init__(self):
        self.backend = check_launch(self.backend, self.nranks)
        for name in ("init_rounds", "stress_rounds"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        seconds("--step-timeout", self.step_timeout)
        if not 0 < self.margin <= 1:
            raise UsageError(f"--margin must be in (0, 1], got {self.margin:g}")
        if not self.workload_max_slowdown > 0:
            raise UsageError(f"--workload-max-slowdown must be above 0, got {self.workload_max_slowdown:g}")
        results.check_writable(self.json, kind="accept")
        results.check_writable(self.record_baseline, "--record-baseline")
        junit.check_writable(self.junit)

    def job_args(self) -> list[str]:
        return ["--backend", self.backend] + (["--nranks", str(self.nranks)] if self.nranks else [])
