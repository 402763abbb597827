"""Pure parts of the bench: busbw factors, nccl-tests' count rounding, sizes, exact expected data."""
import pytest
import torch

from nccl_bench import collectives as C
from nccl_bench.bench import parse_size
from nccl_bench.errors import UsageError
from nccl_bench.sweep import aggregate, size_steps

# (collective, nranks) -> busbw factor, from nccl-tests' src/*.cu
FACTORS = [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 2, 0.5), ("all_gather", 8, 0.875), ("reduce_scatter", 4, 0.75),
    ("alltoall", 8, 0.875), ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("sendrecv", 8, 1.0),
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
]


@pytest.mark.parametrize("name,nbytes,elt,n,want", LAYOUTS)
def test_counts_follow_nccl_tests_rounding(name, nbytes, elt, n, want):
    lay = C.get(name).layout(nbytes, elt, n, 0)
    assert (lay.count, lay.send, lay.recv, lay.bytes) == want


def test_in_place_offsets():
    assert C.get("all_gather").layout(1024, 4, 4, 3).send_inplace == 3 * 64
    assert C.get("reduce_scatter").layout(1024, 4, 4, 2).recv_inplace == 2 * 64


def test_registry_and_unknown():
    assert C.NAMES == ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
    with pytest.raises(UsageError, match="unknown collective 'gather'"):
        C.get("gather")


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
        C.fill(t, r, op, n)
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
        assert C.count_wrong(outs[r], segs, "sum", n) == 0
        bad = outs[r].clone()
        bad[5] += 1
        bad[-1] = 0
        assert C.count_wrong(bad, segs, "sum", n) == 2


def test_exact_in_small_types_and_every_op():
    n = 4
    for dtype in (torch.bfloat16, torch.float16, torch.int8, torch.uint8):
        for op, fn in (("sum", sum), ("max", lambda xs: torch.stack(xs).max(0).values),
                       ("min", lambda xs: torch.stack(xs).min(0).values),
                       ("prod", lambda xs: torch.stack(xs).prod(0))):
            ins = [C.pattern(r, 0, 5000, op, n, "cpu") for r in range(n)]
            out = fn(ins).to(dtype)
            seg = [C.Segment(0, 5000, C.ALL)]
            assert C.count_wrong(out, seg, op, n) == 0, (dtype, op)
    # prod: every element's product is exactly 2 (small enough for int8)
    assert set(C.reduced(0, 100, "prod", 5, "cpu").tolist()) == {2}


def test_avg_tolerates_rounding_only():
    n = 3
    seg = [C.Segment(0, 1000, C.ALL)]
    exact = C.reduced(0, 1000, "avg", n, "cpu")
    got = (sum(C.pattern(r, 0, 1000, "avg", n, "cpu").half() * (1 / n) for r in range(n))).half()
    assert C.count_wrong(got, seg, "avg", n) == 0
    got[7] += 1
    assert C.count_wrong(got, seg, "avg", n) == 1
    assert exact.dtype == torch.float64


def test_size_steps_and_parse():
    assert size_steps(8, 64, 2, None) == [8, 16, 32, 64]
    assert size_steps(8, 100, 2, None) == [8, 16, 32, 64]
    assert size_steps(1, 3, None, 1) == [1, 2, 3]
    assert parse_size("8G", "-e") == 8 << 30 and parse_size("64k", "-b") == 65536 and parse_size("8", "-b") == 8
    with pytest.raises(UsageError, match="-e"):
        parse_size("8X", "-e")


def test_aggregate():
    assert aggregate([1.0, 3.0], "avg") == 2.0
    assert aggregate([2.0, 1.0], "rank0") == 2.0
    assert aggregate([2.0, 1.0], "min") == 1.0 and aggregate([2.0, 1.0], "max") == 2.0
