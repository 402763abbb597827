"""`replay` reads what real NCCL jobs write (issue 60): the zoo of tests/fixtures/zoo, recorded on 4 x H100 with
NCCL 2.28.9 and torch 2.11 (tensor and pipeline parallel, mixture of experts, a DeviceMesh with split groups,
FSDP2, a hung job). Each job's own record of its calls (calls_rank<R>.json) is the truth. Reading only: the
replay of the zoo on GPUs is tests/gpu/replay_zoo.py."""
from __future__ import annotations

import collections
import gzip
import json

import pytest

from helpers import REPO, run
from nccl_bench import records
from nccl_bench.replay import traces

ZOO = REPO / "tests" / "fixtures" / "zoo"
FORMS = ("fr", "fr_json", "kineto")
# what no record holds, and so the only calls a replay of the zoo leaves out (docs/replay.md)
DOCUMENTED = ("an all_to_all with uneven splits: the Flight Recorder records no split sizes",)


def zoo(kind: str, form: str):
    return traces.load([str(ZOO / kind / form)])


def steps(kind: str, form: str) -> int:
    """How many steps of the job a form holds: the dumps every one, the traces the profiled ones (zoo.py's
    steps.json)."""
    said = json.loads((ZOO / kind / "steps.json").read_text())
    return said["profiled"] if form == "kineto" else said["steps"]


