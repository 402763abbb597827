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
CALLER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "TORCHELASTIC_", "NCCL_BENCH_", "NCCL_TESTS_")
# the suite's own knobs, a cache, and where nccl-tests' analyzer is
KEPT = ("NCCL_BENCH_KILLPOINTS", "NCCL_BENCH_KILLSEED", "NCCL_BENCH_CACHE", "NCCL_TESTS_ANALYZER")
for name in [k for k in os.environ if (k in CALLERS or k.startswith(CALLER_PREFIXES)) and k not in KEPT]:
    del os.environ[name]

# The longest tests, each in a lane of its own: xdist's worksteal hands each worker a contiguous share of the list
# (the first third to the first worker of three, and so on) and steals from the ends of queues, so tests listed
# together run one after another on one worker: the multinode and fleet tests did, and ended the suite alone.
# Each long test goes to the lane with the least expected time so far (longest first), the other tests fill the
# lanes to the sizes worksteal cuts, and every lane starts with its long tests. Wall seconds under CI's load, from
# --durations (2026-11-28; fleet run's and accept --locate's after accept --steps, 2026-11-29).
EXPECTED_S = {
    "test_fleet_run.py::test_ctrl_c_resume": 85, "test_multinode.py::test_accept_on_each_node": 51,
    "test_multinode.py::test_a_node_cut_off": 35, "test_locate.py::test_accept_locate_runs": 22,
    "test_multinode.py::test_locate_across_nodes": 29, "test_fleet_run.py::test_a_drained_node": 27,
    "test_locate.py::test_a_slow_sender": 25, "test_multinode.py::test_stress_across_nodes": 23,
    "test_history.py::test_a_real_chain": 20, "test_locate.py::test_a_corrupting_rank": 19,
    "test_asv.py::test_quick_pass_on_gloo": 18, "test_locate.py::test_a_pair_slow_only": 18,
    "test_dashboard.py::test_published_dashboard": 18, "test_crash.py::test_every_round_exactly_once": 16,
    "test_waits.py::test_a_peer_that_never_arrives": 14, "test_core_jobs.py::test_stock_reads_stale": 14,
    "test_samegroup.py::test_failing_init_keeps": 13, "test_locate.py::test_healthy_names_nobody": 13,
}


# A test that must not run beside another (helpers.apart holds them apart) goes last, where its lane is reached
# after the long tests that start the lanes: locate's CPU model judges a same-node pair against its class, and
# beside fleet run's 4-node cluster on a machine loaded far past its 2 cores, one same-node direction read
# 0.04-0.06 GB/s in all 30 of its samples (class 0.7) and was named a GPU, in 3 of 7 runs; without that cluster,
# 0 of 3 (2026-11-28). Last, it rarely waits for the lock.
LAST = ("test_multinode.py::test_locate_across_nodes",)


def item_name(item) -> str:
    """file::test, as EXPECTED_S and LAST name tests."""
    return f"{Path(str(item.fspath)).name}::{item.name}"


def goes_last(item) -> bool:
    return item_name(item).startswith(LAST)


def expected_s(item) -> float:
    return next((s for prefix, s in EXPECTED_S.items() if item_name(item).startswith(prefix)), 0.0)


def pytest_collection_modifyitems(config, items):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    last = [it for it in items if goes_last(it)]
    first = [it for it in items if not goes_last(it)]
    long = sorted((it for it in first if expected_s(it)), key=expected_s, reverse=True)
    if workers < 2:  # one process: longest first is all there is to do
        items[:] = long + [it for it in first if not expected_s(it)] + last
        return
    lanes, load = [[] for _ in range(workers)], [0.0] * workers
    for it in long:
        k = load.index(min(load))
        lanes[k].append(it)
        load[k] += expected_s(it)
    rest, left = [it for it in first if not expected_s(it)], len(items)
    for k in range(workers):  # the sizes worksteal cuts: what is left over the workers left, in turn
        size = left // (workers - k)
        take = max(size - len(lanes[k]), 0)
        lanes[k] += rest[:take]
        rest = rest[take:]
        left -= size
    lanes[-1] += rest + last
    items[:] = [it for lane in lanes for it in lane]
