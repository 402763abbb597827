"""The replay zoo: small real jobs of each parallelism a PyTorch user runs, each leaving what its users already
have: Flight Recorder dumps (pickle and JSON, on demand) and a profiler trace of its last step, on every rank.
Recorded once on 4 GPUs and committed as test data, so that CPU tests read what NCCL really writes.

    torchrun --standalone --nproc-per-node 4 tests/gpu/zoo.py KIND OUT [--backend gloo]

KIND (4 ranks):
  tp     tensor parallel over all ranks: small all_reduces (bf16, fp32, odd counts), all_gather and
         reduce_scatter along the sequence
  pp     two pipeline stages of two GPUs each: batch_isend_irecv of 4 MiB between them over 4 microbatches,
         with small all_reduces inside each stage
  moe    mixture of experts: all_to_all_single with uneven splits (and one with equal splits), in the world and
         in two expert groups
  mesh   a 2 x 2 DeviceMesh, new_group([0, 2, 3]), new_subgroups_by_enumeration and split_group (NCCL only):
         every call kind (all_reduce sum and max, all_gather, reduce_scatter, broadcast, reduce, gather, scatter,
         barrier, send and recv), fp32, bf16 and int64 at odd counts
  hang   the mesh's first calls, then rank 3 skips an all_reduce: torch's watchdog times out (10 s) and dumps
         (TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_FR_DUMP_TEMP_FILE=OUT/fr/dump_rank, set by the caller)
KIND (any number of ranks, as model code writes them):
  moe2d  top-2 MoE dispatch and combine: all_to_all_single of [tokens, hidden] bf16 rows ([2048, 2048], each token
         sent to 2 experts), uneven splits counted in rows
  ring   ring attention (context parallel): per step, n-1 batches of one isend to the next rank and one irecv from
         the previous (batch_isend_irecv, 2 MiB of K and V)
  ddp    DDP with a bf16 compression comm hook (default_hooks.bf16_compress_hook) over a 4-layer MLP
  zero   ZeRO-style: gradients reduce_scatter_tensor(op=AVG) in fp32, then parameters all_gather_into_tensor bf16
FSDP2 is tests/gpu/fsdp_job.py. Writes OUT/fr/dump_rank<R>.pkl and OUT/fr_json/dump_rank<R>.json (hang:
fr_before, fr_before_json, and the watchdog's OUT/fr/dump_rank<R>), OUT/kineto/trace_rank<R>.json,
OUT/calls_rank<R>.json (each call as the job made it: kind, elements, dtype, group name and ranks).
`--backend gloo` runs the same calls on CPUs (no split_group; dumps through _dump_fr_trace) to try the script.
"""
import argparse
import json
import os
import time
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "4000")
os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "4000")
os.environ.setdefault("TORCH_NCCL_ENABLE_TIMING", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

p = argparse.ArgumentParser()
FOUR = ("tp", "pp", "moe", "mesh", "hang")  # laid out for 4 ranks; the others for any number
p.add_argument("kind", choices=[*FOUR, "moe2d", "ring", "ddp", "zero"])
p.add_argument("out")
p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
p.add_argument("--steps", type=int, default=3, help="steps before the profiled ones")
p.add_argument("--profiled-steps", type=int, default=3,
               help="steps under the profiler, after one warm-up step it discards (torch's schedule): the first calls "
                    "after the profiler starts read 10-50 x their kernels, and a ready time needs more than one sample")
a = p.parse_args()
out = Path(a.out)
rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
gpu = a.backend == "nccl"
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if gpu else torch.device("cpu")
if gpu:
    torch.cuda.set_device(device)
timeout = timedelta(seconds=10 if a.kind == "hang" else 120)
dist.init_process_group(a.backend, timeout=timeout, **({"device_id": device} if gpu else {}))
assert n == 4 or a.kind not in FOUR, f"{a.kind} is laid out for 4 ranks"
f32, bf, i64 = torch.float32, torch.bfloat16, torch.int64
calls = []


def made(kind, elements, dtype, group=None, ranks=None):
    calls.append({"kind": kind, "elements": elements, "dtype": str(dtype).removeprefix("torch."),
                  "group": "default" if group is None else group.group_name, "ranks": ranks or list(range(n))})


def t(count, dtype=f32, value=1):
    return torch.full((count,), value, dtype=dtype, device=device)


def sync():
    if gpu:
        torch.cuda.synchronize()


# --- the jobs: each a step() made several times, the last one profiled ------------------------------------
def tp_step():
    seq, width = 96, 257  # odd counts: a sequence shard of 96 tokens, a hidden width of 257
    shard = t(seq * width, bf)
    whole = torch.empty(seq * width * n, dtype=bf, device=device)
    dist.all_gather_into_tensor(whole, shard)  # along the sequence
    made("all_gather", seq * width, bf)
    for count, dtype in ((width, bf), (8, f32), (1001, bf)):  # row-parallel outputs, a loss, a norm
        dist.all_reduce(t(count, dtype))
        made("all_reduce", count, dtype)
    back = torch.empty(seq * width, dtype=bf, device=device)
    dist.reduce_scatter_tensor(back, t(seq * width * n, bf))
    made("reduce_scatter", seq * width * n, bf)


STAGE = None


def pp_step():
    global STAGE
    if STAGE is None:
        STAGE = [dist.new_group([0, 1], group_desc="stage0"), dist.new_group([2, 3], group_desc="stage1")]
    stage, mine = rank // 2, STAGE[rank // 2]
    peer = rank + 2 if stage == 0 else rank - 2
    mb = (4 << 20) // 2  # 4 MiB of bf16 per microbatch
    for _ in range(4):
        if stage == 0:
            ops = [dist.P2POp(dist.isend, t(mb, bf), peer)]
        else:
            ops = [dist.P2POp(dist.irecv, torch.empty(mb, dtype=bf, device=device), peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        made("send" if stage == 0 else "recv", mb, bf, ranks=sorted([rank, peer]))
        dist.all_reduce(t(513, bf), group=mine)  # tensor parallel inside the stage
        made("all_reduce", 513, bf, mine, [2 * stage, 2 * stage + 1])
    ops = [dist.P2POp(dist.isend, t(1024, bf), peer), dist.P2POp(dist.irecv, torch.empty(1024, dtype=bf, device=device),
                                                                 peer)]
    for w in dist.batch_isend_irecv(ops):  # gradients back and activations forward in one group
        w.wait()
    made("sendrecv", 1024, bf, ranks=sorted([rank, peer]))


EXPERTS = None


def moe_step():
    global EXPERTS
    if EXPERTS is None:
        EXPERTS, _ = dist.new_subgroups_by_enumeration([[0, 1], [2, 3]])
    ins = [(rank + 1) * 64 + 8 * k for k in range(n)]  # tokens this rank sends to each, uneven
    outs = [(k + 1) * 64 + 8 * rank for k in range(n)]
    dist.all_to_all_single(torch.empty(sum(outs), dtype=bf, device=device), t(sum(ins), bf),
                           output_split_sizes=outs, input_split_sizes=ins)
    made("alltoallv", sum(ins), bf)
    dist.all_to_all_single(torch.empty(128 * n, device=device), t(128 * n))  # equal splits
    made("alltoall", 128 * n, f32)
    pair = [0, 1] if rank < 2 else [2, 3]
    me = pair.index(rank)
    tokens = lambda src, slot: 40 + 8 * src + slot  # noqa: E731  what global rank src sends to expert slot
    ins2 = [tokens(rank, j) for j in range(2)]
    outs2 = [tokens(src, me) for src in pair]
    dist.all_to_all_single(torch.empty(sum(outs2), dtype=bf, device=device), t(sum(ins2), bf),
                           output_split_sizes=outs2, input_split_sizes=ins2, group=EXPERTS)
    made("alltoallv", sum(ins2), bf, EXPERTS, pair)


GROUPS = None


def mesh_groups():
    global GROUPS
    if GROUPS is None:
        mesh = init_device_mesh("cuda" if gpu else "cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        trio = dist.new_group([0, 2, 3], group_desc="trio")
        pair, _ = dist.new_subgroups_by_enumeration([[0, 1], [2, 3]])
        split = dist.split_group(split_ranks=[[0, 1], [2, 3]], group_desc="split") if gpu else None
        GROUPS = {"dp": mesh.get_group("dp"), "tp": mesh.get_group("tp"), "trio": trio, "pair": pair, "split": split}
    return GROUPS


def mesh_step(skip_rank=None):
    g = mesh_groups()
    world = list(range(n))
    dist.all_reduce(t(1001, bf))
    made("all_reduce", 1001, bf)
    dist.all_reduce(t(77, i64), op=dist.ReduceOp.MAX)
    made("all_reduce", 77, i64)
    dist.all_gather_into_tensor(torch.empty(257 * n, device=device), t(257))
    made("all_gather", 257, f32)
    dist.reduce_scatter_tensor(torch.empty(33, device=device), t(33 * n))
    made("reduce_scatter", 33 * n, f32)
    dist.broadcast(t(333), src=2)
    made("broadcast", 333, f32)
    dist.reduce(t(99), dst=3)
    made("reduce", 99, f32)
    dist.gather(t(303), [torch.empty(303, device=device) for _ in world] if rank == 1 else None, dst=1)
    made("gather", 303, f32)
    dist.scatter(torch.empty(211, device=device), [t(211) for _ in world] if rank == 2 else None, src=2)
    made("scatter", 211, f32)
    if rank in (0, 2, 3):
        dist.all_reduce(t(55), group=g["trio"])
        made("all_reduce", 55, f32, g["trio"], [0, 2, 3])
    for name in ("pair", "dp", "tp", "split"):
        if g[name] is not None:
            dist.all_reduce(t(66 + len(name)), group=g[name])
            made("all_reduce", 66 + len(name), f32, g[name], dist.get_process_group_ranks(g[name]))
    if skip_rank is None or rank != skip_rank:
        dist.barrier()
        made("barrier", 1, f32)
    if rank in (0, 1):  # a plain send and recv between two ranks
        if rank == 0:
            dist.send(t(4099), dst=1)
        else:
            dist.recv(torch.empty(4099, device=device), src=0)
        made("send" if rank == 0 else "recv", 4099, f32, ranks=[0, 1])


def moe2d_step():
    """Top-2 routing of 1024 tokens of hidden size 2048: 2048 rows dispatched, unevenly, to the experts' ranks, then
    combined back (the reverse all_to_all, its splits swapped). Splits count rows, as model code passes them."""
    tokens, hidden = 1024, 2048
    rows = 2 * tokens // n  # each rank's even share of the dispatched rows
    def share(src, dst):  # noqa: E306  uneven, each row of the table summing to 2 x tokens
        return rows + (2 * ((src + dst) % n) - (n - 1)) * 8
    send = [share(rank, d) for d in range(n)]
    recv = [share(s_, rank) for s_ in range(n)]
    dispatched = torch.full((2 * tokens, hidden), 1, dtype=bf, device=device)
    routed = torch.empty((sum(recv), hidden), dtype=bf, device=device)
    dist.all_to_all_single(routed, dispatched, output_split_sizes=recv, input_split_sizes=send)
    made("alltoallv", 2 * tokens * hidden, bf)
    back = torch.empty((2 * tokens, hidden), dtype=bf, device=device)
    dist.all_to_all_single(back, routed, output_split_sizes=send, input_split_sizes=recv)
    made("alltoallv", sum(recv) * hidden, bf)


def ring_step():
    """Ring attention: K and V pass around the ring, one batch per hop (send to the next, receive from the
    previous), n - 1 hops a step."""
    kv = t(2 * 512 * 1024, bf)  # K and V of 512 tokens x 1024: 2 MiB
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    for _ in range(n - 1):
        buf = torch.empty_like(kv)
        ops = [dist.P2POp(dist.isend, kv, nxt), dist.P2POp(dist.irecv, buf, prv)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        made("ring_batch", kv.numel(), bf, ranks=sorted({prv, rank, nxt}))
        kv = buf


DDP = None


def ddp_step():
    """A DDP step with the bf16 compression hook: its buckets' all_reduces in bf16."""
    global DDP
    if DDP is None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).to(device)
        DDP = DistributedDataParallel(mlp, device_ids=[device.index] if gpu else None, bucket_cap_mb=4)
        DDP.register_comm_hook(state=None, hook=default_hooks.bf16_compress_hook)
    DDP(torch.ones(64, 1024, device=device)).sum().backward()
    made("ddp_step", sum(p.numel() for p in DDP.parameters()), bf)


def zero_step():
    """ZeRO: each rank's gradient shard averaged (reduce_scatter, AVG), then every rank's parameter shard
    gathered."""
    shard = 1 << 20
    grads = t(shard * n, f32)
    mine = torch.empty(shard, dtype=f32, device=device)
    dist.reduce_scatter_tensor(mine, grads, op=dist.ReduceOp.AVG)
    made("reduce_scatter", shard * n, f32)
    whole = torch.empty(shard * n, dtype=bf, device=device)
    dist.all_gather_into_tensor(whole, mine.to(bf))
    made("all_gather", shard, bf)


def dump(tag=""):
    """The rank's dump, pickle into OUT/fr<tag>/ and its JSON form into OUT/fr<tag>_json/ (one form a folder, as
    `replay` reads a folder: one dump per rank), each named as torch names them, ending in the rank."""
    c10d = torch._C._distributed_c10d
    for folder in (f"fr{tag}", f"fr{tag}_json"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    if gpu:
        (out / f"fr{tag}" / f"dump_rank{rank}.pkl").write_bytes(c10d._dump_nccl_trace())
        text = c10d._dump_nccl_trace_json()  # bytes on torch 2.11, str before
        data = text if isinstance(text, bytes) else text.encode()
        (out / f"fr{tag}_json" / f"dump_rank{rank}.json").write_bytes(data)
    else:
        (out / f"fr{tag}" / f"dump_rank{rank}.pkl").write_bytes(c10d._dump_fr_trace())


STEPS = {"tp": tp_step, "pp": pp_step, "moe": moe_step, "mesh": mesh_step, "moe2d": moe2d_step, "ring": ring_step,
         "ddp": ddp_step, "zero": zero_step}
if a.kind == "hang":
    mesh_step()
    sync()
    dump("_before")  # what the job had done when it was healthy
    mesh_step(skip_rank=3)  # rank 3 never enters the barrier: the others' watchdog times out and dumps
    sync()
    time.sleep(30)  # the watchdog ends the job first
else:
    for _ in range(a.steps):
        STEPS[a.kind]()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    # as torch's docs profile a job: a warm-up step traced and thrown away, then the active ones, written when done
    (out / "kineto").mkdir(parents=True, exist_ok=True)
    write = lambda prof: prof.export_chrome_trace(str(out / "kineto" / f"trace_rank{rank}.json"))  # noqa: E731
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=a.profiled_steps, repeat=1),
                 on_trace_ready=write) as prof:
        for _ in range(1 + a.profiled_steps):
            STEPS[a.kind]()
            sync()
            prof.step()
    time.sleep(2 if gpu else 0)  # torch's watchdog fills each entry's duration as it retires it
    dump()
(out / f"calls_rank{rank}.json").write_text(json.dumps(calls))
if rank == 0 and a.kind != "hang":  # what the files hold: every step in the dumps, the profiled ones in the traces
    (out / "steps.json").write_text(json.dumps({"steps": a.steps + 1 + a.profiled_steps, "profiled": a.profiled_steps}))
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: {a.kind} written under {out}", flush=True)
