"""Test job: a small PyTorch job on gloo, as a user writes one, that leaves its Flight Recorder dumps.

Four ranks (env://, started by the test), the world group and two kinds of subgroups: pairs [0,1] [2,3]
(tensor parallel) and strided [0,2] [1,3] (data parallel). Two steps of all_reduce, all_gather,
broadcast, all_to_all, reduce and barrier, odd sizes, bf16 and fp32. Each rank writes
OUT/dump_rank<N>.pkl (torch's _dump_fr_trace()), OUT/json/dump_rank<N>.json (its JSON form) and
OUT/called_rank<N>.json: what it called, as [collective, input elements, output elements, dtype, group
ranks], the truth a replay is checked against.
usage: RANK=.. WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=.. python tests/jobs/frjob.py OUT
"""
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

out = Path(sys.argv[1])
dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
world = list(range(n))
pairs = [dist.new_group(r, group_desc=f"tp{i}") for i, r in enumerate(([0, 1], [2, 3]))]
strided = [dist.new_group(r, group_desc=f"dp{i}") for i, r in enumerate(([0, 2], [1, 3]))]
tp, tp_ranks = pairs[rank // 2], [rank // 2 * 2, rank // 2 * 2 + 1]
dp, dp_ranks = strided[rank % 2], [rank % 2, rank % 2 + 2]
called = []


def did(name, x_in, x_out, ranks):
    called.append([name, x_in.numel(), x_out.numel(), str(x_in.dtype).removeprefix("torch."), ranks])


bf, f32 = torch.bfloat16, torch.float32
for step in range(2):
    x = torch.ones(1001, dtype=bf)
    dist.all_reduce(x)
    did("all_reduce", x, x, world)
    a, b = torch.ones(257), torch.empty(257 * n)
    dist.all_gather_into_tensor(b, a)
    did("all_gather", a, b, world)
    x = torch.ones(333)
    dist.broadcast(x, src=0)
    did("broadcast", x, x, world)
    a, b = torch.ones(7 * n), torch.empty(7 * n)
    dist.all_to_all_single(b, a)
    did("alltoall", a, b, world)
    x = torch.ones(4097, dtype=bf)
    dist.all_reduce(x, group=tp)
    did("all_reduce", x, x, tp_ranks)
    a, b = torch.ones(65), torch.empty(130)
    dist.all_gather_into_tensor(b, a, group=tp)
    did("all_gather", a, b, tp_ranks)
    x = torch.ones(555, dtype=bf)
    dist.broadcast(x, src=dp_ranks[0], group=dp)
    did("broadcast", x, x, dp_ranks)
    x = torch.ones(12345)
    dist.all_reduce(x, group=dp)
    did("all_reduce", x, x, dp_ranks)
    x = torch.ones(99)
    dist.reduce(x, dst=0)
    did("reduce", x, x, world)
    dist.barrier()
    one = torch.ones(1)
    did("all_reduce", one, one, world)  # a barrier is replayed as NCCL's: a one-element all_reduce

c10d = torch._C._distributed_c10d
(out / "json").mkdir(parents=True, exist_ok=True)
# without stack traces (each record then has no "frames"): symbolising them took 7 s of each rank
(out / f"dump_rank{rank}.pkl").write_bytes(c10d._dump_fr_trace(includeStackTraces=False))
(out / "json" / f"dump_rank{rank}.json").write_bytes(c10d._dump_fr_trace_json())
(out / f"called_rank{rank}.json").write_text(json.dumps(called))
dist.destroy_process_group()
