"""Pure parts of the bench: busbw factors, nccl-tests' count rounding, sizes, exact expected data."""
import pytest
import torch

from nccl_bench.measure import collectives as C
from nccl_bench.measure import datacheck as D
from nccl_bench.measure.vocabulary import parse_size
from nccl_bench.core.errors import UsageError
from nccl_bench.measure.sweep import aggregate
from nccl_bench.measure.sweepplan import size_steps

# (collective, nranks) -> busbw factor, from nccl-tests' src/*.cu
FACTORS = [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 2, 0.5), ("all_gather", 8, 0.875), ("reduce_scatter", 4, 0.75),
    ("alltoall", 8, 0.875), ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("sendrecv", 8, 1.0),
    ("gather", 4, 0.75), ("scatter", 8, 0.875), ("alltoallv", 2, 0.5), ("hypercube", 8, 1.0),
]


@pytest.mark.parametrize("name,n,factor", FACTORS)
def test_busbw_factor(name, n, factor):
    assert C.get(name).factor(n) == pytest.approx(factor)


# (collective, bytes, elt, nranks) -> (count, send, recv, size column)
LAYOUTS = [
    ("all_reduce", 8, 4, 2, (2, 2, 2, 8)),
    ("all_reduce", 1 << 20, 2, 8, (1 << 19, 1 << 19, 1 << 19, 1 << 20)),
    ("all_gather", 8, 4, 2, (0, 0, 0, 0)),  # nccl-tests prints size 0 for 8 B on 2 ranks
    ("all_gather", 32, 4, 2, (4, 4, 8, 32)),  # per-rank chunk rounded down to 16 bytes
    ("all_gather", 1000, 4, 3, (80, 80, 240, 960)),
    ("reduce_scatter", 1000, 4, 3, (80, 240, 80, 960)),
    ("alltoall", 1000, 1, 3, (320, 960, 960, 960)),
    ("broadcast", 1000, 8, 3, (125, 125, 125, 1000)),
    ("sendrecv", 12, 4, 2, (3, 3, 3, 12)),
    ("gather", 1000, 4, 3, (80, 80, 240, 960)),
    ("scatter", 1000, 4, 3, (80, 240, 80, 960)),
    ("hypercube", 1024, 4, 4, (64, 64, 256, 1024)),
    # alltoallv: count is per peer; what a rank sends is nccl-tests' distance-weighted total
    ("alltoallv", 1 << 20, 4, 4, (65536, 262140, 262140, 1048560)),
    ("alltoallv", 1 << 20, 4, 2, (131072, 262144, 262144, 1 << 20)),
]


@pytest.mark.parametrize("name,nbytes,elt,n,want", LAYOUTS)
def test_counts_follow_nccl_tests_rounding(name, nbytes, elt, n, want):
    lay = C.get(name).layout(nbytes, elt, n, 0)
    assert (lay.count, lay.send, lay.recv, lay.bytes) == want


def test_sizes_without_an_element_per_rank_make_no_row():
    assert C.get("all_gather").rowless([8, 16, 32, 64], 4, 2) == [8, 16]
    assert C.get("all_reduce").rowless([8, 16], 4, 2) == [] and C.get("all_reduce").rowless([2], 4, 2) == [2]


def test_in_place_offsets():
    assert C.get("all_gather").layout(1024, 4, 4, 3).send_inplace == 3 * 64
    assert C.get("reduce_scatter").layout(1024, 4, 4, 2).recv_inplace == 2 * 64


def test_registry_and_unknown():
    assert C.NAMES == ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv",
                       "gather", "scatter", "alltoallv", "hypercube")
    with pytest.raises(UsageError, match="unknown collective 'gatherv'"):
        C.get("gatherv")


def test_hypercube_algbw_counts_what_a_rank_receives():
    lay = C.get("hypercube").layout(1024, 4, 4, 0)
    assert lay.bytes == 1024 and lay.alg_bytes == 768  # nccl-tests: count * (n - 1) * size
    assert C.get("all_gather").layout(1024, 4, 4, 0).alg_bytes == 1024
    assert C.get("hypercube").unfit(6) and not C.get("hypercube").unfit(8) and not C.get("gather").unfit(3)


def test_alltoallv_pattern_is_nccl_tests_default():
    # spread 1.0: nothing to itself, traffic grows with the distance; 16-byte rounding per peer
    total = 6 * 1000
    assert [C.alltoallv_peer_bytes(0, j, 4, total) for j in range(4)] == [0, 992, 2000, 2992]
    assert [C.alltoallv_peer_bytes(j, 0, 4, total) for j in range(4)] == [0, 2992, 2000, 992]


