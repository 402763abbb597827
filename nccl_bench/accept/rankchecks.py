"""Everything one rank checks for `doctor`: its GPU (gpu.py, NVML), its environment (host.py)
and, on local rank 0, its node (host.py, xid.py). Each check returns a Check (check.py)."""
from __future__ import annotations

from nccl_bench.accept.check import Check
from nccl_bench.accept.gpuchecks import gpu_checks
from nccl_bench.accept.hostchecks import check_env, check_torch_keys, host_checks
from nccl_bench.core.launch import node_name


def rank_checks(rank: int, local_rank: int, world_size: int, xid_window: float = 1.0) -> list[Check]:
    """Everything one rank checks: its GPU, its environment, and (local rank 0) its node."""
    checks = gpu_checks(local_rank, xid_window)
    checks += [check_env(), check_torch_keys(world_size)]
    if local_rank == 0:
        checks += host_checks()
    host = node_name()
    for c in checks:
        c.rank, c.host = rank, host
    return checks
