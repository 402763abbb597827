"""A small real training job for `replay` on GPUs: FSDP2 `fully_shard` on a few transformer
layers, bf16 parameters and fp32 gradient reduction, timing on (TORCH_NCCL_ENABLE_TIMING=1 set by the
caller). Three warm-up steps, then two steps under the profiler (after one it traces and discards). Writes, per rank:
  OUT/kineto/trace_rank<R>.json   the profiler (Kineto) trace of the two profiled steps
  OUT/fr/dump_rank<R>.pkl         the Flight Recorder dump, taken 3 s after the last synchronize (torch's
                                  watchdog fills each entry's duration as it retires it)
usage: torchrun --standalone --nproc-per-node N tests/gpu/fsdp_job.py OUT [--layers 4] [--width 2048]
"""
import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--layers", type=int, default=4)
p.add_argument("--width", type=int, default=2048)
p.add_argument("--steps", type=int, default=3)
a = p.parse_args()
out = Path(a.out)
rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local)
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)
torch.manual_seed(0)
model = nn.Sequential(*[nn.TransformerEncoderLayer(a.width, 16, 4 * a.width, batch_first=True)
                        for _ in range(a.layers)]).to(device)
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(8, 512, a.width, device=device)


def step():
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


for _ in range(a.steps):
    step()
torch.cuda.synchronize()
# a warm-up step traced and thrown away (torch's schedule), then the two active ones, written when done
(out / "kineto").mkdir(parents=True, exist_ok=True)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace(str(out / "kineto" / f"trace_rank{rank}.json"))) as prof:
    for _ in range(3):
        step()
        torch.cuda.synchronize()
        prof.step()
time.sleep(3)
c10d = torch._C._distributed_c10d
dump = c10d._dump_nccl_trace() if hasattr(c10d, "_dump_nccl_trace") else c10d._dump_fr_trace()
(out / "fr").mkdir(parents=True, exist_ok=True)
(out / "fr" / f"dump_rank{rank}.pkl").write_bytes(dump)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: {a.steps + 3} steps, dump and trace written", flush=True)