def truth(kind: str, rank: int) -> collections.Counter:
    """The calls one step of the job made on `rank`, by kind (a barrier is NCCL's all_reduce; a send and a
    receive in one batch are one of each)."""
    calls = json.loads((ZOO / kind / f"calls_rank{rank}.json").read_text())
    every = steps(kind, "fr")
    out: collections.Counter = collections.Counter()
    for c in calls:
        kind_ = {"barrier": "all_reduce", "alltoallv": "alltoall"}.get(c["kind"], c["kind"])
        for k in (("send", "recv") if kind_ == "sendrecv" else (kind_,)):
            out[k] += 1
    return collections.Counter({k: n // every for k, n in out.items()})


CASES = [(k, f) for k in ("tp", "pp", "moe", "mesh", "fsdp2") for f in FORMS if (ZOO / k / f).is_dir()]


@pytest.mark.parametrize("kind,form", CASES, ids=[f"{k}-{f}" for k, f in CASES])
def test_every_call_of_the_zoo_is_read_but_what_no_record_holds(kind, form):
    wl = zoo(kind, form)
    assert not wl.stopped, wl.stopped  # healthy jobs: no false stop
    left = [s for s in wl.skipped if not any(d in s for d in DOCUMENTED)]
    assert not left, left[:3]
    if not (ZOO / kind / "calls_rank0.json").exists():
        return
    for r in range(4):
        got = collections.Counter(op.collective for op in wl.ranks[r])
        want = truth(kind, r)
        if kind == "moe" and form.startswith("fr"):  # only the even all_to_all: the uneven ones hold no splits
            want["alltoall"] = 1
        assert got == collections.Counter({k: n * steps(kind, form) for k, n in want.items()}), (r, got, want)


@pytest.mark.parametrize("form", FORMS)
def test_groups_are_told_apart_by_name_and_a_split_group_is_one(form):
    """The mesh job made 10 groups, three of them on ranks [0, 1] (a mesh dimension, an enumerated subgroup, a split
    group); torch names the split group differently on rank 0 and rank 1, and it is still one group."""
    wl = zoo("mesh", form)
    assert len(wl.groups) == 10, [g.label() for g in wl.groups.values()]
    on01 = sorted(g.desc for g in wl.groups.values() if g.ranks == (0, 1))
    assert on01 == ["mesh_tp", "split", "undefined"], on01
    assert any("split [0, 1]: one group its ranks named apart" in n for n in wl.notes), wl.notes
    split = next(k for k, g in wl.groups.items() if g.desc == "split" and g.ranks == (0, 1))
    assert all(any(op.group == split for op in wl.ranks[r]) for r in (0, 1))


@pytest.mark.parametrize("form", ("fr", "fr_json"))
def test_nccl_gather_and_scatter_are_rooted_where_their_lists_are(form):
    """NCCL records a non-root's empty side as [0] of UNKNOWN_SCALAR (no dtype), and a scatter's list as its output."""
    wl = zoo("mesh", form)
    for coll, root, chunk in (("gather", 1, 303), ("scatter", 2, 211)):
        for r in range(4):
            ops = [op for op in wl.ranks[r] if op.collective == coll]
            assert ops and all(op.root == root and min(op.in_count, op.out_count) == chunk
                               and max(op.in_count, op.out_count) == 4 * chunk for op in ops), (coll, r, ops[:1])


def test_a_trace_gives_roots_peers_and_uneven_splits():
    mesh = zoo("mesh", "kineto")
    rooted = ("broadcast", "reduce", "gather", "scatter")
    roots = {op.collective: op.root for op in mesh.ranks[0] if op.collective in rooted}
    assert roots == {"broadcast": 2, "reduce": 3, "gather": 1, "scatter": 2}
    profiled = steps("mesh", "kineto")
    p2p = [(op.collective, op.peer) for op in mesh.ranks[0] if op.collective in ("send", "recv")]
    assert p2p == [("send", 1)] * profiled
    moe = zoo("moe", "kineto")
    uneven = [op for op in moe.ranks[0] if op.splits is not None]
    assert len(uneven) == 2 * profiled and all(len(op.splits) == len(moe.groups[op.group].ranks) for op in uneven)


@pytest.mark.parametrize("form", FORMS)
def test_batch_isend_irecv_is_one_launch_with_each_transfer(form):
    """The pipeline job: a send or receive of 4 MiB alone per microbatch, then a send and a receive in one batch."""
    wl = zoo("pp", form)
    for r in range(4):
        ops = [op for op in wl.ranks[r] if op.collective in ("send", "recv")]
        pairs = {}
        for op in ops:
            if op.batch is not None:
                pairs.setdefault(op.batch, []).append(op)
        both = [b for b in pairs.values() if sorted(op.collective for op in b) == ["recv", "send"]]
        assert len(both) == steps("pp", form), (r, pairs)
        peer = r + 2 if r < 2 else r - 2
        assert {wl.groups[op.group].ranks[op.peer] for op in ops} == {peer}
    if form.startswith("fr"):  # the batch's time is NCCL's record that closes it
        assert all(op.duration_us is not None for r in range(4) for op in wl.ranks[r] if op.batch is not None)


@pytest.mark.parametrize("form", ("fr", "fr_json"))
def test_the_healthy_dumps_of_the_hung_job_say_no_stop(form):
    wl = zoo("hang", form.replace("fr", "fr_before"))
    assert not wl.stopped and not wl.skipped, (wl.stopped, wl.skipped[:3])


def test_the_watchdog_dumps_of_the_hung_job_name_the_rank_that_never_arrived():
    proc = run(["-m", "nccl_bench", "replay", "--list", str(ZOO / "hang" / "fr")], timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    stops = [line for line in proc.stdout.splitlines() if line.startswith("stopped:")]
    assert len(stops) == 2, stops
    assert "never entered it: rank 3 (last #17 nccl:scatter)" in stops[0] and "reached #18" in stops[0], stops


@pytest.mark.parametrize("kind", ["mesh", "ring", "pp"])
def test_the_zoo_replays_on_gloo_with_every_value_right(tmp_path, kind):
    """Reading is checked above; here the replay itself runs every kind the zoo holds (batches, uneven all_to_all,
    gather and scatter at their roots, the split group) on four gloo ranks, every value checked. Each call's
    line-up (the profiled passes' start in the job's order) runs before it in the checked pass, on every backend:
    the ring's held batches line up with both neighbours, pp's with their peer, mesh's calls over their groups; a
    line-up its peers did not mirror would stop the run at its deadline."""
    out = tmp_path / "r.json"
    proc = run(["-m", "nccl_bench", "replay", str(ZOO / kind / "kineto"), "--backend", "gloo", "-n", "1", "-w", "0",
                "--timeout", "60", "--json", str(out)], timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = records.load(str(out)).rows
    assert rows and all(r["nwrong"] == 0 for r in rows)
    assert {r["collective"] for r in rows} >= {"mesh": {"gather", "scatter", "broadcast", "reduce", "send/recv"},
                                               "ring": {"send/recv in a batch"},
                                               "pp": {"send/recv", "send/recv in a batch"}}[kind]


def test_groups_that_crossed_nodes_in_the_job_are_named_and_get_no_ratio(tmp_path):
    """Traces that list 2 GPUs a node for a 4-rank job came from 2 nodes: the world crossed a network in the job, and
    its rows get no ratio against the job's times; a dump cannot tell, and --ranks-per-node says it."""
    for src in sorted((ZOO / "tp" / "kineto").iterdir()):
        doc = json.loads(gzip.decompress(src.read_bytes()))
        doc["deviceProperties"] = doc["deviceProperties"][:2]
        (tmp_path / src.name.removesuffix(".gz")).write_text(json.dumps(doc))
    wl = traces.load([str(tmp_path)])
    assert [wl.groups[k].ranks for k in wl.crossed] == [(0, 1, 2, 3)], wl.crossed
    assert any("crossed a network in the job" in n for n in wl.notes), wl.notes
    out = tmp_path / "r.json"
    proc = run(["-m", "nccl_bench", "replay", str(tmp_path), "--backend", "gloo", "-n", "1", "-w", "0",
                "--json", str(out)], timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = records.load(str(out))
    assert doc.rows and all(r["crossed_network"] and r["ratio"] is None for r in doc.rows)
    assert doc.meta["sequence"]["ratio"] is None
    mesh = run(["-m", "nccl_bench", "replay", "--list", str(ZOO / "mesh" / "fr"), "--ranks-per-node", "2"], timeout=60)
    said = [line for line in mesh.stdout.splitlines() if "crossed a network" in line]
    assert mesh.returncode == 0 and len(said) == 1, mesh.stdout[-2000:]
    for crossed in ("default_pg [0, 1, 2, 3]", "trio [0, 2, 3]", "mesh_dp [0, 2]", "mesh_dp [1, 3]"):
        assert crossed in said[0], said
    assert "mesh_tp" not in said[0] and "split" not in said[0], said


def replayed_on_gpu(wl):
    """The rows and sequence of a replay whose ranks saw their kernels: 12 us per call by events, each launch's
    kernels starting 1 us apart across ranks (rank r at +r) and ending together at +9 us, 3 profiled passes; a
    batch's transfers share their launch's kernel. Spans as they reach rank 0 through the job store: lists."""
    from nccl_bench.replay import rows as replay_rows
    from nccl_bench.replay.worker import launches
    outs = []
    for r in range(4):
        n = len(wl.ranks[r])
        spans = [[100.0 * i + r, 100.0 * i + 9.0] for i, unit in enumerate(launches(wl.ranks[r])) for _ in unit]
        outs.append({"rank": r, "times": [[12e-6] * n] * 3, "wrong": [0] * n, "ran": [],
                     "kernels": [[span] * 3 for span in spans]})
    return replay_rows.fold(wl, outs, 0.10)


def test_a_row_is_judged_ready_against_ready_when_the_replay_saw_its_kernels():
    """The replay's own kernels (profiled passes on GPU), each call's end less the latest start over its ranks, are
    held against the job's ready time, measured the same way; the per-call time stays beside it."""
    wl = zoo("tp", "kineto")
    got, seq = replayed_on_gpu(wl)
    for row in got:
        assert row.time_us == pytest.approx(12.0) and row.ready_us == pytest.approx(6.0)  # 9 - 3 (rank 3 last in)
        assert row.ratio_of == "ready" and row.ratio == pytest.approx(6.0 / row.trace_ready_us)
    assert seq["ratio_of"] == "ready" and seq["here_ready_us"] == pytest.approx(6.0 * len(wl.ranks[0]))


def test_the_sequence_is_ready_over_ready_on_the_calls_that_have_both():
    """pp's transfers (single and in batches) have the job's ready time from the kernel NCCL launched for their group,
    a send's matched with its peer's receive: every call has both sides, and the sequence is summed over all of
    them, each at its row's median."""
    wl = zoo("pp", "kineto")
    got, seq = replayed_on_gpu(wl)
    assert all(row.trace_ready_us is not None for row in got), [(r.collective, r.group_ranks) for r in got]
    assert seq["ratio_of"] == "ready" and seq["calls_without_ready"] == 0
    assert seq["ratio"] == pytest.approx(seq["here_ready_us"] / seq["trace_us"])
    assert all(row.ready_us in (6.0, 7.0, 8.0, 9.0) for row in got)  # 9 less the last start of the call's ranks


def test_a_group_that_crosses_a_network_here_as_in_the_job_compares_again():
    """A replay that itself runs over nodes as the job did (torchrun across nodes): the groups crossing here too
    get their ratio back; a group that crossed in the job only keeps none."""
    wl = zoo("mesh", "fr")
    wl.place(2, "--ranks-per-node")
    crossed = {wl.groups[k].label() for k in wl.crossed}
    assert {"mesh_dp [0, 2]", "default_pg [0, 1, 2, 3]"} <= crossed
    assert wl.crossing_here(2).crossed == []  # the same placement here: every crossing compares
    one_a_node = wl.crossing_here(1)  # finer here: whatever crossed in the job crosses here too
    assert one_a_node.crossed == [] and "compared" in one_a_node.notes[-1]
    assert set(wl.crossing_here(4).crossed) == set(wl.crossed)  # one node here: nothing compares


def test_each_kernel_is_placed_in_the_range_its_launch_was_made_in():
    """The replay's profiled passes on the torch backend: ProcessGroupNCCL launches on its own stream, and the profiler
    draws none of the replay's ranges on the GPU; each kernel goes to the host range its launch call was made in. On a
    real job's trace, with torch's own ranges ("nccl:..."): every NCCL kernel, each in the range of its own call."""
    import gzip
    from nccl_bench.replay.passes import _launched_in
    path = ZOO / "tp" / "kineto" / "trace_rank0.pt.trace.json.gz"
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if isinstance(e, dict)]
    got = list(_launched_in(events, "nccl:"))
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")]
    assert len(got) == len(kernels) == 5 * steps("tp", "kineto")
    kind = {"nccl:all_reduce": "AllReduce", "nccl:_all_gather_base": "AllGather",
            "nccl:_reduce_scatter_base": "ReduceScatter"}
    assert all(e["name"].startswith(f"ncclDevKernel_{kind[name]}") for name, e in got), got


def test_a_dumps_sequence_says_what_each_side_holds_and_prints_no_ratio():
    """A dump's durations are whole (each call's wait for its late peers is in them): the sequence keeps the job's
    sum, says so, and takes no ratio of it (issue 70: `in the trace 2332922.34 us; 0.00 x`)."""
    from nccl_bench.replay import rows as replay_rows
    from nccl_bench.replay.command import lines
    wl = zoo("tp", "fr")
    outs = [{"rank": r, "times": [[12e-6] * len(wl.ranks[r])] * 3, "wrong": [0] * len(wl.ranks[r]), "ran": []}
            for r in range(4)]
    got, seq = replay_rows.fold(wl, outs, 0.10)
    assert seq["trace_of"] == "duration_us" and seq["trace_us"] and seq["ratio"] is None
    opts = type("Opts", (), {"slower_margin": 0.10, "max_slowdown": None})()
    said = [line for line in lines(got, seq, [], opts) if line.startswith("# sequence")][0]
    assert "of whole durations" in said and "no ratio" in said and " x" not in said.split("no ratio")[1], said


@pytest.mark.parametrize("here_us, margin, slower", [(105.0, 0.10, False), (120.0, 0.10, True), (105.0, 0.0, True),
                                                     (120.0, 0.25, False)])
def test_slower_means_beyond_both_spreads_and_the_margin(here_us, margin, slower):
    """Tight samples separate at any difference: 5 % beyond both spreads is not SLOWER at the 10 % margin, 20 % is;
    --slower-margin 0 is the spread alone."""
    from nccl_bench.replay.rows import ReplayRow
    row = ReplayRow("all_reduce", 1024, "float", 0, [0, 1], 1, here_us, here_us - 0.5, here_us + 0.5, None, None, 0,
                    100.0, 99.5, 100.5, 20)
    row.judge(margin)
    assert row.ratio == pytest.approx(here_us / 100.0) and row.slower is slower


# --- the shapes model code uses (issue 70), recorded on 4 x H200: tests/fixtures/zoo/{moe2d,ring,ddp,zero} --------
SHAPES = REPO / "tests" / "fixtures" / "zoo"


def shapes(kind: str, form: str):
    return traces.load([str(SHAPES / kind / form)])


@pytest.mark.parametrize("kind,form", [(k, f) for k in ("moe2d", "ring", "ddp", "zero") for f in FORMS])
def test_the_model_shapes_are_read_with_nothing_left_out(kind, form):
    wl = shapes(kind, form)
    assert not wl.stopped and not wl.skipped, (wl.stopped, wl.skipped[:3])
    said = json.loads((SHAPES / kind / "steps.json").read_text())
    steps_held = said["profiled"] if form == "kineto" else said["steps"]
    calls = json.loads((SHAPES / kind / "calls_rank0.json").read_text())
    per_step = len(calls) // said["steps"]
    if kind == "ring":  # each batch: a send and a receive
        assert len(wl.ranks[0]) == 2 * per_step * steps_held
    elif kind != "ddp":  # DDP's buckets are DDP's to choose (and its dumps hold the broadcasts of its start)
        assert len(wl.ranks[0]) == per_step * steps_held, [op.collective for op in wl.ranks[0]]


def test_moe_splits_count_rows_of_the_hidden_size():
    """[tokens, hidden] rows: each split is that many rows of 2048 elements, from what the trace records (its
    element count over the splits' sum)."""
    wl = shapes("moe2d", "kineto")
    for r, ops in wl.ranks.items():
        a2a = [op for op in ops if op.collective == "alltoall"]
        assert a2a and all(op.splits is not None for op in a2a)
        for op in a2a:
            sent = op.splits[op_rank(wl, op, r)]
            assert sum(sent) == 2048 * 2048 and all(v % 2048 == 0 for v in sent), sent


def op_rank(wl, op, r: int) -> int:
    return wl.groups[op.group].ranks.index(r)


def test_a_batchs_transfers_take_the_kernel_nccl_launched_for_the_group():
    """A batch_isend_irecv's kernel carries no call's record: the batch's send and receive take the next untagged
    NCCL kernel after their call, so every transfer has the job's time, and the same one."""
    wl = shapes("ring", "kineto")
    for r, ops in wl.ranks.items():
        assert ops and all(op.collective in ("send", "recv") and op.batch is not None for op in ops)
        assert {op.row_collective() for op in ops} == {"send/recv in a batch"}  # its row says so
        assert all(op.duration_us and op.ready_us for op in ops), [(op.duration_us, op.ready_us) for op in ops]
        for send, recv in zip(ops[::2], ops[1::2]):
            assert send.batch == recv.batch and send.duration_us == recv.duration_us
            assert send.overlap == 0.0  # its own kernel is not compute beside it


def test_a_ring_hops_ready_time_is_its_batchs_not_its_late_neighbours_wait():
    """A ring hop on 4 GPUs: each rank's one kernel sends to the next and receives from the previous. The ranks
    start it up to 200 us apart, and a send may end before its receiver starts (NCCL writes into the receiver's
    buffer). Counting only a transfer's two ends made a pair whose other neighbour started late read 134-220 us
    for a hop whose kernels move 2 MiB in about 20: now every transfer of the hop has the hop's time, each kernel
    from when it and its sender had started, the slowest."""
    wl = shapes("ring", "kineto")
    for hop in range(len(wl.ranks[0]) // 2):  # each hop: a send and a receive on every rank
        ready = {op.ready_us for ops in wl.ranks.values() for op in ops[2 * hop:2 * hop + 2]}
        shortest = min(ops[2 * hop].duration_us for ops in wl.ranks.values())
        assert len(ready) == 1, (hop, ready)  # the hop's, on every rank and both ways
        assert shortest <= ready.pop() <= 2 * shortest, hop


def test_a_lone_transfer_keeps_the_jobs_order_of_arrival():
    """A lone 4 MiB transfer took 26 us from its sender's start when the receiver waited and 12 us from a late
    receiver's start (4 x H200, tests/gpu/p2p_arrival.py): its time depends on which end came first, so the end
    that started later in the job holds back by the job's lead in the replay's profiled passes, the other by 0.
    The zoo's pp recording has both orders; a dump's transfers (no kernel starts) get no hold."""
    from nccl_bench.replay.readytimes import HOLD_FLOOR_US
    from nccl_bench.replay.workload import Workload
    wl = zoo("pp", "kineto")
    lone = {r: [op for op in ops if op.collective in ("send", "recv") and op.batch is None]
            for r, ops in wl.ranks.items()}
    held = collections.Counter()
    for r, ops in lone.items():
        assert ops and all(op.hold_us is not None for op in ops)
        for op in ops:
            assert 0 <= op.hold_us <= 2 * op.ready_us + HOLD_FLOOR_US
            held[op.collective] += op.hold_us > 0
    assert held["send"] > 0 and held["recv"] > 0  # receivers that waited, and some that came late
    for (r, a), (p, b) in [((0, lone[0]), (2, lone[2])), ((1, lone[1]), (3, lone[3]))]:
        for send, recv in zip(a, b):  # the k-th send of a pair and its receive: one of them holds, never both
            assert min(send.hold_us, recv.hold_us) == 0.0, (r, p)
    again = Workload.from_sequence_doc(wl.sequence_doc(0))  # what a rank of the replay reads
    assert [op.hold_us for op in again.ranks[0]] == [op.hold_us for op in wl.ranks[0]]
    assert all(op.hold_us is None for ops in zoo("pp", "fr_json").ranks.values() for op in ops)


@pytest.mark.parametrize("kind", ["tp", "mesh"])
def test_a_collectives_ranks_keep_the_jobs_order_of_arrival(kind):
    """Every call's ranks hold back in the job's order of arrival, the first by 0, each gap between arrivals capped
    (the order kept, a pass bounded)."""
    from nccl_bench.replay.readytimes import HOLD_FLOOR_US, HOLD_MAX_US
    wl = zoo(kind, "kineto")
    ops = [op for ops in wl.ranks.values() for op in ops if op.collective not in ("send", "recv")]
    assert ops and all(op.hold_us is not None for op in ops if op.ready_us is not None)
    n = len(wl.ranks)
    cap = [min(2 * op.ready_us + HOLD_FLOOR_US, HOLD_MAX_US) for op in ops if op.hold_us is not None]
    assert all(0 <= op.hold_us <= (n - 1) * c for op, c in zip([o for o in ops if o.hold_us is not None], cap))
    assert any(op.hold_us > 0 for op in ops)
    if kind == "tp":  # every call on the whole world, in one order on every rank: its first rank holds by 0
        calls = zip(*wl.ranks.values())
        assert all(min(op.hold_us for op in call) == 0.0 for call in calls if call[0].hold_us is not None)


def test_a_reduce_whose_root_came_last_is_replayed_with_its_root_last():
    """mesh's reduce to rank 3: in two of its three calls the job's root started 127-269 us after its peers, whose
    kernels had ended by then, and the call's ready time is the root's own kernel with its data in place (3.1-3.3
    us). Held by its lead from the first rank alone (capped), the root and two peers came out level; each gap
    capped keeps the root last."""
    wl = zoo("mesh", "kineto")
    reduces = {r: [op for op in ops if op.collective == "reduce"] for r, ops in wl.ranks.items()}
    assert all(len(ops) == 3 for ops in reduces.values())
    for j in (1, 2):  # in the first the root came second
        holds = {r: ops[j].hold_us for r, ops in reduces.items()}
        assert holds[3] > max(h for r, h in holds.items() if r != 3), (j, holds)


@pytest.mark.parametrize("kind", ["ring", "pp"])
def test_a_batch_is_held_as_one_with_the_batches_its_transfers_join(kind):
    """A ring hop (each rank sends to the next and receives from the previous in one batch) and pp's 1F1B batches:
    each rank's batch holds back as one launch by its lead in the job, every transfer of it by the same, the first
    rank by 0, each gap capped. The ring's rank 3 started every hop last in the job, and holds the longest."""
    from nccl_bench.replay.readytimes import HOLD_FLOOR_US
    from nccl_bench.replay.worker import launches
    wl = shapes(kind, "kineto")
    sets: dict = collections.defaultdict(dict)  # a batch's (ready, its j-th batch of that kind) -> rank -> hold
    for r, ops in wl.ranks.items():
        batches = [unit for unit in launches(ops) if unit[0].batch is not None]
        assert batches
        for j, unit in enumerate(batches):
            assert len({op.hold_us for op in unit}) == 1 and unit[0].hold_us is not None, unit
            sets[(unit[0].ready_us, j)][r] = unit[0].hold_us
    for (ready, _), holds in sets.items():
        assert min(holds.values()) == 0.0
        assert max(holds.values()) <= (len(holds) - 1) * (2 * ready + HOLD_FLOOR_US), holds
        if kind == "ring":
            assert len(holds) == 4 and max(holds, key=holds.get) == 3, holds


def test_a_ring_hops_rows_in_the_replay_read_the_hops_time_as_the_jobs_do():
    """The replay's kernels measured as the job's: each receiving kernel from when it and its sender had started,
    the hop's slowest. With launches starting at +r on rank r and ending at +9, rank 1 (whose sender, rank 0, came
    first) reads 9 - 1 = 8 and every row of the hop 8, where each pair's own ends read 6-9."""
    got, seq = replayed_on_gpu(shapes("ring", "kineto"))
    assert got and all(row.ready_us == pytest.approx(8.0) for row in got), [(r.group_ranks, r.ready_us) for r in got]
    assert seq["ratio_of"] == "ready" and seq["calls_without_ready"] == 0


def test_an_uneven_all_to_alls_share_in_the_replay_reads_the_whole_calls_time():
    """Each rank's share of an uneven all_to_all is a row of its own; its ready time is the whole call's over its
    group, on both sides (the job's and the replay's): 9 less rank 3's start, 6, on every share, where each rank's
    own kernel read 9 - r and waited for its late peers."""
    wl = zoo("moe", "kineto")
    got, _ = replayed_on_gpu(wl)
    uneven = [row for row in got if row.collective == "alltoall" and row.group_ranks == [0, 1, 2, 3]
              and row.trace_ready_us is not None and any(op.splits for op in wl.ranks[0])]
    shares = {(op.nbytes, op.dtype) for ops in wl.ranks.values() for op in ops if op.splits is not None}
    rows = [row for row in uneven if (row.bytes, row.dtype) in shares]
    assert rows and all(row.ready_us == pytest.approx(6.0) for row in rows), [(r.bytes, r.ready_us) for r in rows]


def test_an_uneven_all_to_all_is_not_held():
    """Its row on each rank is that rank's own share, timed by its own kernel alone: a peer's hold would be in it."""
    wl = zoo("moe", "kineto")
    uneven = [op for ops in wl.ranks.values() for op in ops if op.splits is not None]
    assert uneven and all(op.hold_us is None for op in uneven)


def test_traces_past_the_calls_a_replay_reads_together_are_one_line(monkeypatch):
    """As the dumps' entries: every trace's calls together are bounded (a step's traces, not a whole run's), said
    at the file that passes the bound, before the rest are read."""
    from nccl_bench.core.errors import UsageError
    from nccl_bench.replay import kineto
    calls = len(zoo("tp", "kineto").ranks[0])
    monkeypatch.setattr(kineto, "MAX_ENTRIES_ALL", calls + 1)  # more than one rank's trace, less than two
    with pytest.raises(UsageError, match=f"more than {calls + 1} calls together"):
        zoo("tp", "kineto")
