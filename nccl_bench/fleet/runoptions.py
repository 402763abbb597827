"""What `fleet run` does, each option declared once (core.optionfields): which nodes, how each is accepted, how the
pairs are measured, and the bounds on Slurm and on time. Bad values fail by option name."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from nccl_bench.core.errors import UsageError
from nccl_bench.core.optionfields import option
from nccl_bench.measure.vocabulary import parse_size

BACKENDS = ("nccl", "gloo")
# accept options the run sets itself, one per node: given after --, they would clash with the run's own
MAX_REMEASURE = 5  # each is a round of pair steps more
RUN_SETS = ("--json", "--junit", "--backend", "--network", "--record-baseline")


@dataclass
class FleetRunOptions:
    partition: str | None = option(None, "-p", "--partition", help="the Slurm partition whose nodes to accept")
    nodelist: str | None = option(None, "-w", "--nodelist", help=(
        "the nodes to accept, a Slurm host list (node[01-64]); default: the partition's, or this allocation's"))
    out: str | None = option(None, "--out", help=(
        "folder for every node's accept, every pair's bench, the logs and the verdict (default "
        "results/runs/fleet-run-<time>)"))
    resume: bool = option(False, "--resume", action="store_true", help=(
        "continue the run in --out: what has a result is kept, what failed or never ran runs"))
    backend: str = option("nccl", "--backend", help="nccl (GPU nodes) or gloo (CPU nodes); default nccl")
    ntasks_per_node: int = option(1, "--ntasks-per-node", type=int, help=(
        "ranks per node in each pair's bench (a GPU node: its GPU count; default 1)"))
    partners: int = option(3, "--partners", type=int, help=(
        "pair rounds: each node is measured with this many other nodes (default 3; all of them in a smaller fleet)"))
    size: str = option("256M", "-b", "--size", help="the pairs' all_reduce size (K/M/G; default 256M)")
    iters: int = option(20, "-n", "--iters", type=int, help="timed iterations of each pair's bench (default 20)")
    remeasure: int = option(1, "--remeasure", type=int, help=(
        "a pair its link would be named for is measured again up to this many times, and named only if slow every "
        "time (0-5; default 1): a link is judged on one pair alone, where other jobs' traffic can take it"))
    max_steps: int = option(64, "--max-steps", type=int, help=(
        "Slurm steps running at once at most (default 64): waves, never thousands of srun"))
    accept_timeout: float = option(1800.0, "--accept-timeout", type=float, help=(
        "seconds a node's accept may take, its wait for Slurm included; then it is silent (default 1800)"))
    pair_timeout: float = option(300.0, "--pair-timeout", type=float, help=(
        "seconds a pair's bench may take (default 300)"))
    srun_args: str = option("", "--srun-args", help=(
        "more srun options for every step, one string: '--gpus-per-node=8 --exclusive --account=ops'"))
    accept_args: list[str] = field(default_factory=list)  # what follows --: each node's accept options

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, got '{self.backend}'")
        for name in ("ntasks_per_node", "partners", "iters", "max_steps"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be 1 or more, got {getattr(self, name)}")
        if not 0 <= self.remeasure <= MAX_REMEASURE:
            raise UsageError(f"--remeasure must be 0 to {MAX_REMEASURE}, got {self.remeasure}")
        for name in ("accept_timeout", "pair_timeout"):
            if not getattr(self, name) > 0:
                raise UsageError(f"--{name.replace('_', '-')} must be above 0 s, got {getattr(self, name):g}")
        self.bytes = parse_size(self.size, "--size")
        if self.bytes < 1:
            raise UsageError(f"--size must be at least 1 byte, got {self.size}")
        try:
            self.srun_extra = shlex.split(self.srun_args)
        except ValueError as e:
            raise UsageError(f"--srun-args {self.srun_args!r}: {e}") from None
        for arg in self.accept_args:
            if arg.split("=")[0] in RUN_SETS:
                raise UsageError(f"{arg.split('=')[0]} after --: fleet run sets it for each node (its own "
                                 f"--backend, and each node's files under --out)")
