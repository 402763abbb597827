"""Does a lone transfer take longer when its receiver waited? (issue 70's open row). In the zoo's pp recording a
4 MiB send's receiver, posted hundreds of us before its sender, ended 12.7 us after the sender's kernel (32.5 us
from the sender's start), while a receiver posted late took 17.7 us and a replay of both at once 20 us. Two ranks,
one lone send/recv of 4 MiB bf16, the sender or the receiver held back by a GPU sleep, or neither, each profiled;
the kernels' spans from both ranks' traces (one node, one clock):

    torchrun --nproc-per-node 2 tests/gpu/p2p_arrival.py $OUT/p2p_arrival     # then a table, printed by rank 0

If a waiting receiver ends about 12 us after its sender and a together pair at about 20 us, the job's ready time is
real and a replay must keep the job's arrival order to meet it; if all three end about 20 us after the last start,
the recording's clocks or its kernels' attribution are to be looked at instead.
"""
from __future__ import annotations

import gzip
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

CASES = {"together": (0, 0), "receiver waits": (400_000, 0), "sender waits": (0, 400_000)}  # GPU sleep cycles
REPS = 12


def run(out: Path) -> None:
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    buf = torch.ones((4 << 20) // 2, dtype=torch.bfloat16, device="cuda")
    for case, (send_sleep, recv_sleep) in CASES.items():
        for _ in range(3):  # connections made, clocks up
            _transfer(rank, buf, 0, 0)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(REPS):
                _transfer(rank, buf, send_sleep, recv_sleep)
        prof.export_chrome_trace(str(out / f"{case.replace(' ', '_')}.rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


def _transfer(rank: int, buf, send_sleep: int, recv_sleep: int) -> None:
    dist.barrier()
    torch.cuda.synchronize()
    if rank == 0:
        if send_sleep:
            torch.cuda._sleep(send_sleep)
        dist.send(buf, 1)
    else:
        if recv_sleep:
            torch.cuda._sleep(recv_sleep)
        dist.recv(buf, 0)
    torch.cuda.synchronize()


def spans(path: Path) -> list[tuple[float, float]]:
    doc = json.loads(path.read_text())
    ks = [e for e in doc.get("traceEvents", []) if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()
          and "SendRecv" in e.get("name", "")]
    return [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in sorted(ks, key=lambda e: e["ts"])]


def table(out: Path) -> str:
    lines = [f"{'case':16s} {'sender us':>9s} {'receiver us':>11s} {'recv end - last start us':>25s} "
             f"{'recv end - send end us':>23s}"]
    for case in CASES:
        s, r = (spans(out / f"{case.replace(' ', '_')}.rank{k}.json") for k in (0, 1))
        n = min(len(s), len(r))
        med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
        lines.append(f"{case:16s} {med([b - a for a, b in s[:n]]):9.1f} {med([b - a for a, b in r[:n]]):11.1f} "
                     f"{med([r[i][1] - max(s[i][0], r[i][0]) for i in range(n)]):25.1f} "
                     f"{med([r[i][1] - s[i][1] for i in range(n)]):23.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/p2p_arrival")
    out.mkdir(parents=True, exist_ok=True)
    run(out)
    if int(os.environ["RANK"]) == 0:
        text = table(out)
        (out / "table.txt").write_text(text + "\n")
        for f in out.glob("*.json"):  # a few files back from the machine, not one per case and rank
            f.write_bytes(gzip.compress(f.read_bytes()))
            f.rename(f.with_suffix(".json.gz"))
        print(text)
