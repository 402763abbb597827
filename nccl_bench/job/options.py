"""Options shared by every command that runs a job; bad values fail early by name."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from nccl_bench.comm.bootstrap import DEFAULT_RANKS_PER_ROOT, check_mode
from nccl_bench.comm import check_backend, default_backend, gpu_count
from nccl_bench.core import launch
from nccl_bench.core.errors import UsageError, at_least, seconds
from nccl_bench.core.resources import local_ranks_limit


def split_list(value: str | list[str], allowed: tuple[str, ...], what: str, all_word: str | None = None) -> list[str]:
    """'a,b' -> ['a', 'b'], each checked against `allowed`; `all_word` expands to all."""
    items = value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
    if all_word and items == [all_word]:
        return list(allowed)
    for v in items:
        if v not in allowed:
            raise UsageError(f"unknown {what} '{v}' (choose from {', '.join(allowed)}"
                             + (f" or {all_word}" if all_word else "") + ")")
    if not items:
        raise UsageError(f"no {what} given")
    return items


def check_launch(backend: str | None, nranks: int | None) -> str:
    """The backend (default: nccl with GPUs, gloo without) and the rank count, checked; the backend."""
    backend = check_backend(backend or default_backend())
    if nranks is not None and nranks < 1:
        raise UsageError(f"--nranks must be >= 1, got {nranks}")
    gpus = gpu_count()
    if backend in ("nccl", "torch") and nranks and nranks > gpus:
        raise UsageError(f"--nranks {nranks} is more than the {gpus} GPU(s) of this machine")
    if nranks and launch.detect() is None and (why := local_ranks_limit(nranks)):  # ranks started here
        raise UsageError(f"--nranks {nranks}: {why}")
    return backend


@dataclass
class JobOptions:
    """Who runs: backend, ranks, init modes, roots, and the per-init deadline (seconds)."""

    backend: str | None = None  # None: nccl with GPUs, gloo without
    nranks: int | None = None  # None: one per GPU, or 2 on CPU
    init: list[str] = field(default_factory=lambda: ["scoped"])
    ranks_per_root: int = DEFAULT_RANKS_PER_ROOT
    timeout: float = 60.0  # per-init deadline, seconds
    verbose: bool = False  # library logs (c10d, gloo, NCCL) on the terminal instead of per-rank files

    def __post_init__(self):
        self.backend = check_launch(self.backend, self.nranks)
        self.init = [check_mode(m) for m in self.init]
        at_least("--ranks-per-root", self.ranks_per_root, 1)
        seconds("--timeout", self.timeout)

    def local_ranks(self) -> int:
        """Ranks to self-launch when no launcher started us."""
        if self.nranks:
            return self.nranks
        return gpu_count() if self.backend in ("nccl", "torch") else 2

    def world_ranks(self) -> int:
        """The job's ranks: a user's launcher's world, else the ranks this driver will launch."""
        ident = launch.detect()
        return ident.world_size if ident else self.local_ranks()


def store_timeout_default() -> float:
    """Seconds to reach the job store (NCCL_BENCH_STORE_TIMEOUT, default 60)."""
    try:
        value = float(os.environ.get("NCCL_BENCH_STORE_TIMEOUT", 60))
    except ValueError:
        raise UsageError("NCCL_BENCH_STORE_TIMEOUT must be a number of seconds") from None
    seconds("NCCL_BENCH_STORE_TIMEOUT", value, most=86400.0)
    return value
