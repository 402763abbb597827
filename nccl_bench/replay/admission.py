"""What a replay may start, decided before any process starts: no more ranks than the trace has calls for
and this node can run, and no more memory than the host (and each GPU) has free. A file from elsewhere
declares its sizes; here they are held against what is there, and a replay that would not fit is one line
(exit 2) that names the rank, the call and the size."""
from __future__ import annotations

import os

from nccl_bench.core.errors import UsageError
from nccl_bench.core.resources import RANK_BYTES, host_available
from nccl_bench.replay.workload import Workload

HOST_SHARE = 0.8  # of the host's available memory, at most, for the ranks started here
GPU_SHARE = 0.9  # of a GPU's free memory, at most, for one rank's buffers
MAX_LOCAL_RANKS = 256  # processes one replay starts on one node, at most
GLOO_MAX_BUFFER_BYTES = 256 << 20  # the CPU model's largest buffer (bench refuses -e above it on gloo too)


def host_bytes() -> int:
    """MemAvailable in bytes (the physical pages' count where that is not there)."""
    have = host_available()
    return have if have is not None else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gpu_free() -> list[int]:
    """Free bytes of each GPU this process can see (NVML), [] where none can be read."""
    from nccl_bench.core.sysinfo import visible_indices
    try:
        import pynvml as nv
        nv.nvmlInit()
    except Exception:  # no NVML: the ranks' own check against torch's free memory stands
        return []
    try:
        return [int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).free) for i in visible_indices(nv)]
    finally:
        nv.nvmlShutdown()


def check(wl: Workload, backend: str, nranks: int) -> None:
    """UsageError unless the `nranks` ranks of `wl` fit this node: in number and in memory."""
    if nranks > MAX_LOCAL_RANKS:
        raise UsageError(f"{wl.files[0]}: {nranks} ranks to start on this node, more than {MAX_LOCAL_RANKS}")
    need = {r: wl.buffer_bytes(r) for r in range(nranks)}
    rank = max(need, key=need.get, default=0)
    biggest = _largest_call(wl, rank)
    where = wl.file_of(rank)
    if backend == "gloo" and _largest_bytes(wl, rank) > GLOO_MAX_BUFFER_BYTES:
        raise UsageError(f"{where}: rank {rank}: {biggest}, more than the CPU (gloo) model runs "
                         f"({GLOO_MAX_BUFFER_BYTES >> 20} MiB a buffer, as bench's -e): replay it on GPUs")
    if backend == "gloo":
        total = sum(need.values()) + nranks * RANK_BYTES
        have = int(HOST_SHARE * host_bytes())
        if total > have:
            raise UsageError(f"{where}: the replay's {nranks} rank(s) need {_gib(total)} of host memory "
                             f"({_gib(need[rank])} of buffers on rank {rank}: {biggest}), more than the "
                             f"{_gib(have)} this host has available")
        return
    free = gpu_free()
    if free and need[rank] > GPU_SHARE * min(free):
        raise UsageError(f"{where}: rank {rank}'s buffers take {_gib(need[rank])} ({biggest}), more than its "
                         f"GPU's {_gib(min(free))} free")


def _largest_bytes(wl: Workload, rank: int) -> int:
    return max((max(o.in_count, o.out_count) * o.elt for o in wl.ranks.get(rank, [])), default=0)


def _largest_call(wl: Workload, rank: int) -> str:
    ops = wl.ranks.get(rank, [])
    if not ops:
        return "no call"
    op = max(ops, key=lambda o: max(o.in_count, o.out_count) * o.elt)
    n = max(op.in_count, op.out_count)
    return f"its largest call {op.name or op.collective} of {n} {op.dtype} ({_gib(n * op.elt)})"


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
