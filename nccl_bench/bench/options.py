"""What one bench run does: nccl-tests' options as one dataclass that rejects bad values by
name, and the NCCL algorithms --algo takes (the types, ops and sizes are the measuring floor's vocabulary). No
torch here."""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.measure import collectives, fits
from nccl_bench.core.errors import UsageError
from nccl_bench.core.optionfields import option
from nccl_bench.job.options import JobOptions, split_list
from nccl_bench.measure.vocabulary import ALL_TYPES, DTYPES, ELEMENT_BYTES, FLOATING, OPS, TYPE_NAMES, parse_size
from nccl_bench.bench.split import parse as parse_split
from nccl_bench.measure.sweepplan import SweepPlan, size_steps
from nccl_bench.measure.timing import TimingPlan


ALGOS = {"default": None, "ring": "Ring", "tree": "Tree", "nvls": "NVLS", "nvlstree": "NVLSTree",
         "collnetdirect": "CollnetDirect", "collnetchain": "CollnetChain", "pat": "PAT"}


@dataclass
class BenchOptions:
    """What to sweep and how to time it, each option declared once (its flags, help and default; the command line
    and the result's metadata are made from these fields, under these names); bad values fail by option name."""

    job: JobOptions
    # what nccl-tests' options say is run: collectives, sizes, iterations, type, op, root, launch mode
    collective: list[str] = option(None, "--collective", factory=lambda: ["all_reduce"], help=(
        "collective(s), comma separated, or all (default all_reduce, as all_reduce_perf): " + ",".join(
            collectives.NAMES)))
    minbytes: int = option(32 << 20, "-b", "--minbytes",
                           help="smallest size, bytes of the largest buffer (K/M/G; default 32M, as nccl-tests)")
    maxbytes: int = option(32 << 20, "-e", "--maxbytes", help="largest size (K/M/G; default 32M, as nccl-tests)")
    stepfactor: float | None = option(None, "-f", "--stepfactor", type=float, help="multiply the size by this factor")
    stepbytes: int | None = option(None, "-i", "--stepbytes", help="add this many bytes (default 1M when no -f)")
    iters: int = option(20, "-n", "--iters", type=int, help="timed iterations per size (default 20)")
    warmup_iters: int = option(5, "-w", "--warmup_iters", type=int, help=(
        "warm-up iterations at every size from the smallest to the largest by factors of 2 when a sweep starts, as "
        "nccl-tests 2.19.6 (default 5); each size then has one untimed sync launch"))
    warmup_ms: float = option(20.0, "--warmup_ms", type=float, help=(
        "with -w > 0, the warm-up goes on at the first size until it has lasted this many ms (default 20), so a "
        "first row is timed as warm as a row mid-sweep; 0 = -w launches only, as nccl-tests"))
    check: int = option(1, "-c", "--check", type=int, help="check iterations per size (default 1; 0 = none)")
    op: str = option("sum", "-o", "--op", help="reduction: " + ",".join(OPS) + ", or all (each in turn)")
    datatype: str = option("float", "-d", "--datatype",
                           help="type: " + ",".join(DTYPES) + ", or all (" + ",".join(ALL_TYPES) + ")")
    root: int | str = option(0, "-r", "--root", help=(
        "root rank of broadcast, reduce, gather and scatter (default 0), or all (every rank in turn)"))
    cudagraph: int = option(0, "-G", "--cudagraph", type=int,
                            help="capture -n iterations in a CUDA graph, replay N times")
    average: str = option("avg", "-a", "--average", help=(
        "time across ranks: 0 rank0, 1 avg, 2 min, 3 max (or those names; default 1)"))
    blocking: bool = option(False, "-z", "--blocking", type=int, nargs="?", const=1, help="wait after each operation")
    algo: list[str] = option(None, "--algo", factory=lambda: ["default"], help=(
        "NCCL algorithm(s), each its own communicator: " + ",".join(ALGOS)))
    proto: str | None = option(None, "--proto",
                               help="NCCL_PROTO for the bench communicators (e.g. Simple, LL128, LL)")
    split: str | None = option(None, "--split", nargs="+", metavar="EXPR", help=(
        "split the ranks into groups, each running the sweep at once: 'AND 0x1', 'MOD 2', 'DIV 4' (or &, %%, /, |), "
        "as nccl-tests' NCCL_TESTS_SPLIT; default: NCCL_TESTS_SPLIT_MASK or NCCL_TESTS_SPLIT from the environment"))
    # what is kept and shown of each point: nccl-tests' integer flags (0/1 unless said), the result file, the
    # algorithm's confirmation
    run_cycles: int = option(1, "-N", "--run_cycles", type=int, help=(
        "run the sweep N times on the same buffers, each cycle printed and kept (default 1)"))
    report_cputime: bool = option(False, "-C", "--report_cputime", type=int, help=(
        "1: the time column is the host (CPU) time per launch; JSON key cpu_time (default 0)"))
    local_register: int = option(0, "-R", "--local_register", type=int, help=(
        "register the buffers with NCCL: 0 no, 1 local (ncclCommRegister), 2 symmetric windows (NCCL >= 2.27); "
        "nccl backend only (default 0)"))
    cta_policy: int | None = option(None, "-x", "--cta_policy", type=int, help=(
        "NCCL's CTA policy for the communicators (ncclConfig_t.CTAPolicy): 0 default, 1 efficiency, 2 zero (NCCL "
        ">= 2.28); nccl backend only (default: not set, as nccl-tests)"))
    device_implementation: int = option(0, "-D", "--device_implementation", type=int, help=(
        "0, accepted for nccl-tests' command lines: bench measures NCCL's own collectives; nccl-tests' -D N > 0 "
        "runs kernels of its own on NCCL's device API, which bench does not"))
    device_cta_count: int = option(16, "-V", "--device_cta_count", type=int, help=(
        "1-128, accepted for nccl-tests' command lines: the CTAs of its -D kernels, which bench does not run "
        "(default 16)"))
    agg_iters: int = option(1, "-m", "--agg_iters", type=int, help=(
        "operations launched back to back per timed iteration (default 1); time is per operation"))
    per_iter_timing: int = option(0, "-I", "--per_iter_timing", type=int, help=(
        "1: time every iteration (CUDA events between iterations; on gloo the wall clock around each iteration, "
        "which is then waited for): adds min/max/p50/p95/p99/stdev/cv per size, every process's times in the JSON "
        "(nccl-tests' analyze_perf_json.py reads them) (default 0)"))
    per_iter_skip: int = option(0, "-K", "--per_iter_skip", type=int, help=(
        "with -I 1: leave the first K timed iterations out of the statistics (default 0)"))
    memory: int = option(0, "-M", "--memory", type=int, help=(
        "1: report memory usage per rank (GPU: device memory used and torch's peak; gloo: GPU memory is N/A, the "
        "host's peak RSS is given) (default 0)"))
    report_timestamps: int = option(0, "-S", "--report_timestamps", type=int, help=(
        "1: a timestamp per size (when it started), in the table and the JSON (default 0)"))
    unalign: int = option(0, "-u", "--unalign", type=int, help=(
        "move every send and receive buffer this many ELEMENTS off its allocation (default 0)"))
    parallel_init: int = option(0, "-p", "--parallel_init", type=int, help=(
        "0/1, accepted for nccl-tests' command lines and recorded: with one process per GPU every rank already "
        "inits its communicator in parallel (nccl-tests' -p threads the inits of -g GPUs in one process), so it "
        "changes nothing here"))
    min_bw: float | None = option(None, "--min_bw", type=float, help=(
        "exit 1 when the average busbw (the footer's) is below 0.9 x this many GB/s, and say OK or FAILED on the "
        "footer, as nccl-tests' NCCL_TESTS_MIN_BW (its default from there)"))
    nthreads: int = option(1, "-t", "--nthreads", type=int, help=(
        "1, accepted for nccl-tests' command lines (-t 1 -g 1 under MPI): each rank here is a process of its own "
        "with one GPU; for more ranks, --nranks"))
    ngpus: int = option(1, "-g", "--ngpus", type=int, help=(
        "1, accepted for nccl-tests' command lines: one GPU per rank; every GPU of the node is the default "
        "(--nranks N for N)"))
    stream_null: int = option(0, "-y", "--stream_null", type=int, help=(
        "0, accepted for nccl-tests' command lines: each rank launches on a non-blocking stream of its own, as "
        "nccl-tests does by default; its -y 1 (the legacy default stream) is not offered"))
    json: str | None = option(None, "-J", "--json", recorded=False,
                              help="result file (default results/runs/bench-<machine>-<time>.json)")
    no_algo_confirm: bool = option(False, "--no-algo-confirm", action="store_true", recorded=False, help=(
        "do not record which algorithm NCCL ran at each size (its profiler plugin, at the size's untimed launch)"))

    def __post_init__(self):
        self._normalise()
        self.collective = split_list(self.collective, collectives.NAMES, "collective", "all")
        algos = self.algo if isinstance(self.algo, list) else str(self.algo).split(",")
        self.algo = split_list([a.strip().lower() for a in algos], tuple(ALGOS), "algorithm (--algo)")
        if self.datatype not in DTYPES and self.datatype != "all":
            raise UsageError(f"-d/--datatype: unknown type '{self.datatype}' (choose from {', '.join(DTYPES)} or all)")
        if self.op not in OPS and self.op != "all":
            raise UsageError(f"-o/--op: unknown reduction '{self.op}' (choose from {', '.join(OPS)} or all)")
        if self.op == "avg" and self.datatype != "all" and self.torch_dtype_name not in FLOATING:
            raise UsageError(f"-o/--op avg needs a floating type; -d {self.datatype} is an integer type")
        self._check_nccl_tests_flags()
        if self.per_iter_skip and not self.per_iter_timing:
            raise UsageError("-K/--per_iter_skip needs -I/--per_iter_timing 1")
        if self.minbytes < 1:
            raise UsageError(f"-b/--minbytes {self.minbytes}: the smallest size is at least 1 byte")
        element = min(ELEMENT_BYTES[DTYPES[t]] for t in self.types())
        if self.maxbytes < element:
            raise UsageError(f"-e/--maxbytes {self.maxbytes}: no size up to it holds one {element}-byte element, so "
                             "nothing would be measured")
        if self.minbytes > self.maxbytes:
            raise UsageError(f"-b/--minbytes {self.minbytes} is larger than -e/--maxbytes {self.maxbytes}")
        if self.stepfactor is not None and self.stepbytes is not None:
            raise UsageError("give -f/--stepfactor or -i/--stepbytes, not both")
        if self.stepfactor is not None and not self.stepfactor > 1:
            raise UsageError(f"-f/--stepfactor must be > 1, got {self.stepfactor:g}")
        if self.stepbytes is not None and self.stepbytes < 1:
            raise UsageError(f"-i/--stepbytes must be >= 1, got {self.stepbytes}")
        if self.stepfactor is None and self.stepbytes is None:
            self.stepbytes = 1 << 20  # nccl-tests' default -i 1M
        if self.root != "all" and self.root < 0:
            raise UsageError(f"-r/--root must be >= 0, got {self.root}")
        if isinstance(self.split, list):  # `--split MOD 2` as `--split 'MOD 2'`: nccl-tests' expression has a space
            self.split = " ".join(self.split)
        if self.split is not None:
            parse_split(self.split)
        if self.cudagraph and self.job.backend != "nccl":
            raise UsageError(f"-G/--cudagraph needs --backend nccl (CUDA graphs of raw NCCL calls); "
                             f"got --backend {self.job.backend}")
        if self.local_register not in (0, 1, 2):
            raise UsageError(f"-R/--local_register must be 0, 1 or 2, got {self.local_register}")
        if self.cta_policy is not None and self.cta_policy not in (0, 1, 2):
            raise UsageError(f"-x/--cta_policy must be 0 (default), 1 (efficiency) or 2 (zero), got {self.cta_policy}")
        if self.cta_policy is not None and self.job.backend != "nccl":
            raise UsageError(f"-x/--cta_policy {self.cta_policy} needs --backend nccl (the policy is NCCL's "
                             f"communicator config); got --backend {self.job.backend}")
        if self.local_register and self.job.backend != "nccl":
            raise UsageError(f"-R/--local_register {self.local_register} needs --backend nccl "
                             f"(buffer registration is NCCL's); got --backend {self.job.backend}")
        if self.job.backend == "gloo" and self.maxbytes > fits.GLOO_MAX_BYTES:
            raise UsageError(f"-e/--maxbytes {self.maxbytes} is too large for the CPU (gloo) model; "
                             "keep it <= 256M")
        self.timing = TimingPlan(self.iters, self.warmup_iters, self.blocking, self.cudagraph, self.agg_iters,
                                 bool(self.per_iter_timing), self.warmup_ms)
        self.sweep_plan(self.job.timeout, *self.combos(collectives.get(self.collective[0]), 1)[0])  # -a -c -N -u -K
        if not self.pairs():
            raise UsageError(f"no collective in {','.join(self.collective)} runs with --algo {','.join(self.algo)} "
                             "(tree applies to all_reduce only)")

    def _check_nccl_tests_flags(self) -> None:
        """nccl-tests' 0/1 flags, its -t/-g (one GPU per process here), -y and NCCL_TESTS_MIN_BW."""
        for name, value in (("-I/--per_iter_timing", self.per_iter_timing), ("-M/--memory", self.memory),
                            ("-S/--report_timestamps", self.report_timestamps),
                            ("-p/--parallel_init", self.parallel_init)):
            if value not in (0, 1):
                raise UsageError(f"{name} must be 0 or 1, got {value}")
        for name, value, theirs in (("-t/--nthreads", self.nthreads, "threads in one process"),
                                    ("-g/--ngpus", self.ngpus, "GPUs in one thread")):
            if value != 1:
                raise UsageError(f"{name} {value}: here every GPU is a rank of its own process (nccl-tests' "
                                 f"{name[:2]} {value} runs {value} {theirs}): --nranks {value}, or no flag for every "
                                 "GPU of the node")
        if self.device_implementation != 0:
            raise UsageError(f"-D/--device_implementation {self.device_implementation}: nccl-tests' -D > 0 runs "
                             "kernels of its own on NCCL's device API, which bench does not; bench measures NCCL's "
                             "collectives (-D 0, nccl-tests' default)")
        if not 1 <= self.device_cta_count <= 128:
            raise UsageError(f"-V/--device_cta_count must be 1-128, got {self.device_cta_count}")
        if self.stream_null != 0:
            raise UsageError(f"-y/--stream_null {self.stream_null}: every launch here is on a non-blocking stream of "
                             "the rank's own (nccl-tests' -y 0, its default); the legacy default stream is not offered")
        if self.min_bw is not None and not 0 <= self.min_bw < float("inf"):
            raise UsageError(f"--min_bw (NCCL_TESTS_MIN_BW) must be a bandwidth in GB/s, 0 or more; got {self.min_bw}")

    def _normalise(self) -> None:
        """Values as the command line gives them (sizes with K/M/G, -a's digits, -r all, 0/1 flags) made the
        dataclass's own; values of the right type pass as they are."""
        for name in ("minbytes", "maxbytes", "stepbytes"):
            value = getattr(self, name)
            if isinstance(value, str):
                short = {"minbytes": "-b", "maxbytes": "-e", "stepbytes": "-i"}[name]
                setattr(self, name, parse_size(value, f"{short}/--{name}"))
        self.average = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}.get(str(self.average), self.average)
        if isinstance(self.root, str) and self.root != "all":
            try:
                self.root = int(self.root)
            except ValueError:
                raise UsageError(f"-r/--root: '{self.root}' is not a rank or all") from None
        if self.root != "all" and not isinstance(self.root, int):
            raise UsageError(f"-r/--root must be a rank or all, got {self.root!r}")
        self.blocking, self.report_cputime = bool(self.blocking), bool(self.report_cputime)

    @property
    def torch_free(self) -> bool:
        """Whether the ranks run without torch: the nccl backend on buffers, streams and events of the CUDA
        driver's own (nccl_bench.core.cudadriver). CUDA graphs (-G), registration (-R) and torch's memory
        figures (-M) keep torch's."""
        return self.job.backend == "nccl" and not (self.cudagraph or self.local_register or self.memory)

    @property
    def torch_dtype_name(self) -> str:
        return DTYPES[self.datatype]

    def types(self) -> list[str]:
        return list(ALL_TYPES) if self.datatype == "all" else [self.datatype]

    def combos(self, coll: collectives.Collective, nranks: int) -> list[tuple[str, str, int]]:
        """(type, op, root) to sweep for one collective: -o all only where it reduces, -r all only
        where it has a root; avg only on floating types."""
        ops = list(OPS) if self.op == "all" and coll.reduces else ["sum" if self.op == "all" else self.op]
        roots = list(range(nranks)) if self.root == "all" and coll.rooted else [0 if self.root == "all" else self.root]
        return [(t, op, r) for t in self.types() for op in ops for r in roots
                if not (op == "avg" and coll.reduces and DTYPES[t] not in FLOATING)]

    def sizes(self) -> list[int]:
        return size_steps(self.minbytes, self.maxbytes, self.stepfactor, self.stepbytes)

    def pairs(self) -> list[tuple[str, str]]:
        """(algo, collective) to run: an algorithm only where NCCL has it; point-to-point once."""
        out = []
        for i, algo in enumerate(self.algo):
            for name in self.collective:
                c = collectives.get(name)
                if algo == "default" or algo in c.algos or (not c.algos and i == 0):
                    out.append((algo, name))
        return out

    def skipped(self) -> list[tuple[str, str]]:
        run = set(self.pairs())
        return [(a, c) for a in self.algo for c in self.collective
                if (a, c) not in run and collectives.get(c).algos]

    def sweep_plan(self, timeout: float, dtype: str, op: str, root: int) -> SweepPlan:
        name = DTYPES[dtype]
        return SweepPlan(self.sizes(), name, TYPE_NAMES[name], op, root, self.timing, self.check,
                         self.average, timeout, self.run_cycles, report_cputime=self.report_cputime,
                         register=self.local_register, unalign=self.unalign, per_iter_skip=self.per_iter_skip,
                         timestamps=bool(self.report_timestamps))
