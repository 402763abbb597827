import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The suite sets the environment it depends on: what a caller exported that changes who a process thinks it
# is (a launcher's variables), what the libraries log (c10d's level, NCCL's debug) or our own settings is
# dropped before any test, in this process and every one it starts.
CALLERS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
           "TORCH_CPP_LOG_LEVEL", "TORCH_DISTRIBUTED_DEBUG", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_HOSTID")
CALLER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "TORCHELASTIC_", "NCCL_BENCH_")
KEPT = ("NCCL_BENCH_KILLPOINTS", "NCCL_BENCH_KILLSEED", "NCCL_BENCH_CACHE")  # the suite's own knobs, a cache
for name in [k for k in os.environ if (k in CALLERS or k.startswith(CALLER_PREFIXES)) and k not in KEPT]:
    del os.environ[name]

# The longest tests start first: with two workers, one of them started last would run alone at the end
# (the suite's wall time is what CI's budget counts). Measured with --durations.
LONGEST_FIRST = ("test_fleet_run.py", "test_crash.py", "test_multinode.py", "test_asv.py", "test_locate.py",
                 "test_accept.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))
