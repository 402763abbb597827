"""Communicator backends behind one interface (see base.py)."""
from __future__ import annotations

from nccl_bench.comm.base import Communicator, InitPlan, InitTimings
from nccl_bench.errors import UsageError

BACKENDS = ("nccl", "torch", "gloo")


def gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def default_backend() -> str:
    return "nccl" if gpu_count() > 0 else "gloo"


def check_backend(name: str) -> str:
    """Reject unknown backends and GPU backends on a machine without GPUs (exit 2)."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")
    if name in ("nccl", "torch") and gpu_count() == 0:
        raise UsageError(f"--backend {name} needs a GPU and this machine has none (use --backend gloo)")
    if name == "nccl":
        try:
            import nccl.core  # noqa: F401
        except ImportError:
            raise UsageError("--backend nccl needs nccl4py: pip install 'nccl4py[cu13]'") from None
    return name


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


__all__ = ["BACKENDS", "Communicator", "InitPlan", "InitTimings", "check_backend",
           "default_backend", "gpu_count", "new_communicator"]
