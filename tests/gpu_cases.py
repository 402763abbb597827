"""GPU integration runs declared as data: name, GPUs needed, timeout, command, expectation.

tests/test_gpu.py runs each on a machine with enough GPUs and skips it with a reason
elsewhere. Commands are argv lists for `python`; `expect` names a check in test_gpu.py.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuCase:
    name: str
    gpus: int
    timeout: float
    argv: list = field(default_factory=list)
    expect: str = "exit0"
    exit_code: int = 0


CASES = [
    GpuCase("smoke-nccl-all-modes", 2, 120,
            ["-m", "nccl_bench", "smoke", "--backend", "nccl", "--ranks-per-root", "1"]),
    GpuCase("smoke-torch-all-modes", 2, 120,
            ["-m", "nccl_bench", "smoke", "--backend", "torch", "--ranks-per-root", "1"]),
    # stock with root 1 held back 3 s in round 1: stale ID, hang bounded by the 10 s deadline,
    # abort recovers and the next (scoped) init works
    GpuCase("nccl-stock-stale-then-recover", 2, 180,
            ["tests/jobs/churn.py", "{tmp}/nccl.jsonl", "--backend", "nccl", "--modes", "stock,stock,scoped",
             "--delay", "1:1:3", "--timeout", "10"], expect="stale-round-1-then-ok"),
    GpuCase("init-nccl-regular-scoped", 2, 180,
            ["-m", "nccl_bench", "init", "--backend", "nccl", "--rounds", "5", "--init", "regular,scoped",
             "--ranks-per-root", "1", "--timeout", "5", "--json", "{tmp}/init.json"]),
    GpuCase("torch-stock-stale-then-recover", 2, 200,
            ["tests/jobs/churn.py", "{tmp}/torch.jsonl", "--backend", "torch", "--modes", "stock,stock,scoped",
             "--delay", "1:1:3", "--timeout", "12"], expect="stale-round-1-then-ok"),
    # pytorch#178473's own scenario: one process group, round 1's communicator on the other GPU with
    # rank 1 3 s late: stock reads a stale ID (bounded hang, diagnosed); scoped (ranks per root = world) passes
    GpuCase("torch-same-group-stock-stale-scoped-ok", 2, 240,
            ["-m", "stress", "--backend", "torch", "--scenario", "same-group", "--init", "stock,scoped",
             "--ranks-per-root", "1", "--rounds", "2", "--skew-max", "0", "--timeout", "8",
             "--inject", "delay:1:1:3", "--journal", "{tmp}/sg.jsonl"], expect="same-group-stale", exit_code=1),
    # every collective (gather, scatter, alltoallv and hypercube too), Ring and Tree, each element
    # checked; the algorithm confirmed by NCCL
    GpuCase("bench-nccl-every-collective", 2, 240,
            ["-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all", "--algo", "ring,tree",
             "-b", "8", "-e", "4M", "-f", "8", "-n", "5", "-w", "2", "-c", "1", "--json", "{tmp}/bench.json"],
            expect="bench-exact"),
    # --split: one communicator per group (here 2 groups of 1 rank), all groups sweeping at once
    GpuCase("bench-nccl-split", 2, 180,
            ["-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all_reduce,gather,alltoallv,hypercube",
             "--split", "MOD 2", "-b", "8", "-e", "4M", "-f", "8", "-n", "5", "-w", "2", "-c", "1",
             "--no-algo-confirm", "--json", "{tmp}/bench.json"], expect="bench-exact"),
    GpuCase("bench-nccl-cuda-graph", 2, 120,
            ["-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all_reduce,all_gather", "-G", "3",
             "-b", "8", "-e", "1M", "-f", "32", "-n", "5", "-w", "2", "-c", "1", "--no-algo-confirm",
             "--json", "{tmp}/bench.json"], expect="bench-exact"),
    # -R: buffers registered locally (1) and as symmetric windows (2), every collective still exact
    *[GpuCase(f"bench-nccl-register-{r}", 2, 180,
              ["-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all", "-R", str(r),
               "-b", "8", "-e", "1M", "-f", "32", "-n", "5", "-w", "2", "-c", "1", "--no-algo-confirm",
               "--json", "{tmp}/bench.json"], expect="bench-exact") for r in (1, 2)],
    # a fault injected into rank 1's input in round 1: found, named silent corruption at the source
    GpuCase("stress-nccl-corrupt", 2, 120,
            ["-m", "stress", "--backend", "nccl", "--rounds", "3", "--timeout", "5", "--skew-max", "0",
             "--init", "scoped", "--inject", "corrupt@1:1", "--journal", "{tmp}/corrupt.jsonl"],
            expect="corrupt-round-1", exit_code=1),
    # destroys behind the rounds (issue 17): a hang's abort in the background, the rounds around it ok,
    # every round journaled once with its destroy time; and one rank alone
    GpuCase("stress-nccl-destroys-behind", 2, 150,
            ["-m", "stress", "--backend", "nccl", "--rounds", "30", "--skew-max", "0", "--init", "scoped",
             "--inject", "skip-collective@10:1", "--journal", "{tmp}/behind.jsonl"],
            expect="behind-hang-round-10", exit_code=1),
    GpuCase("stress-nccl-one-rank", 1, 90,
            ["-m", "stress", "--backend", "nccl", "--nranks", "1", "--rounds", "10", "--skew-max", "0",
             "--journal", "{tmp}/one.jsonl"]),
]
