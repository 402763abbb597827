"""A plain churn loop, stress's rate reference: per round one unique ID, a blocking
ncclCommInitRank, one all_reduce of 4 KiB, and the destroy handed to a thread, at most K of them in
flight (the oldest joined first), as `--destroys-in-flight K`. Nothing else: no store barriers, no
journal, no checks. One process per GPU under torchrun (the ID travels through a TCPStore), or alone
on one GPU. argv[4], comma-separated: "nonblocking": NCCL's nonblocking config (init, collective and
finalize polled until they settle, as our nccl backend does to bound them by a deadline); "setdevice":
each destroy thread sets its CUDA device through torch first (as our reaper does). The process's RSS is
sampled every 50 rounds after the first fifth: its slope per 1,000 rounds is printed and kept.
Prints 'plain: R rounds in S s = X rounds/s (K destroys in flight)' and writes JSON to argv[3], with the
median destroy (seconds, on its thread)."""
import json
import os
import sys
import threading
import time
from datetime import timedelta

import nccl.core as nc
import torch

from nccl_bench.core import resources
from nccl_bench.core.streaming import Trend

from nccl.bindings import nccl as nb

rounds, depth, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
flags = set(sys.argv[4].split(",")) if len(sys.argv) > 4 else set()
blocking, setdevice = "nonblocking" not in flags, "setdevice" in flags
destroys: list[float] = []


def settle(comm) -> None:
    while comm.get_async_error() == nb.Result.InProgress:
        time.sleep(0.0005)


def destroy(comm) -> None:
    t = time.perf_counter()
    if setdevice:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    if not blocking:
        comm.finalize()
        settle(comm)
    comm.destroy()
    destroys.append(time.perf_counter() - t)


rank, n = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
store = None
if n > 1:
    store = torch.distributed.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, n,
                                       rank == 0, timedelta(seconds=60))
x = torch.ones(1024, device="cuda")
behind: list[threading.Thread] = []
rss = Trend()
samples = []  # (round, rss bytes): a few hundred at most, to see the curve's shape beside its slope
t0 = time.perf_counter()
for i in range(rounds):
    if store is None:
        uid = nc.get_unique_id()
    elif rank == 0:
        uid = nc.get_unique_id()
        store.set(f"id/{i}", bytes(uid))
    else:
        uid = nc.UniqueId.from_bytes(store.get(f"id/{i}"))
    comm = nc.Communicator.init(n, rank, uid, nc.NCCLConfig(blocking=blocking))
    if not blocking:
        settle(comm)
    comm.allreduce(x, x, nc.SUM, stream=torch.cuda.current_stream().cuda_stream)
    if not blocking:
        settle(comm)
    torch.cuda.current_stream().synchronize()
    t = threading.Thread(target=destroy, args=(comm,), daemon=True)
    t.start()
    behind.append(t)
    while len(behind) > depth:
        behind.pop(0).join()
    if i % 50 == 49 and i >= rounds // 5:
        samples.append((i, resources.rss_bytes()))
        rss.add(*samples[-1])
for t in behind:
    t.join()
seconds = time.perf_counter() - t0
if rank == 0:
    med = sorted(destroys)[len(destroys) // 2]
    lo, hi = rss.interval() or (float("nan"), float("nan"))
    print(f"plain{'' if not flags else ' ' + ','.join(sorted(flags))}: {rounds} rounds in {seconds:.2f} s = "
          f"{rounds / seconds:.2f} rounds/s ({depth} destroys in flight, destroy median {med * 1e3:.0f} ms); "
          f"rss {(rss.slope() or 0) * 1e3 / 1024:.1f} KiB per 1,000 rounds ({lo * 1e3 / 1024:.1f} .. "
          f"{hi * 1e3 / 1024:.1f})", flush=True)
    with open(out, "w") as f:
        json.dump({"rounds": rounds, "depth": depth, "blocking": blocking, "seconds": seconds,
                   "rounds_per_s": rounds / seconds, "destroy_median_s": med, "flags": sorted(flags),
                   "rss_slope_per_1000": (rss.slope() or 0) * 1e3, "rss_interval_per_1000": [lo * 1e3, hi * 1e3],
                   "rss_samples": samples}, f)
