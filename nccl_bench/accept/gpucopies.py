"""`copies`: each local GPU's copy bandwidth, one GPU after another: device to device (its HBM, counting the
bytes read and written, as nvbandwidth and the field's `device copy` figures do), host to device and device to
host from pinned memory (its PCIe slot). What accept judges where no pair of GPUs exists to judge links with,
and a quick look at one GPU's memory system and slot (nccl_bench.measure.copies measures).

    nccl-bench copies [--mib 512] [--json PATH]
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from nccl_bench.core import results
from nccl_bench.core.errors import UsageError, at_least
from nccl_bench.job.cli import Parser, prog

MAX_MIB = 16 << 10  # what one run holds, bounded: two device buffers and a pinned host buffer this large


def parser() -> Parser:
    p = Parser(prog=prog("copies"), description="each local GPU's copy bandwidth: device to device (HBM), host to "
               "device and device to host (PCIe), one GPU after another")
    p.add_argument("--mib", type=int, default=512, help="MiB per copy (default 512)")
    p.add_argument("--json", default=None, help="result file (default results/runs/copies-<machine>-<time>.json)")
    return p


@dataclass
class CopiesOptions:
    mib: int = 512
    json: str | None = None

    def __post_init__(self):
        at_least("--mib", self.mib, 1, most=MAX_MIB)
        results.check_writable(self.json, "--json", kind="copies")


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    o = CopiesOptions(a.mib, a.json)
    import torch
    if not torch.cuda.is_available():
        raise UsageError("copies: no GPU here (copies measure a GPU's memory and its slot)")
    from nccl_bench import records
    from nccl_bench.measure.copies import measure
    t0 = time.time()
    rows = [{"gpu": i, **measure(i, o.mib << 20)} for i in range(torch.cuda.device_count())]
    path = records.write("copies", rows, {"bytes": o.mib << 20, "seconds": time.time() - t0}, o.json)
    for r in rows:
        print(f"gpu {r['gpu']}: device copy {r['device_GBps']:.0f} GB/s, host to device {r['h2d_GBps']:.1f}, "
              f"device to host {r['d2h_GBps']:.1f}")
    print(f"# results: {path}")
    return 0
