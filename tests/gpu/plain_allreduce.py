"""A plain PyTorch all_reduce loop, as users time one (the reference for --backend torch):
one process per GPU under torchrun, init_process_group(nccl) with device_id, per size 5 warm-up
calls, then CUDA events around N dist.all_reduce calls: in place (dist.all_reduce(x)) and out of place
as a PyTorch user writes it (y.copy_(x); dist.all_reduce(y)). Prints 'SIZE IN_PLACE_US OUT_OF_PLACE_US'
per op on rank 0 and writes {"in_place": {size: us}, "out_of_place": {...}} as JSON to argv[1]."""
import json
import os
import sys

import torch
import torch.distributed as dist

out, lo, hi, factor, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
dev = torch.device("cuda", local)
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)


def per_op(step) -> float:
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


res, size = {"in_place": {}, "out_of_place": {}}, lo
while size <= hi:
    x = torch.ones(max(size // 4, 1), dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    res["in_place"][size] = per_op(lambda: dist.all_reduce(x))
    res["out_of_place"][size] = per_op(lambda: (y.copy_(x), dist.all_reduce(y)))
    size *= factor
if rank == 0:
    with open(out, "w") as f:
        json.dump(res, f)
    print("\n".join(f"{s} {t:.2f} {res['out_of_place'][s]:.2f}" for s, t in res["in_place"].items()))
dist.destroy_process_group()
