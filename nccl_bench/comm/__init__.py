"""comm: communicators and their lifetime. One small interface (base.py) with three backends
(nccl through nccl4py, torch's ProcessGroupNCCL, gloo), the unique-ID exchange per init mode
(bootstrap, scenario), the compiled launch loop, and the harness that owns a communicator's
lifetime (lifetime: destroy on success, abort on failure; reaper: teardown in the background).
May import core only.

Importing this package is cheap: option parsing asks it for the backends and the GPU count
before any job starts, so the interface (base.py, which needs torch) loads only when a
name from it is used.
"""
from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from nccl_bench.comm.plan import InitPlan, InitTimings
from nccl_bench.core.sysinfo import nvidia_driver
from nccl_bench.core.errors import UsageError

if TYPE_CHECKING:
    from nccl_bench.comm.base import Communicator

BACKENDS = ("nccl", "torch", "gloo")


def gpu_count() -> int:
    """The GPUs this process may use, never through torch: a command's driver process counts GPUs before it
    launches the ranks, and importing torch for that cost every command seconds. Without CUDA_VISIBLE_DEVICES,
    the GPUs' device nodes (/dev/nvidiaN: a container holds those of its own GPUs); else, or where there are
    none to count, the CUDA driver itself (cuDeviceGetCount honours the variable, as torch's count does), whose
    cuInit the ranks' start would wait for (docs/validation.md)."""
    if not nvidia_driver():
        return 0
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        nodes = _gpu_nodes()
        if nodes:
            return nodes
    from nccl_bench.core import cudadriver
    try:
        return cudadriver.visible_count()
    except cudadriver.CudaError:  # no CUDA bindings here (torch's backend needs none): the variable's own list
        return listed_count(os.environ["CUDA_VISIBLE_DEVICES"], _gpu_nodes())


def listed_count(visible: str, nodes: int) -> int:
    """The GPUs a CUDA_VISIBLE_DEVICES value names, read as CUDA reads it: entries up to the first that names
    no GPU (an index not below `nodes`, where that is known, a repeat, or an empty one); UUIDs count as named."""
    seen: list[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        index_ok = entry.isdigit() and (nodes == 0 or int(entry) < nodes)
        if not (index_ok or entry.startswith(("GPU-", "MIG-"))) or entry in seen:
            break
        seen.append(entry)
    return len(seen)


def _gpu_nodes() -> int:
    try:
        return sum(1 for name in os.listdir("/dev") if name.startswith("nvidia") and name[6:].isdigit())
    except OSError:
        return 0


def default_backend() -> str:
    return "nccl" if gpu_count() > 0 else "gloo"


def check_backend(name: str) -> str:
    """Reject unknown backends and GPU backends on a machine without GPUs (exit 2)."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")
    if name in ("nccl", "torch") and gpu_count() == 0:
        raise UsageError(f"--backend {name} needs a GPU and this machine has none (use --backend gloo)")
    if name == "nccl" and not _installed("nccl.core"):
        raise UsageError("--backend nccl needs nccl4py: pip install 'nccl4py[cu13]'")
    if name == "gloo":
        check_gloo_interfaces()
    return name


def _installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it: nccl4py's import (numpy and cuda-core with
    it) would cost the process that launches the ranks, which never uses it, part of every start."""
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent package is missing or broken
        return False


def gloo_interfaces() -> list[str]:
    """The interfaces GLOO_SOCKET_IFNAME names (comma-separated), in order; [] when unset."""
    return [n for n in os.environ.get("GLOO_SOCKET_IFNAME", "").split(",") if n]


def check_gloo_interfaces() -> None:
    """GLOO_SOCKET_IFNAME names interfaces exactly (gloo takes no prefix): each must be on this host,
    else every init would fail the same way."""
    have = {n for _, n in socket.if_nameindex()}
    missing = [n for n in gloo_interfaces() if n not in have]
    if missing:
        raise UsageError(f"GLOO_SOCKET_IFNAME: no interface {', '.join(missing)} on this host "
                         f"(it has {', '.join(sorted(have))})")


def new_communicator(name: str) -> Communicator:
    if name == "gloo":
        from nccl_bench.comm.gloo import GlooCommunicator
        return GlooCommunicator()
    if name == "nccl":
        from nccl_bench.comm.nccl import NcclCommunicator
        return NcclCommunicator()
    if name == "torch":
        from nccl_bench.comm.torch_pg import TorchCommunicator
        return TorchCommunicator()
    raise UsageError(f"unknown backend '{name}'")


def __getattr__(name: str):
    """`Communicator` loads base.py (and torch) on first use."""
    if name == "Communicator":
        from nccl_bench.comm.base import Communicator
        return Communicator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BACKENDS", "Communicator", "InitPlan", "InitTimings", "check_backend",
           "default_backend", "gloo_interfaces", "gpu_count", "new_communicator", "nvidia_driver"]