def _run_rounds(name, n, nbytes, in_place, root=0, dtype=torch.float32):
    """Every rank's result of the record's point-to-point rounds, moved by hand as a library would;
    in place on the engine's views of one buffer."""
    from nccl_bench.comm.base import split_round
    from nccl_bench.measure.sweep import _views
    coll = C.get(name)
    elt = torch.empty((), dtype=dtype).element_size()
    lays = [coll.layout(nbytes, elt, n, r) for r in range(n)]
    span = max(max(lay.send, lay.recv) for lay in lays)
    bufs = [(torch.zeros(span, dtype=dtype), torch.zeros(span, dtype=dtype)) for _ in range(n)]
    views = [_views(*bufs[r], lays[r], in_place) for r in range(n)]
    for r, (send, recv) in enumerate(views):
        recv.zero_()
        D.fill(send, r, "sum", n)
    rounds = [coll.call_args("sum", root, r, n, lays[r])["rounds"] for r in range(n)]
    for k in range(len(rounds[0])):
        sent = {}
        for r, (send, recv) in enumerate(views):
            copies, remote = split_round(rounds[r][k], r, send, recv)
            for src, dst in copies:
                dst.copy_(src)
            for m in (m for m in remote if m.op == "send"):
                buf = send if m.buf == "send" else recv
                sent.setdefault((r, m.peer), []).append(buf[m.at:m.at + m.length].clone())
        for r, (send, recv) in enumerate(views):
            for m in (m for m in rounds[r][k] if m.op == "recv" and m.peer != r):
                recv[m.at:m.at + m.length] = sent[(m.peer, r)].pop(0)
        assert not any(sent.values()), "a send without its receive"
    return coll, lays, [v[1] for v in views]


P2P = [("gather", 1), ("gather", 3), ("scatter", 3), ("scatter", 4), ("alltoallv", 1), ("alltoallv", 3),
       ("alltoallv", 4), ("hypercube", 1), ("hypercube", 2), ("hypercube", 8)]


# in place alltoallv sends from the buffer it receives into: no defined result (nccl-tests skips it too)
@pytest.mark.parametrize("name,n,in_place", [(c, n, False) for c, n in P2P]
                         + [(c, n, True) for c, n in P2P if c != "alltoallv"])
def test_point_to_point_rounds_give_the_expected_result(name, n, in_place):
    root = n - 1
    coll, lays, outs = _run_rounds(name, n, 4000, in_place, root)
    for r in range(n):
        segs = coll.segments(lays[r], r, n, root)
        assert D.count_wrong(outs[r], segs, "sum", n) == 0, r
        if segs:
            outs[r][segs[-1].out + segs[-1].length - 1] += 1
            assert D.count_wrong(outs[r], segs, "sum", n) == 1


def test_sendrecv_ring_peers_and_roots():
    assert C.get("sendrecv").call_args("sum", 0, 0, 3) == {"to": 1, "frm": 2}
    assert C.get("reduce").call_args("max", 1, 0, 3) == {"op": "max", "root": 1}
    assert C.get("all_gather").call_args("sum", 0, 0, 3) == {}


def _simulate(name, n, nbytes, op="sum", dtype=torch.float32, root=0):
    """Each rank's output computed by hand from the inputs, as a perfect library would."""
    coll = C.get(name)
    elt = torch.empty((), dtype=dtype).element_size()
    lays = [coll.layout(nbytes, elt, n, r) for r in range(n)]
    ins = []
    for r in range(n):
        t = torch.empty(lays[r].send, dtype=dtype)
        D.fill(t, r, op, n)
        ins.append(t.double())
    outs = []
    for r, lay in enumerate(lays):
        out = torch.zeros(lay.recv, dtype=torch.float64)
        c = lay.count
        if name == "all_reduce":
            out = sum(ins)
        elif name == "all_gather":
            out = torch.cat(ins)
        elif name == "reduce_scatter":
            out = sum(ins)[r * c:(r + 1) * c]
        elif name == "alltoall":
            out = torch.cat([ins[j][r * c:(r + 1) * c] for j in range(n)])
        elif name == "sendrecv":
            out = ins[(r - 1) % n]
        elif name == "broadcast":
            out = ins[root]
        outs.append(out.to(dtype))
    return coll, lays, outs


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast"])
def test_expected_matches_a_correct_result_and_catches_a_wrong_one(name):
    n = 3
    coll, lays, outs = _simulate(name, n, 3000)
    for r in range(n):
        segs = coll.segments(lays[r], r, n, 0)
        assert D.count_wrong(outs[r], segs, "sum", n) == 0
        bad = outs[r].clone()
        bad[5] += 1
        bad[-1] = 0
        assert D.count_wrong(bad, segs, "sum", n) == 2


