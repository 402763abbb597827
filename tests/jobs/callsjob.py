"""Test job: every kind of call a PyTorch job makes, on gloo, leaving its Flight Recorder dumps.

Four ranks (env://, started by the test). Groups made three ways: new_group([0, 2, 3]),
new_subgroups_by_enumeration, and a 2 x 2 DeviceMesh. all_reduce sum and max, all_gather_into_tensor,
reduce_scatter_tensor, broadcast from rank 2, reduce to rank 3, all_to_all_single with equal and uneven
splits, gather to rank 1, scatter from rank 2, barrier, batch_isend_irecv; odd counts; fp32, bf16, int64.
Each rank writes OUT/dump_rank<N>.pkl and OUT/expect_rank<N>.json: each call as the replay should run it,
[collective, send elements, receive elements, dtype, group ranks], or ["named", words its reason holds].
usage: RANK=.. WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=.. python tests/jobs/callsjob.py OUT
"""
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402

out = Path(sys.argv[1])
dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
world = list(range(n))
trio = dist.new_group([0, 2, 3], group_desc="trio")
pair, _ = dist.new_subgroups_by_enumeration([[0, 1], [2, 3]])
tp = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")).get_group("tp")
pair_ranks = [0, 1] if rank < 2 else [2, 3]
expect = []
f32, bf, i64 = torch.float32, torch.bfloat16, torch.int64


def runs(name, send, recv, dtype, ranks):
    expect.append([name, send, recv, str(dtype).removeprefix("torch."), ranks])


x = torch.ones(1001, dtype=bf)
dist.all_reduce(x)
runs("all_reduce", 1001, 1001, bf, world)
x = torch.ones(77, dtype=i64)
dist.all_reduce(x, op=dist.ReduceOp.MAX)  # the Flight Recorder keeps no op: replayed as sum
runs("all_reduce", 77, 77, i64, world)
a, b = torch.ones(257), torch.empty(257 * n)
dist.all_gather_into_tensor(b, a)
runs("all_gather", 257, 257 * n, f32, world)
a, b = torch.ones(33 * n), torch.empty(33)
dist.reduce_scatter_tensor(b, a)  # gloo runs (and records) it as an all_reduce of the whole input
runs("all_reduce", 33 * n, 33 * n, f32, world)
x = torch.ones(333)
dist.broadcast(x, src=2)
runs("broadcast", 333, 333, f32, world)
x = torch.ones(99)
dist.reduce(x, dst=3)
runs("reduce", 99, 99, f32, world)
a, b = torch.ones(7 * n), torch.empty(7 * n)
dist.all_to_all_single(b, a)
runs("alltoall", 7 * n, 7 * n, f32, world)
ins = [r + 1 for r in range(n)]
a, b = torch.ones(sum(ins)), torch.empty(n * (rank + 1))
dist.all_to_all_single(b, a, output_split_sizes=[rank + 1] * n, input_split_sizes=ins)
expect.append(["named", "uneven splits"])
x = torch.ones(303)
dist.gather(x, [torch.empty(303) for _ in range(n)] if rank == 1 else None, dst=1)
runs("gather", 303, 303 * n, f32, world)
y = torch.empty(211)
dist.scatter(y, [torch.ones(211) for _ in range(n)] if rank == 2 else None, src=2)
runs("scatter", 211 * n, 211, f32, world)
if rank in (0, 2, 3):
    x = torch.ones(55)
    dist.all_reduce(x, group=trio)
    runs("all_reduce", 55, 55, f32, [0, 2, 3])
x = torch.ones(66)
dist.all_reduce(x, group=pair)
runs("all_reduce", 66, 66, f32, pair_ranks)
x = torch.ones(88)
dist.all_reduce(x, group=tp)
runs("all_reduce", 88, 88, f32, pair_ranks)
dist.barrier()
runs("all_reduce", 1, 1, f32, world)  # a barrier, as NCCL makes one
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(17), (rank + 1) % n),
                                dist.P2POp(dist.irecv, torch.empty(17), (rank - 1) % n)])
for w in works:
    w.wait()
expect.append(["named", "records no send or recv"])
# without stack traces (each record then has no "frames"): symbolising them took 7 s of each rank
(out / f"dump_rank{rank}.pkl").write_bytes(torch._C._distributed_c10d._dump_fr_trace(includeStackTraces=False))
(out / f"expect_rank{rank}.json").write_text(json.dumps(expect))
dist.destroy_process_group()
