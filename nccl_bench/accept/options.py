"""accept's options: what a run measures and judges; bad values fail by name before anything runs, and every
output is proven writable."""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.core import junit, results
from nccl_bench.core.errors import UsageError, seconds
from nccl_bench.job.options import check_launch

# accept's steps in the order they run; `copies` applies on GPUs, `replay` with --workload
STEPS = ("doctor", "bench", "copies", "init", "stress", "replay")
# what a golden node's profile is made of (accept.golden): a baseline from fewer steps would lack floors
BASELINE_STEPS = ("bench", "init", "stress")


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
    steps: tuple[str, ...] | None = None  # the steps to run (--steps); None: every one that applies
    on_the_node: bool = True  # False for --check-args on a login node: the backend is the node's to check (unless gloo)

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
        self._check_steps()
        results.check_writable(self.json, kind="accept")
        results.check_writable(self.record_baseline, "--record-baseline")
        junit.check_writable(self.junit)

    def _check_steps(self) -> None:
        if self.steps is None:
            return
        if not self.steps:
            raise UsageError(f"--steps: name at least one of {', '.join(STEPS)}")
        for name in self.steps:
            if name not in STEPS:
                raise UsageError(f"--steps {name}: not a step of accept (choose from {', '.join(STEPS)})")
        gloo = self.on_the_node and self.backend == "gloo"
        if "copies" in self.steps and gloo:
            raise UsageError("--steps copies: the GPUs' copies need GPUs (this run's backend is gloo)")
        if "replay" in self.steps and not self.workload:
            raise UsageError("--steps replay: needs --workload, the job to replay")
        if self.workload and "replay" not in self.steps:
            raise UsageError("--workload is judged by the replay step: add replay to --steps")
        left_out = [s for s in BASELINE_STEPS + (() if gloo else ("copies",))
                    if s not in self.steps]
        if self.record_baseline and left_out:
            raise UsageError(f"--record-baseline records a known-good node whole: --steps leaves out "
                             f"{', '.join(left_out)}")

    def runs(self, step: str) -> bool:
        """Whether --steps lets `step` run (whether it applies is the step list's to say)."""
        return self.steps is None or step in self.steps

    def job_args(self) -> list[str]:
        return ["--backend", self.backend] + (["--nranks", str(self.nranks)] if self.nranks else [])
