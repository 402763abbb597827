"""Per-GPU copy bandwidth: device to device (HBM, counting bytes read and written, as nvbandwidth and
the field's `device copy` figures do), host to device and device to host from pinned memory (PCIe).
One GPU's memory system and its slot, judged where no pair of GPUs exists to judge links with
(`nccl-bench copies`, nccl_bench.accept.copies, runs it on every local GPU).
"""
from __future__ import annotations

from nccl_bench.measure.timing import time_each


def measure(device: int, nbytes: int = 512 << 20, repeats: int = 5) -> dict:
    """{device_GBps, h2d_GBps, d2h_GBps} of one GPU: the best of `repeats` timed copies each."""
    import torch
    dev = torch.device("cuda", device)
    n = nbytes // 4
    a, b = torch.empty(n, dtype=torch.float32, device=dev), torch.empty(n, dtype=torch.float32, device=dev)
    host = torch.empty(n, dtype=torch.float32, pin_memory=True)

    def best(copy, bytes_moved: int) -> float:
        copy()  # untimed: the first copy pays for what is set up lazily
        torch.cuda.synchronize(dev)
        times = time_each([copy] * repeats, torch.cuda.current_stream(dev))
        return bytes_moved / min(times) / 1e9

    with torch.cuda.device(dev):
        out = {"device_GBps": best(lambda: b.copy_(a), 2 * nbytes),
               "h2d_GBps": best(lambda: a.copy_(host, non_blocking=True), nbytes),
               "d2h_GBps": best(lambda: host.copy_(a, non_blocking=True), nbytes)}
    return out
