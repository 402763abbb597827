"""The torch backend's launch path against a plain loop in one process, at one moment (issue 26).

A plain loop and bench's loop run in separate processes differ by up to 2 x on a virtual machine at
launch-bound sizes (one process runs at 15 us per op, the next at 28): a per-process ratio then measures
the machine. Here both run in the same process, alternated per size, under torchrun (one process per
GPU), all_reduce in place, 5 warm-up calls then CUDA events around ITERS launches, as users time it:
  plain   dist.all_reduce(x) on the default stream, x its own tensor
  ours    nccl_bench's TorchCommunicator launch loop (what bench times): a view into a larger buffer,
          on a side stream, the loop run as bench runs it
Writes {size: {"plain": [us...], "ours": [us...]}} (one value per repetition) to argv[1]; prints medians.
usage: torchrun --standalone --nproc-per-node N tests/gpu/torchcost.py OUT.json [REPS]"""
import json
import os
import statistics
import sys

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


def timed(run, stream) -> float:
    """us per op of run() (ITERS launches), after 5 warm-up launches, on `stream`."""
    with torch.cuda.stream(stream):
        for _ in range(5):
            run(1)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        run(ITERS)
        end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / ITERS


def plain_loop(x):
    def run(n):
        for _ in range(n):
            dist.all_reduce(x)
    return run


dist.init_process_group("nccl", device_id=dev)
comm = TorchCommunicator()
comm.rank, comm.nranks, comm.device = rank, dist.get_world_size(), dev
side = torch.cuda.Stream(dev)
big = torch.ones(1 << 22, dtype=torch.float32, device=dev)
table = {s: {"plain": [], "ours": []} for s in SIZES}
for rep in range(reps):
    for size in SIZES:
        x = torch.ones(max(size // 4, 1), dtype=torch.float32, device=dev)
        v = big[1024:1024 + x.numel()]
        loop = comm.launch_loop("all_reduce", [(v, v)], stream=side, op="sum")
        order = [("plain", plain_loop(x), torch.cuda.default_stream(dev)), ("ours", lambda n: loop.run(0, n), side)]
        for name, run, stream in order if rep % 2 == 0 else order[::-1]:
            table[size][name].append(timed(run, stream))
dist.destroy_process_group()
if rank == 0:
    with open(out, "w") as f:
        json.dump(table, f)
    print("size      plain    ours   ours/plain   (us per op, medians of %d alternated in one process)" % reps)
    for s, d in table.items():
        p, o = statistics.median(d["plain"]), statistics.median(d["ours"])
        print(f"{s:<8} {p:7.2f} {o:7.2f}   {o / p:6.2f}")
