"""Host cost per launch of all_reduce on a 1-rank NCCL communicator, five ways, one GPU (issue 16).

One rank means no peer to wait for, so the numbers isolate what each launch path costs the
host: the device time of a 1-rank all_reduce is small, and a path whose host time per launch
exceeds it shows that host time as its latency. Measured as nccl-tests measures -C 1: one sync
launch, then 20 launches on buffers moved by the size each iteration, host time around the 20
/ 20 (median of `reps` loops); the device column is CUDA events around the same 20, / 20.
  binding    nccl4py's raw binding (nb.all_reduce) called from a Python loop
  prepare    our launchers (prepare()) in a Python loop: the path before issue 16
  ctypes     ncclAllReduce's pointer called through ctypes with prebuilt arguments
  compiled   our compiled loop (nccl_bench.comm.launchloop): what bench now uses
  C          tests/gpu/launchcost.cu: the same loop in a C program (nccl-tests' cost)
usage: python tests/gpu/launchcost.py [C-binary-output-file]
"""
from __future__ import annotations

import ctypes
import os
import statistics
import sys
import threading
import time

import torch

from nccl_bench.comm.base import Communicator
from nccl_bench.comm.nccl import NcclCommunicator

SIZES, ITERS, STEPS = (8, 1024, 65536), 20, 20
REPS = int(os.environ.get("REPS", 300))
PATHS = os.environ.get("PATHS", "binding,prepare,ctypes,compiled").split(",")  # which of paths() to measure


def communicator() -> NcclCommunicator:
    c = NcclCommunicator()
    torch.cuda.set_device(0)
    c.device, c.rank, c.nranks, c.blocking = torch.device("cuda", 0), 0, 1, True
    nc = c.nc
    c.comm = nc.Communicator.init(1, 0, nc.get_unique_id(), nc.NCCLConfig(blocking=True))
    return c


def measure(run, stream) -> tuple[float, float, float]:
    """(host us, device us) per launch: medians over REPS loops of ITERS launches; and the first loop's
    host us per launch (a process's first loop: what bench's first row pays)."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    hosts, devs = [], []
    for _ in range(REPS):
        run(0, 1)
        stream.synchronize()
        e0.record(stream)
        t0 = time.perf_counter()
        run(0, ITERS)
        t1 = time.perf_counter()
        e1.record(stream)
        e1.synchronize()
        hosts.append((t1 - t0) / ITERS * 1e6)
        devs.append(e0.elapsed_time(e1) * 1e3 / ITERS)
    return statistics.median(hosts), statistics.median(devs), hosts[0]


def paths(c: NcclCommunicator, views, stream):
    nb = c.nb
    calls = [c._calls("all_reduce", s, r, c.comm._comm, op="sum", stream=stream)[0][1] for s, r in views]
    fn = nb.all_reduce

    def binding(first, n):
        for i in range(first, first + n):
            fn(*calls[i % STEPS])

    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                             ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    cfn = proto(c._fn_ptr("all_reduce"))
    ptr = int(c.comm.ptr)
    cargs = [(ctypes.c_void_p(a[0]), ctypes.c_void_p(a[1]), ctypes.c_size_t(a[2]), ctypes.c_int(a[3]),
              ctypes.c_int(a[4]), ctypes.c_void_p(ptr), ctypes.c_void_p(a[6])) for a in calls]

    def via_ctypes(first, n):
        for i in range(first, first + n):
            cfn(*cargs[i % STEPS])

    prepared = Communicator.launch_loop(c, "all_reduce", views, stream=stream, op="sum")  # the Python loop
    compiled = c.launch_loop("all_reduce", views, stream=stream, op="sum")
    assert compiled.kind == "compiled", c.launch_path()
    return {"binding": binding, "prepare": prepared.run, "ctypes": via_ctypes, "compiled": compiled.run}


def main() -> int:
    c = communicator()
    stream = torch.cuda.Stream(c.device)
    print(f"# python threads {threading.active_count()}, OS threads {len(os.listdir('/proc/self/task'))}, "
          f"launch path {c.launch_path()}, NCCL {c.nb.get_version()}, reps {REPS}")
    buf_s, buf_r = c.alloc(max(SIZES) * STEPS // 4, torch.float32), c.alloc(max(SIZES) * STEPS // 4, torch.float32)
    table = {}
    with torch.cuda.stream(stream):
        for size in SIZES:
            n = size // 4
            views = [(buf_s[k * n:(k + 1) * n], buf_r[k * n:(k + 1) * n]) for k in range(STEPS)]
            for name, run in paths(c, views, stream).items():
                if name not in PATHS:
                    continue
                run(0, 5)  # warm-up
                stream.synchronize()
                table[(name, size)] = measure(run, stream)
    ref = {}
    if len(sys.argv) > 1 and os.path.exists(sys.argv[1]):
        for line in open(sys.argv[1]):
            size, host, dev, *first = line.split()
            ref[int(size)] = (float(host), float(dev), float(first[0]) if first else float("nan"))
            table[("C", int(size))] = ref[int(size)]
    print(f"{'path':10} {'size':>6} {'host us/launch':>15} {'device us/op':>13} {'host / C':>9} {'first loop':>10}")
    for name in ("binding", "prepare", "ctypes", "compiled", "C"):
        for size in SIZES:
            if (name, size) in table:
                h, d, f = table[(name, size)]
                ratio = f"{h / ref[size][0]:.2f}" if size in ref else "-"
                print(f"{name:10} {size:>6} {h:>15.2f} {d:>13.2f} {ratio:>9} {f:>10.2f}")
    c.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
