"""Per-GPU copy bandwidth: device to device (HBM, counting bytes read and written, as nvbandwidth and
the field's `device copy` figures do), host to device and device to host from pinned memory (PCIe).
One GPU's memory system and its slot, judged where no pair of GPUs exists to judge links with.

    python -m nccl_bench.measure.copies --json PATH [--mib 512]     # every local GPU, one after another
"""
from __future__ import annotations

import argparse
import sys
import time

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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m nccl_bench.measure.copies", description=__doc__.splitlines()[0],
                                allow_abbrev=False)
    p.add_argument("--json", required=True)
    p.add_argument("--mib", type=int, default=512)
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("error: no GPU: copies measure a GPU's memory and slot", file=sys.stderr)
        return 2
    t0 = time.time()
    rows = [{"gpu": i, **measure(i, a.mib << 20)} for i in range(torch.cuda.device_count())]
    from nccl_bench import records
    records.write("copies", rows, {"bytes": a.mib << 20, "seconds": time.time() - t0}, a.json)
    for r in rows:
        print(f"gpu {r['gpu']}: device copy {r['device_GBps']:.0f} GB/s, host to device {r['h2d_GBps']:.1f}, "
              f"device to host {r['d2h_GBps']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
