"""The torch backend's launch path against a plain loop in one process, at one moment.

A plain loop and bench's loop run in separate processes differ by up to 2 x on a virtual machine at
launch-bound sizes (one process runs at 15 us per op, the next at 28): a per-process ratio then measures
the machine. Here both run in the same process, alternated per size, under torchrun (one process per
GPU), 5 warm-up calls then CUDA events around ITERS launches, as users time it, in place and out of place:
  plain      dist.all_reduce(x); out of place y.copy_(x); dist.all_reduce(y) (x, y their own tensors)
  ours       nccl_bench's TorchCommunicator launch loop (what bench times): views into larger buffers,
             on a side stream, the loop run as bench runs it
Per op, the GPU time (events) and the host's (the launches' wall clock): ours minus plain on the host is
what our loop does beyond the reference's calls.
Writes {size: {"plain": [us...], "ours": [...], "plain_oop": [...], "ours_oop": [...], "host_<same>": [...]}}
(one value per repetition) to argv[1]; prints medians.
usage: torchrun --standalone --nproc-per-node N tests/gpu/torchcost.py OUT.json [REPS]"""
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from nccl_bench.comm.torch_pg import TorchCommunicator  # noqa: E402

out, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
dev = torch.device("cuda", local)
torch.cuda.set_device(dev)
SIZES = [8, 128, 2048, 32768]
ITERS = 20


def timed(run, stream) -> tuple[float, float]:
    """(GPU us, host us) per op of run() (ITERS launches), after 5 warm-up launches, on `stream`."""
    with torch.cuda.stream(stream):
        for _ in range(5):
            run(1)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        t0 = time.perf_counter()
        run(ITERS)
        host = time.perf_counter() - t0
        end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / ITERS, host * 1e6 / ITERS


def plain_loop(x, y=None):
    if y is None:
        def run(n):
            for _ in range(n):
                dist.all_reduce(x)
    else:
        def run(n):
            for _ in range(n):
                y.copy_(x)
                dist.all_reduce(y)
    return run


dist.init_process_group("nccl", device_id=dev)
comm = TorchCommunicator()
comm.rank, comm.nranks, comm.device = rank, dist.get_world_size(), dev
side = torch.cuda.Stream(dev)
big = torch.ones(1 << 22, dtype=torch.float32, device=dev)
big2 = torch.ones(1 << 22, dtype=torch.float32, device=dev)
KEYS = ("plain", "ours", "plain_oop", "ours_oop")
table = {s: {k: [] for k in KEYS + tuple("host_" + k for k in KEYS)} for s in SIZES}
for rep in range(reps):
    for size in SIZES:
        x = torch.ones(max(size // 4, 1), dtype=torch.float32, device=dev)
        y = torch.empty_like(x)
        v, w = big[1024:1024 + x.numel()], big2[1024:1024 + x.numel()]
        inplace = comm.launch_loop("all_reduce", [(v, v)], stream=side, op="sum")
        oop = comm.launch_loop("all_reduce", [(v, w)], stream=side, op="sum")
        default = torch.cuda.default_stream(dev)
        order = [("plain", plain_loop(x), default), ("ours", lambda n: inplace.run(0, n), side),
                 ("plain_oop", plain_loop(x, y), default), ("ours_oop", lambda n: oop.run(0, n), side)]
        for name, run, stream in order if rep % 2 == 0 else order[::-1]:
            gpu, host = timed(run, stream)
            table[size][name].append(gpu)
            table[size]["host_" + name].append(host)
dist.destroy_process_group()
if rank == 0:
    with open(out, "w") as f:
        json.dump(table, f)
    med = statistics.median
    print("size    in place: plain ours ratio (host: plain ours)   out of place: plain ours ratio (host: plain ours)"
          f"   us per op, medians of {reps} alternated in one process")
    for s, d in table.items():
        cells = []
        for a, b in (("plain", "ours"), ("plain_oop", "ours_oop")):
            p, o = med(d[a]), med(d[b])
            cells.append(f"{p:7.2f} {o:7.2f} {o / p:5.2f} (host {med(d['host_' + a]):6.2f} {med(d['host_' + b]):6.2f})")
        print(f"{s:<8}" + "   ".join(cells))