def test_exact_in_small_types_and_every_op():
    n = 4
    for dtype in (torch.bfloat16, torch.float16, torch.int8, torch.uint8):
        for op, fn in (("sum", sum), ("max", lambda xs: torch.stack(xs).max(0).values),
                       ("min", lambda xs: torch.stack(xs).min(0).values),
                       ("prod", lambda xs: torch.stack(xs).prod(0))):
            ins = [D.pattern(r, 0, 5000, op, n, "cpu") for r in range(n)]
            out = fn(ins).to(dtype)
            seg = [C.Segment(0, 5000, C.ALL)]
            assert D.count_wrong(out, seg, op, n) == 0, (dtype, op)
    # prod: every element's product is exactly 2 (small enough for int8)
    assert set(D.reduced(0, 100, "prod", 5, "cpu").tolist()) == {2}


def test_avg_tolerates_rounding_only():
    n = 3
    seg = [C.Segment(0, 1000, C.ALL)]
    exact = D.reduced(0, 1000, "avg", n, "cpu")
    got = (sum(D.pattern(r, 0, 1000, "avg", n, "cpu").half() * (1 / n) for r in range(n))).half()
    assert D.count_wrong(got, seg, "avg", n) == 0
    got[7] += 1
    assert D.count_wrong(got, seg, "avg", n) == 1
    assert exact.dtype == torch.float64


def test_size_steps_and_parse():
    assert size_steps(8, 64, 2, None) == [8, 16, 32, 64]
    assert size_steps(8, 100, 2, None) == [8, 16, 32, 64]
    assert size_steps(1, 3, None, 1) == [1, 2, 3]
    assert parse_size("8G", "-e") == 8 << 30 and parse_size("64k", "-b") == 65536 and parse_size("8", "-b") == 8
    with pytest.raises(UsageError, match="-e"):
        parse_size("8X", "-e")
    # nccl-tests' sizes may have a fraction (atof); a byte is not split
    assert parse_size("1.5M", "-e") == 3 << 19 and parse_size(".5K", "-b") == 512
    with pytest.raises(UsageError, match="not a whole number of bytes"):
        parse_size("1.5", "-b")
    with pytest.raises(UsageError, match=r"\(5000 characters\)' is not a size"):  # was int()'s ValueError, exit 1
        parse_size("9" * 5000, "-b")


def test_aggregate():
    assert aggregate([1.0, 3.0], "avg") == 2.0
    assert aggregate([2.0, 1.0], "rank0") == 2.0
    assert aggregate([2.0, 1.0], "min") == 1.0 and aggregate([2.0, 1.0], "max") == 2.0


def test_nccl_calls_of_point_to_point_rounds():
    """What the nccl backend (and its compiled loop) calls: a group per round; a copy to itself is a
    copy-engine copy (as nccl-tests' cudaMemcpyAsync), left out in place; element offsets become byte
    addresses."""
    from types import SimpleNamespace
    from nccl_bench.comm.nccl import NcclCommunicator
    from nccl_bench.measure.sweep import _views
    coll, n, r = C.get("hypercube"), 4, 1
    lay = coll.layout(1024, 4, n, r)  # 64 floats per rank
    buf_s, buf_r = torch.zeros(256), torch.zeros(256)
    for in_place in (False, True):
        send, recv = _views(buf_s, buf_r, lay, in_place)
        sp, rp = send.data_ptr(), recv.data_ptr()
        calls = NcclCommunicator._round_calls(SimpleNamespace(rank=r), coll.call_args("sum", 0, r, n, lay)["rounds"],
                                              send, recv, sp, rp, 7, "comm", 0)
        names = [c[0] for c in calls]
        steps = ["group_start", "send", "recv", "group_end"]
        assert names == ([] if in_place else ["copy"]) + steps * 2
        if not in_place:  # own chunk into place: from the send view to slot 1 of the receive view, 64 floats
            assert calls[0][1] == (rp + 64 * 4, sp, 64 * 4, 0)
        last = calls[-3:-1]  # step 2: swap two chunks with rank 1 ^ 2 = 3, forwarding from the receive view
        assert last == [("send", (rp, 128, 7, 3, "comm", 0)), ("recv", (rp + 128 * 4, 128, 7, 3, "comm", 0))]
