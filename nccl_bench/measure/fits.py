"""Whether a sweep's buffers fit where its ranks run, decided before any rank starts: a GPU's memory, or on
the CPU model each rank's share of the host's (gloo keeps every buffer in host memory), and gloo's cap."""
from __future__ import annotations

import os

from nccl_bench.measure import collectives, datacheck
from nccl_bench.measure.vocabulary import DTYPES, ELEMENT_BYTES

GLOO_MAX_BYTES = 256 << 20  # the CPU model: larger sizes take minutes per point on gloo
# Needs up to this fit on any GPU NCCL runs on (CUDA 13's oldest architecture is Turing, whose smallest boards,
# T400 and MX450, have 2 GiB), so NVML is not asked: a first-row command pays nothing for the check.
FITS_ANY_GPU = 1 << 30


def need_bytes(names: list[str], max_bytes: int, types: list[str], nranks: int, unalign: int = 0,
               check_temporaries: bool = True) -> int:
    """One rank's buffers at the largest size: send and receive of the widest layout, plus the check's
    temporaries where torch's check runs (the check's CUDA kernels, measure.datakernels, keep none)."""
    elts = {ELEMENT_BYTES[DTYPES[t]] for t in types}
    need = max(2 * (max(lay.send, lay.recv) + unalign) * elt for elt in elts for lay in
               (collectives.get(c).layout(max_bytes, elt, nranks, 0) for c in names))
    return need + (4 * datacheck.CHUNK * 8 if check_temporaries else 0)  # the torch check's int64 temporaries


def why_not(backend: str, need: int, nranks: int) -> str | None:
    """Why `need` bytes per rank do not fit on this machine for `backend`, or None."""
    from nccl_bench.core import sysinfo
    if backend == "gloo":
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // max(nranks, 1)
        where = f"this machine's memory per rank ({have / 2**30:.1f} GiB)"
    elif need <= FITS_ANY_GPU:
        return None
    else:
        sizes = sysinfo.gpu_memory_bytes()
        if not sizes:
            return None
        have = min(sizes)
        where = f"GPU memory ({have / 2**30:.0f} GiB)"
    return f"buffers need {need / 2**30:.1f} GiB, more than {where}" if need > have else None


def require(option: str, backend: str, names: list[str], nbytes: int, nranks: int) -> None:
    """UsageError unless `nbytes` of float32 for `names` fit every rank here: gloo's cap, then memory (a size no rank
    can hold is said before any rank starts, not met by every call failing to allocate)."""
    from nccl_bench.core.errors import UsageError
    if backend == "gloo" and nbytes > GLOO_MAX_BYTES:
        raise UsageError(f"{option} {nbytes} is too large for the CPU (gloo) model; keep it <= {GLOO_MAX_BYTES >> 20}M")
    if (why := why_not(backend, need_bytes(names, nbytes, ["float"], max(nranks, 1)), max(nranks, 1))):
        raise UsageError(f"{option} {nbytes}: {why}")
