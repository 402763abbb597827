"""What one bench run does: nccl-tests' options as one dataclass that rejects bad values by
name, and the NCCL algorithms --algo takes (the types, ops and sizes are the measuring floor's vocabulary). No
torch here."""
from __future__ import annotations

from dataclasses import dataclass, field

from nccl_bench.measure import collectives, fits
from nccl_bench.core.errors import UsageError
from nccl_bench.job.options import JobOptions, split_list
from nccl_bench.measure.vocabulary import ALL_TYPES, DTYPES, ELEMENT_BYTES, FLOATING, OPS, TYPE_NAMES
from nccl_bench.bench.split import parse as parse_split
from nccl_bench.measure.sweepplan import SweepPlan, size_steps
from nccl_bench.measure.timing import TimingPlan


ALGOS = {"default": None, "ring": "Ring", "tree": "Tree", "nvls": "NVLS", "nvlstree": "NVLSTree",
         "collnetdirect": "CollnetDirect", "collnetchain": "CollnetChain", "pat": "PAT"}


@dataclass
class BenchOptions:
    """What to sweep and how to time it; bad values fail by option name."""

    job: JobOptions
    collectives: list[str] = field(default_factory=lambda: ["all_reduce"])
    min_bytes: int = 32 << 20  # -b
    max_bytes: int = 32 << 20  # -e
    factor: float | None = None  # -f (multiply)
    step: int | None = None  # -i (add), used when -f is not given
    iters: int = 20  # -n
    warmup: int = 5  # -w
    warmup_ms: float = 20.0  # --warmup_ms
    check: int = 1  # -c
    op: str = "sum"  # -o, or "all": every reduction (collectives that reduce)
    dtype: str = "float"  # -d (nccl-tests name), or "all": every type
    root: int | str = 0  # -r, or "all": every rank (rooted collectives)
    graph: int = 0  # -G
    aggregate: str = "avg"  # -a
    blocking: bool = False  # -z
    cycles: int = 1  # -N
    report_cputime: bool = False  # -C: the time column is the host (CPU) time per launch
    local_register: int = 0  # -R: 0 none, 1 local (ncclCommRegister), 2 symmetric (ncclCommWindowRegister)
    algos: list[str] = field(default_factory=lambda: ["default"])
    proto: str | None = None
    json: str | None = None
    confirm_algo: bool = True
    per_iter: int = 0  # -I: 1 = time every iteration (min/max/p50/p95/p99/stdev/cv, per-process rows)
    per_iter_skip: int = 0  # -K: first timed iterations left out of -I's statistics
    agg_iters: int = 1  # -m: operations per timed iteration
    memory: int = 0  # -M: 1 = report memory usage
    timestamps: int = 0  # -S: 1 = a timestamp per row
    unalign: int = 0  # -u: elements by which the buffers are moved off their allocation
    parallel_init: int = 0  # -p: accepted (0/1) and recorded; one process per GPU inits in parallel anyway
    split: str | None = None  # --split / NCCL_TESTS_SPLIT(_MASK): groups by rank, each its own sweep

    def __post_init__(self):
        self.collectives = split_list(self.collectives, collectives.NAMES, "collective", "all")
        self.algos = split_list([a.lower() for a in self.algos], tuple(ALGOS), "algorithm (--algo)")
        if self.dtype not in DTYPES and self.dtype != "all":
            raise UsageError(f"-d/--datatype: unknown type '{self.dtype}' (choose from {', '.join(DTYPES)} or all)")
        if self.op not in OPS and self.op != "all":
            raise UsageError(f"-o/--op: unknown reduction '{self.op}' (choose from {', '.join(OPS)} or all)")
        if self.op == "avg" and self.dtype != "all" and self.torch_dtype_name not in FLOATING:
            raise UsageError(f"-o/--op avg needs a floating type; -d {self.dtype} is an integer type")
        if self.root != "all" and not isinstance(self.root, int):
            raise UsageError(f"-r/--root must be a rank or all, got {self.root!r}")
        for name, value in (("-I/--per_iter_timing", self.per_iter), ("-M/--memory", self.memory),
                            ("-S/--report_timestamps", self.timestamps), ("-p/--parallel_init", self.parallel_init)):
            if value not in (0, 1):
                raise UsageError(f"{name} must be 0 or 1, got {value}")
        if self.per_iter_skip and not self.per_iter:
            raise UsageError("-K/--per_iter_skip needs -I/--per_iter_timing 1")
        if self.min_bytes < 1:
            raise UsageError(f"-b/--minbytes {self.min_bytes}: the smallest size is at least 1 byte")
        element = min(ELEMENT_BYTES[DTYPES[t]] for t in self.types())
        if self.max_bytes < element:
            raise UsageError(f"-e/--maxbytes {self.max_bytes}: no size up to it holds one {element}-byte element, so "
                             "nothing would be measured")
        if self.min_bytes > self.max_bytes:
            raise UsageError(f"-b/--minbytes {self.min_bytes} is larger than -e/--maxbytes {self.max_bytes}")
        if self.factor is not None and self.step is not None:
            raise UsageError("give -f/--stepfactor or -i/--stepbytes, not both")
        if self.factor is not None and not self.factor > 1:
            raise UsageError(f"-f/--stepfactor must be > 1, got {self.factor:g}")
        if self.step is not None and self.step < 1:
            raise UsageError(f"-i/--stepbytes must be >= 1, got {self.step}")
        if self.factor is None and self.step is None:
            self.step = 1 << 20  # nccl-tests' default -i 1M
        if self.root != "all" and self.root < 0:
            raise UsageError(f"-r/--root must be >= 0, got {self.root}")
        if self.split is not None:
            parse_split(self.split)
        if self.graph and self.job.backend != "nccl":
            raise UsageError(f"-G/--cudagraph needs --backend nccl (CUDA graphs of raw NCCL calls); "
                             f"got --backend {self.job.backend}")
        if self.local_register not in (0, 1, 2):
            raise UsageError(f"-R/--local_register must be 0, 1 or 2, got {self.local_register}")
        if self.local_register and self.job.backend != "nccl":
            raise UsageError(f"-R/--local_register {self.local_register} needs --backend nccl "
                             f"(buffer registration is NCCL's); got --backend {self.job.backend}")
        if self.job.backend == "gloo" and self.max_bytes > fits.GLOO_MAX_BYTES:
            raise UsageError(f"-e/--maxbytes {self.max_bytes} is too large for the CPU (gloo) model; "
                             "keep it <= 256M")
        self.timing = TimingPlan(self.iters, self.warmup, self.blocking, self.graph, self.agg_iters,
                                 bool(self.per_iter), self.warmup_ms)
        self.sweep_plan(self.job.timeout, *self.combos(collectives.get(self.collectives[0]), 1)[0])  # -a -c -N -u -K
        if not self.pairs():
            raise UsageError(f"no collective in {','.join(self.collectives)} runs with --algo {','.join(self.algos)} "
                             "(tree applies to all_reduce only)")

    @property
    def torch_free(self) -> bool:
        """Whether the ranks run without torch: the nccl backend on buffers, streams and events of the CUDA
        driver's own (nccl_bench.core.cudadriver). CUDA graphs (-G), registration (-R) and torch's memory
        figures (-M) keep torch's."""
        return self.job.backend == "nccl" and not (self.graph or self.local_register or self.memory)

    @property
    def torch_dtype_name(self) -> str:
        return DTYPES[self.dtype]

    def types(self) -> list[str]:
        return list(ALL_TYPES) if self.dtype == "all" else [self.dtype]

    def combos(self, coll: collectives.Collective, nranks: int) -> list[tuple[str, str, int]]:
        """(type, op, root) to sweep for one collective: -o all only where it reduces, -r all only
        where it has a root; avg only on floating types."""
        ops = list(OPS) if self.op == "all" and coll.reduces else ["sum" if self.op == "all" else self.op]
        roots = list(range(nranks)) if self.root == "all" and coll.rooted else [0 if self.root == "all" else self.root]
        return [(t, op, r) for t in self.types() for op in ops for r in roots
                if not (op == "avg" and coll.reduces and DTYPES[t] not in FLOATING)]

    def sizes(self) -> list[int]:
        return size_steps(self.min_bytes, self.max_bytes, self.factor, self.step)

    def pairs(self) -> list[tuple[str, str]]:
        """(algo, collective) to run: an algorithm only where NCCL has it; point-to-point once."""
        out = []
        for i, algo in enumerate(self.algos):
            for name in self.collectives:
                c = collectives.get(name)
                if algo == "default" or algo in c.algos or (not c.algos and i == 0):
                    out.append((algo, name))
        return out

    def skipped(self) -> list[tuple[str, str]]:
        run = set(self.pairs())
        return [(a, c) for a in self.algos for c in self.collectives
                if (a, c) not in run and collectives.get(c).algos]

    def sweep_plan(self, timeout: float, dtype: str, op: str, root: int) -> SweepPlan:
        name = DTYPES[dtype]
        return SweepPlan(self.sizes(), name, TYPE_NAMES[name], op, root, self.timing, self.check,
                         self.aggregate, timeout, self.cycles, report_cputime=self.report_cputime,
                         register=self.local_register, unalign=self.unalign, per_iter_skip=self.per_iter_skip,
                         timestamps=bool(self.timestamps))
