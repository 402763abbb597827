"""What this process holds right now: the resources a re-init can leak, read cheaply.

One sample is a flat dict of numbers, each a resource that repeated init/destroy is known to
leak (NVIDIA/nccl#604: GPU memory per init; #1753 and #1944: host memory per group call; PR
#2087: memory not freed on finalize):

- `rss_bytes`: resident host memory (/proc/self/statm).
- `fds`: open file descriptors (/proc/self/fd): sockets, CUDA IPC handles, shm files.
- `threads`: the process's threads (/proc/self/task): NCCL's proxy and progress threads.
- `gpu_bytes`: GPU memory this process holds, by NVML's per-process accounting on every GPU it
  uses, else CUDA's used = total - free on its device (counts other processes too); absent on CPU.
- `shm_bytes`, `shm_segments`: NCCL's /dev/shm segments this process has mapped (/proc/self/maps).
- `store_keys`: on the rank that hosts the job's TCPStore, the keys it holds.

A sample costs well under a millisecond without GPUs, a few with NVML, so a soak takes one
every 100 rounds by default.
"""
from __future__ import annotations

import os

from nccl_bench.core.streaming import Trend

RESOURCES = ("rss_bytes", "fds", "threads", "gpu_bytes", "shm_bytes", "shm_segments", "store_keys")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_nvml = None  # pynvml once initialised, False when it cannot be


def host_available() -> int | None:
    """This host's MemAvailable (/proc/meminfo) in bytes, or None where it is not there (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass  # not Linux: the caller says what it does without
    return None


RANK_BYTES = 400 << 20  # a rank's own footprint besides its buffers (Python, torch and its libraries, imported)
RANK_FILES = 8  # descriptors a rank costs its launcher and the job store (pipes, sockets)
RANK_THREADS = 16  # threads a rank runs (torch's pools, the store's client, watchdogs)


def local_ranks_limit(n: int) -> str | None:
    """Why `n` ranks cannot start on this node (memory, open files, processes), or None."""
    import resource
    have = host_available()
    if have is not None and n * RANK_BYTES > have:
        return (f"{n} ranks need about {n * RANK_BYTES / 2**30:.1f} GiB of host memory ({RANK_BYTES >> 20} MiB a "
                f"rank), and this machine has {have / 2**30:.1f} GiB available")
    files, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if files != resource.RLIM_INFINITY and n * RANK_FILES + 64 > files:
        return f"{n} ranks need about {n * RANK_FILES + 64} open files, and the limit is {files} (ulimit -n)"
    procs, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if procs != resource.RLIM_INFINITY and n * RANK_THREADS > procs:
        return f"{n} ranks run about {n * RANK_THREADS} threads, and the limit is {procs} (ulimit -u)"
    return None


def _count(path: str) -> int | None:
    try:
        return len(os.listdir(path))
    except OSError:
        return None


def rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def nccl_shm() -> tuple[int, int]:
    """(bytes, segments) of the /dev/shm/nccl-* files mapped into this process."""
    seen: dict[str, int] = {}
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "/dev/shm/nccl" not in line:
                    continue
                parts = line.split(maxsplit=5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                path = parts[5].strip() if len(parts) > 5 else ""
                seen[path] = seen.get(path, 0) + (hi - lo)
    except (OSError, ValueError):
        pass
    return sum(seen.values()), len(seen)


def _nvml_handle():
    global _nvml
    if _nvml is None:
        try:
            import pynvml
            pynvml.nvmlInit()
            _nvml = pynvml
        except Exception:  # no NVML: samples leave NVML's figures out
            _nvml = False
    return _nvml or None


def gpu_bytes(device: int | None) -> int | None:
    """GPU memory held by this process (NVML), or the device's used memory (CUDA); None on CPU."""
    if device is None:
        return None
    nv = _nvml_handle()
    if nv is not None:
        try:
            pid, total = os.getpid(), 0
            for i in range(nv.nvmlDeviceGetCount()):
                for p in nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(i)):
                    if p.pid == pid and p.usedGpuMemory is not None:
                        total += p.usedGpuMemory
            if total:
                return total
        except Exception:
            pass  # a VM or container without per-process accounting: CUDA's view below
    try:
        import torch
        free, total = torch.cuda.mem_get_info(device)
        return total - free
    except Exception:  # no CUDA context to ask: the sample leaves GPU memory out
        return None


def store_keys(store) -> int | None:
    try:
        return store.num_keys() if store is not None else None
    except Exception:  # the store is gone: its key count is not known
        return None


def sample(device: int | None = None, store=None) -> dict:
    """One reading of every resource (a value is None where this machine cannot tell); `store`: the
    TCPStore this process hosts, if any."""
    shm, segments = nccl_shm()
    return {"rss_bytes": rss_bytes(), "fds": _count("/proc/self/fd"), "threads": _count("/proc/self/task"),
            "gpu_bytes": gpu_bytes(device), "shm_bytes": shm, "shm_segments": segments,
            "store_keys": store_keys(store), "pid": os.getpid()}


def default_warmup(planned: int) -> int:
    """Inits whose samples are left out (allocators and first-init set-up grow, then level off): a
    fifth of the run, at most 1,000."""
    return min(1000, planned // 5)


class Trends:
    """Samples folded into one least-squares trend per (rank, resource) after a warm-up: O(ranks x
    resources) whatever the run's length. Its state travels as JSON (a rank's trends to rank 0).

    A process's memory starts afresh: samples from another process of the same rank (a run resumed
    from its journal, a restarted group; told by the sample's pid) start a new segment with its own
    warm-up, and the longest segment is the one judged. One line through two processes' samples
    would read their restart as a fall (or a rise) and hide or fake a leak."""

    def __init__(self, warmup: int):
        self.warmup = warmup
        self._best: dict[tuple[int, str], Trend] = {}  # the longest segment that has ended
        self._now: dict[tuple[int, str], tuple[object, float, Trend]] = {}  # (pid, first x, trend) going on
        self.segments: dict[tuple[int, str], int] = {}

    @property
    def trends(self) -> dict[tuple[int, str], Trend]:
        """Per (rank, resource), the segment judged: the one with the most samples."""
        out = dict(self._best)
        for key, (_, _, t) in self._now.items():
            if key not in out or t.n > out[key].n:
                out[key] = t
        return out

    def add(self, rank: int, x: int, sample: dict | None) -> None:
        """One rank's sample taken after init number `x` (the round's position in the run)."""
        if not sample:
            return
        pid = sample.get("pid")
        for res in RESOURCES:
            v = sample.get(res)
            if v is None:
                continue
            key = (rank, res)
            now = self._now.get(key)
            if now is None or now[0] != pid:  # the first sample, or another process: a new segment
                if now is not None and (key not in self._best or now[2].n > self._best[key].n):
                    self._best[key] = now[2]
                # a resumed process warms up again, from its own first sample
                now = (pid, 0.0 if now is None else float(x), Trend())
                self._now[key] = now
                self.segments[key] = self.segments.get(key, 0) + 1
            if x - now[1] >= self.warmup:
                now[2].add(x, v)

    def state(self) -> list:
        return [[rank, res, t.state()] for (rank, res), t in self.trends.items()]

    def merge(self, state: list) -> None:
        for rank, res, st in state:
            self._best[(rank, res)] = Trend.from_state(st)
