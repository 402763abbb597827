"""What NCCL calls things: nccl4py loaded (or bad input naming it), the names of NCCL's results, the
NCCL function behind each nccl4py binding the launch loops call, and NCCL's error name inside a
PyTorch exception."""
from __future__ import annotations

import re

from nccl_bench.core.errors import UsageError


def load():
    """nccl4py's core and raw bindings, or bad input naming the package to install."""
    try:
        import nccl.core as nc
        from nccl.bindings import nccl as nb
    except ImportError as e:
        raise UsageError(f"the nccl backend needs nccl4py (pip install 'nccl4py[cu13]'): {e}") from None
    return nc, nb


def lib_error_name(nb, status) -> str:
    """ncclResult_t -> its name as NCCL prints it (ncclUnhandledCudaError ...)."""
    try:
        return "nccl" + nb.Result(int(status)).name
    except Exception:  # a status this binding does not name: its number is said
        return f"ncclResult {status}"


def error_name(nb, exc) -> str:
    """The library's error name of an NCCLError (it carries the ncclResult_t as .status)."""
    status = getattr(exc, "status", None)
    if status is None:
        m = re.search(r"\((\d+)\)", str(exc))
        status = int(m.group(1)) if m else -1
    return lib_error_name(nb, status)


# nccl4py binding -> the NCCL function it calls (the compiled loop calls that function itself)
SYMBOLS = {"all_reduce": "ncclAllReduce", "all_gather": "ncclAllGather", "reduce_scatter": "ncclReduceScatter",
           "broadcast": "ncclBroadcast", "reduce": "ncclReduce", "allto_all": "ncclAlltoAll", "send": "ncclSend",
           "recv": "ncclRecv", "group_start": "ncclGroupStart", "group_end": "ncclGroupEnd",
           "gather": "ncclGather", "scatter": "ncclScatter"}  # these two: NCCL >= 2.28 (NATIVE_SINCE)
NATIVE_SINCE = 22800


def first_line(e: Exception) -> str:
    s = str(e).strip()
    return (s.splitlines()[0] if s else type(e).__name__)[:300]


def torch_error_name(e: Exception) -> str:
    """The NCCL error name PyTorch embeds in its message, else the exception type."""
    m = re.search(r"\b(nccl[A-Z][A-Za-z]+)\b", str(e))
    return m.group(1) if m else type(e).__name__
