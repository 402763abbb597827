"""What one sweep runs (sizes, type, op, root, timing, check, aggregation), checked by option name.

Apart from the engine (nccl_bench.measure.sweep) and without torch, so that bench rejects bad options
before any job, or torch, starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nccl_bench.core.errors import UsageError, at_least
from nccl_bench.measure.timing import TimingPlan

AGGREGATES = ("rank0", "avg", "min", "max")  # nccl-tests -a 0..3


MAX_SIZES = 100_000  # points in one sweep: a bounded table and result file


def size_steps(min_bytes: int, max_bytes: int, factor: float | None, step: int | None) -> list[int]:
    """nccl-tests' sweep: multiply by `factor` when given, else add `step` bytes; more than MAX_SIZES points
    is bad input (-i 1 from 8 B to 8 GiB would be billions)."""
    out, size = [], min_bytes
    while size <= max_bytes:
        if len(out) == MAX_SIZES:
            raise UsageError(f"-b {min_bytes} to -e {max_bytes} in steps of "
                             f"{f'x{factor:g}' if factor else f'{step} bytes'} is more than {MAX_SIZES} sizes")
        out.append(int(size))
        nxt = size * factor if factor else size + step
        if int(nxt) <= size:
            break
        size = int(nxt)
    return out


@dataclass(frozen=True)
class SweepPlan:
    sizes: list[int]
    dtype: str  # torch's name of the element type (float32, float16, ...); the engine resolves it
    type_name: str  # nccl-tests' name: float, half, bfloat16, ...
    op: str = "sum"
    root: int = 0
    timing: TimingPlan = field(default_factory=TimingPlan)
    check: int = 1  # check iterations per size and placement (-c); 0 = no check
    aggregate: str = "avg"
    timeout: float = 60.0  # seconds a timing pass or a check may take before it is a hang
    cycles: int = 1  # -N: the whole sweep again on the same buffers, each cycle its own rows
    report_cputime: bool = False  # -C: the time column is the host time per launch ("cpu_time")
    register: int = 0  # -R: 0 none, 1 local (ncclCommRegister), 2 symmetric (ncclCommWindowRegister)
    unalign: int = 0  # -u: elements by which every send and receive view is moved off the allocation
    per_iter_skip: int = 0  # -K: first timed iterations left out of the -I statistics
    timestamps: bool = False  # -S: each row says when its size started

    def __post_init__(self):
        if self.cycles < 1:
            raise UsageError(f"-N/--run_cycles must be >= 1, got {self.cycles} (0, nccl-tests' endless run, "
                             "is not offered: results are written when the sweep ends)")
        if self.aggregate not in AGGREGATES:
            raise UsageError(f"-a/--average must be one of {', '.join(AGGREGATES)} (or 0..3), got {self.aggregate}")
        at_least("-c/--check", self.check, 0)
        if self.register not in (0, 1, 2):
            raise UsageError(f"-R/--local_register must be 0, 1 or 2, got {self.register}")
        at_least("-u/--unalign", self.unalign, 0, " elements")
        if not 0 <= self.per_iter_skip < self.timing.iters:
            raise UsageError(f"-K/--per_iter_skip must be >= 0 and below -n/--iters {self.timing.iters}, "
                             f"got {self.per_iter_skip}")
