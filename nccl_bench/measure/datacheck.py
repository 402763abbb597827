"""Input data and exactly predictable results: what each rank sends, what every element of a
result must be, and the count of elements that are not."""
from __future__ import annotations

from typing import TYPE_CHECKING

from nccl_bench.measure.collectives import ALL, Segment

if TYPE_CHECKING:  # torch is imported where a tensor is made, not when the module loads
    import torch

# Small integers (1..23, or 1/2 for prod), so that sums over ranks, products, min and max
# are exact in every dtype, including int8 (up to 5 ranks without wrap) and bfloat16.
CHUNK = 1 << 26  # elements per step when filling and checking, to bound temporary memory


def pattern(rank: int, start: int, length: int, op: str, nranks: int, device) -> torch.Tensor:
    """Rank `rank`'s input elements [start, start+length) as int64."""
    import torch
    i = torch.arange(start, start + length, device=device, dtype=torch.int64)
    if op == "prod":  # one rank contributes 2 per element: the product is exactly 2
        return 1 + (i % nranks == rank).to(torch.int64)
    return (i * 31 + (i // 23) * 7 + rank * 13) % 23 + 1


def reduced(start: int, length: int, op: str, nranks: int, device) -> torch.Tensor:
    """The reduction over all ranks of input elements [start, start+length) (int64, float64 for avg)."""
    import torch
    acc = pattern(0, start, length, op, nranks, device)
    for r in range(1, nranks):
        x = pattern(r, start, length, op, nranks, device)
        if op in ("sum", "avg"):
            acc += x
        elif op == "prod":
            acc *= x
        elif op == "min":
            torch.minimum(acc, x, out=acc)
        else:
            torch.maximum(acc, x, out=acc)
    return acc.double() / nranks if op == "avg" else acc


def _kernels(t):
    """The CUDA kernels for an array of the driver's own (a rank without torch), else None: torch's ops."""
    from nccl_bench.core.devicearray import DeviceArray
    if isinstance(t, DeviceArray):
        from nccl_bench.measure import datakernels
        return datakernels.for_gpu(t.gpu)
    return None


def fill(t, rank: int, op: str, nranks: int) -> None:
    """Write rank `rank`'s input into tensor `t` (any dtype), chunk by chunk."""
    kernels = _kernels(t)
    if kernels is not None:
        return kernels.fill(t, rank, op, nranks)
    for a in range(0, t.numel(), CHUNK):
        b = min(a + CHUNK, t.numel())
        t[a:b].copy_(pattern(rank, a, b - a, op, nranks, t.device))


def expected(seg: Segment, a: int, b: int, op: str, nranks: int, device):
    """Expected values of output elements seg.out+a .. seg.out+b."""
    if seg.source == ALL:
        return reduced(seg.src + a, b - a, op, nranks, device)
    return pattern(seg.source, seg.src + a, b - a, op, nranks, device)


def count_wrong(recv, segments: list[Segment], op: str, nranks: int) -> int:
    """Elements of `recv` that differ from the expected values (a tolerance only for avg)."""
    kernels = _kernels(recv)
    if kernels is not None:
        return kernels.count_wrong(recv, segments, op, nranks, CHUNK)
    import torch
    wrong = 0
    for seg in segments:
        for a in range(0, seg.length, CHUNK):
            b = min(a + CHUNK, seg.length)
            got = recv[seg.out + a: seg.out + b]
            want = expected(seg, a, b, op, nranks, recv.device)
            if op == "avg" and got.is_floating_point():  # NCCL may pre-scale by 1/n: allow rounding
                tol = 4 * torch.finfo(got.dtype).eps * want.abs() + 1e-12
                wrong += int(((got.double() - want).abs() > tol).sum())
            else:
                wrong += int((got != want.to(got.dtype)).sum())
    return wrong
