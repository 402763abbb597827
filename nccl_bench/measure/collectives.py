"""The table of collectives: one small frozen record each, registered by name.

A record says what nccl-tests' per-collective file says: how a byte size becomes
per-rank element counts (with nccl-tests' rounding), where the in-place buffers sit,
which rank's input lands where in the output (so the expected result is exactly
predictable), the busbw factor, and which Communicator method launches it. The engine
(nccl_bench.measure.sweep) never asks which collective it runs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from nccl_bench.core.errors import UsageError

ALL = -1  # Segment.source: the reduction over every rank's input


@dataclass(frozen=True)
class Layout:
    """Element counts for one size: what each rank sends and receives, and nccl-tests' `count`."""

    count: int  # nccl-tests' `count` column (elements per rank the call is given)
    send: int  # elements in this rank's send buffer
    recv: int  # elements in this rank's receive buffer
    bytes: int  # nccl-tests' `size` column: bytes of the larger buffer
    send_inplace: int = 0  # in place: where the send view starts inside the receive buffer
    recv_inplace: int = 0  # in place: where the receive view starts inside the send buffer
    moved: int = 0  # bytes algbw counts when not `bytes` (hypercube: what one rank receives)

    @property
    def alg_bytes(self) -> int:
        return self.moved or self.bytes


@dataclass(frozen=True)
class Segment:
    """Output elements [out, out+length) equal input elements [src, src+length) of `source`."""

    out: int
    length: int
    source: int  # a rank, or ALL for the reduction over ranks
    src: int = 0


@dataclass(frozen=True)
class Move:
    """One call of a point-to-point round: send `length` elements of this rank's `buf` view ("send",
    or "recv" to forward what arrived in an earlier round) from `at` to `peer`, or receive `length`
    elements from `peer` into the receive view at `at`. A send and a receive with peer == own rank
    in one round are a local copy (nccl-tests' cudaMemcpyAsync), skipped when source is destination."""

    op: str  # send | recv
    peer: int
    at: int
    length: int
    buf: str = "send"  # the view a send reads


Rounds = tuple  # tuple of rounds, each a tuple of Moves run as one group; rounds run in order


@dataclass(frozen=True)
class Collective:
    name: str
    nccl_name: str | None  # how NCCL names it in its TUNING log; None: point-to-point, no algorithm
    layout: Callable[[int, int, int, int], Layout]  # (bytes, elt size, nranks, rank) -> Layout
    segments: Callable[[Layout, int, int, int], list[Segment]]  # (layout, rank, nranks, root)
    factor: Callable[[int], float]  # busbw = algbw * factor(nranks)
    reduces: bool = False  # takes a reduction op
    rooted: bool = False  # takes a root
    ring_peers: bool = False  # sends to rank+1 and receives from rank-1 (as nccl-tests' sendrecv)
    algos: tuple[str, ...] = ()  # NCCL algorithms that can run it (empty: point-to-point)
    # In place, point-to-point sends read the buffer the peer's receive is writing: across
    # processes NCCL gives no order between them, so the in-place result is timed but not checked
    # on GPU backends (docs/validation.md).
    in_place_checked: bool = True
    # Collectives NCCL has no single call for (as nccl-tests runs them): the point-to-point rounds
    # of one launch, (layout, rank, nranks, root) -> Rounds; launched by Communicator.exchange.
    rounds: Callable[[Layout, int, int, int], Rounds] | None = None
    # The single NCCL call (NCCL >= 2.28: ncclGather, ncclScatter) nccl-tests 2.19.6 makes instead of
    # the rounds where the library has it; a backend that has the call makes it, the others run the rounds.
    native: str | None = None
    power_of_two: bool = False  # runs only on a power-of-two number of ranks
    # The layout for an exact `count` (count, elt size, nranks, rank) -> Layout, with none of the size's
    # rounding: a replayed job's sizes are what they were. None: it cannot be replayed from a trace.
    by_count: Callable[[int, int, int, int], Layout] | None = None

    @property
    def method(self) -> str:
        """The Communicator method that launches it."""
        return "exchange" if self.rounds else self.name

    def unfit(self, nranks: int) -> str | None:
        """Why it cannot run on `nranks` ranks, or None."""
        if self.power_of_two and nranks & (nranks - 1):
            return f"{self.name} needs a power-of-two number of ranks, not {nranks}"
        return None

    def rowless(self, sizes: list[int], elt: int, nranks: int) -> list[int]:
        """The sizes at which a rank's share rounds down to no element (nccl-tests' rounding): nothing moves, and the
        sweep makes no row of them (nccl-tests prints them as 0 B). Every rank rounds alike, so rank 0 says."""
        return [s for s in sizes if not ((lay := self.layout(s, elt, nranks, 0)).send and lay.recv)]

    def call_args(self, op: str, root: int, rank: int, nranks: int, lay: Layout | None = None) -> dict:
        """Keyword arguments of Communicator.prepare() beyond the buffers (`lay`: the size's layout,
        needed by point-to-point rounds)."""
        if self.rounds:
            args = {"rounds": self.rounds(lay, rank, nranks, root)}
            if self.native:
                args["native"] = (self.native, root)
            return args
        args = {}
        if self.reduces:
            args["op"] = op
        if self.rooted:
            args["root"] = root
        if self.ring_peers:
            args["to"], args["frm"] = (rank + 1) % nranks, (rank - 1) % nranks
        return args


REGISTRY: dict[str, Collective] = {}


def register(c: Collective) -> Collective:
    REGISTRY[c.name] = c
    return c


def get(name: str) -> Collective:
    if name not in REGISTRY:
        raise UsageError(f"unknown collective '{name}' (choose from {', '.join(REGISTRY)} or all)")
    return REGISTRY[name]


# --- nccl-tests' rounding (src/*.cu getCollByteCount) -------------------------------------------
def _aligned_chunk(nbytes: int, elt: int, nranks: int) -> int:
    """Per-rank elements of a chunked collective: count / nranks, rounded down to 16 bytes."""
    return (nbytes // elt // nranks) & -max(16 // elt, 1)


# Layouts by nccl-tests' `count` (elements per rank the call is given), then by size with its rounding.
def _whole_count(n, elt, nranks, rank) -> Layout:
    return Layout(count=n, send=n, recv=n, bytes=n * elt)


def _gather_count(base, elt, nranks, rank) -> Layout:  # all_gather: send a chunk, receive all
    return Layout(count=base, send=base, recv=base * nranks, bytes=base * nranks * elt, send_inplace=rank * base)


def _scatter_count(base, elt, nranks, rank) -> Layout:  # reduce_scatter: send all, receive a chunk
    return Layout(count=base, send=base * nranks, recv=base, bytes=base * nranks * elt, recv_inplace=rank * base)


def _alltoall_count(base, elt, nranks, rank) -> Layout:
    return Layout(count=base, send=base * nranks, recv=base * nranks, bytes=base * nranks * elt)


def _whole(nbytes, elt, nranks, rank) -> Layout:
    return _whole_count(nbytes // elt, elt, nranks, rank)


def _gather_like(nbytes, elt, nranks, rank) -> Layout:
    return _gather_count(_aligned_chunk(nbytes, elt, nranks), elt, nranks, rank)


def _scatter_like(nbytes, elt, nranks, rank) -> Layout:
    return _scatter_count(_aligned_chunk(nbytes, elt, nranks), elt, nranks, rank)


def _alltoall(nbytes, elt, nranks, rank) -> Layout:
    return _alltoall_count(_aligned_chunk(nbytes, elt, nranks), elt, nranks, rank)


def _gathered(lay, r, n, root) -> list[Segment]:
    return [Segment(j * lay.count, lay.count, j) for j in range(n)]  # every rank's chunk in rank order


# --- busbw factors (nccl-tests' formulas, its doc/PERFORMANCE.md) ---------------------------------------
def allreduce_factor(n: int) -> float:
    return 2 * (n - 1) / n


def chunked_factor(n: int) -> float:
    return (n - 1) / n


def one(n: int) -> float:
    return 1.0


REDUCE_ALGOS = ("ring", "tree", "collnetdirect", "collnetchain", "nvls", "nvlstree")

register(Collective(
    "all_reduce", "AllReduce", _whole, lambda lay, r, n, root: [Segment(0, lay.recv, ALL)],
    allreduce_factor, reduces=True, algos=REDUCE_ALGOS, by_count=_whole_count))
register(Collective(
    "all_gather", "AllGather", _gather_like, _gathered,
    chunked_factor, algos=("ring", "nvls", "collnetdirect", "pat"), by_count=_gather_count))
register(Collective(
    "reduce_scatter", "ReduceScatter", _scatter_like,
    lambda lay, r, n, root: [Segment(0, lay.count, ALL, r * lay.count)],
    chunked_factor, reduces=True, algos=("ring", "nvls", "collnetdirect", "pat"), by_count=_scatter_count))
register(Collective(
    "broadcast", "Broadcast", _whole, lambda lay, r, n, root: [Segment(0, lay.recv, root)],
    one, rooted=True, algos=("ring",), by_count=_whole_count))
register(Collective(
    "reduce", "Reduce", _whole, lambda lay, r, n, root: [Segment(0, lay.recv, ALL)] if r == root else [],
    one, reduces=True, rooted=True, algos=("ring",), by_count=_whole_count))
register(Collective(
    "alltoall", None, _alltoall,
    lambda lay, r, n, root: [Segment(j * lay.count, lay.count, j, r * lay.count) for j in range(n)],
    chunked_factor, in_place_checked=False, by_count=_alltoall_count))
register(Collective(
    "sendrecv", None, _whole, lambda lay, r, n, root: [Segment(0, lay.recv, (r - 1) % n)], one,
    ring_peers=True, in_place_checked=False))



# --- point-to-point collectives: nccl-tests' gather, scatter, alltoallv and hypercube ---------------
def _gather_rounds(lay, r, n, root) -> Rounds:
    c = lay.count
    recvs = tuple(Move("recv", p, p * c, c) for p in range(n)) if r == root else ()
    return ((Move("send", root, 0, c),) + recvs,)


def _scatter_rounds(lay, r, n, root) -> Rounds:
    c = lay.count
    sends = tuple(Move("send", p, p * c, c) for p in range(n)) if r == root else ()
    return (sends + (Move("recv", root, 0, c),),)


def _hypercube_layout(nbytes, elt, nranks, rank) -> Layout:  # algbw counts the (n-1) chunks received
    lay = _gather_like(nbytes, elt, nranks, rank)
    return replace(lay, moved=lay.count * (nranks - 1) * elt)


def _hypercube_rounds(lay, r, n, root) -> Rounds:
    """Recursive doubling: own chunk into place, then in step k swap the 2^k chunks held with r ^ 2^k."""
    c = lay.count
    out = [(Move("send", r, 0, c), Move("recv", r, r * c, c))]
    mask = 1
    while mask < n:
        held = r & ~(mask - 1)
        out.append((Move("send", r ^ mask, held * c, c * mask, "recv"),
                    Move("recv", r ^ mask, (held ^ mask) * c, c * mask)))
        mask <<= 1
    return tuple(out)


def alltoallv_peer_bytes(src: int, dst: int, nranks: int, total: int) -> int:
    """Bytes `src` sends `dst`: nccl-tests' generated pattern at its default spread 1.0 (traffic grows
    with the distance dst - src mod n; none to itself), each rounded down to 16 bytes."""
    if nranks == 1:
        return total & -16
    distance = (dst - src + nranks) % nranks
    return int(float(distance) * float(total) / float(nranks * (nranks - 1) // 2)) & -16


def _alltoallv_counts(lay: Layout, elt_count: int, nranks: int) -> list[list[int]]:
    """counts[i][j]: elements rank i sends rank j (lay.count: nccl-tests' per-peer `count`)."""
    total = lay.count * nranks * elt_count  # elt_count: bytes per element
    return [[alltoallv_peer_bytes(i, j, nranks, total) // elt_count for j in range(nranks)] for i in range(nranks)]


def _alltoallv_layout(nbytes, elt, nranks, rank) -> Layout:
    per_peer = _aligned_chunk(nbytes, elt, nranks)
    total = per_peer * nranks * elt
    mine = sum(alltoallv_peer_bytes(rank, j, nranks, total) for j in range(nranks)) // elt
    got = sum(alltoallv_peer_bytes(j, rank, nranks, total) for j in range(nranks)) // elt
    return Layout(count=per_peer, send=mine, recv=got, bytes=max(mine, got) * elt, moved=0)


def _elt(lay: Layout) -> int:
    return lay.bytes // max(lay.send, lay.recv, 1)


def split_rounds(counts: list[list[int]], r: int) -> Rounds:
    """An all-to-all with uneven splits (counts[i][j]: elements rank i sends rank j): sends packed in peer
    order from the send view, receives packed in peer order (nccl-tests' alltoallv, PyTorch's
    all_to_all_single with split sizes)."""
    moves, s_at, r_at = [], 0, 0
    for p in range(len(counts)):
        if counts[r][p]:
            moves.append(Move("send", p, s_at, counts[r][p]))
        if counts[p][r]:
            moves.append(Move("recv", p, r_at, counts[p][r]))
        s_at, r_at = s_at + counts[r][p], r_at + counts[p][r]
    return (tuple(moves),)


def split_segments(counts: list[list[int]], r: int) -> list[Segment]:
    """From each source in rank order: its elements for r, which start after what it sends ranks < r."""
    out, at = [], 0
    for src in range(len(counts)):
        if counts[src][r]:
            out.append(Segment(at, counts[src][r], src, sum(counts[src][:r])))
        at += counts[src][r]
    return out


def _alltoallv_rounds(lay, r, n, root) -> Rounds:
    return split_rounds(_alltoallv_counts(lay, _elt(lay), n), r)


def _alltoallv_segments(lay, r, n, root) -> list[Segment]:
    return split_segments(_alltoallv_counts(lay, _elt(lay), n), r)


register(Collective(
    "gather", None, _gather_like, lambda lay, r, n, root: _gathered(lay, r, n, root) if r == root else [],
    chunked_factor, rooted=True, rounds=_gather_rounds, native="gather", by_count=_gather_count))
register(Collective(
    "scatter", None, _scatter_like, lambda lay, r, n, root: [Segment(0, lay.count, root, r * lay.count)],
    chunked_factor, rooted=True, rounds=_scatter_rounds, native="scatter", by_count=_scatter_count))
# In place, sends and receives share the one buffer at different offsets: timed, not checked (nccl-tests)
register(Collective(
    "alltoallv", None, _alltoallv_layout, _alltoallv_segments, chunked_factor, in_place_checked=False,
    rounds=_alltoallv_rounds))
register(Collective(
    "hypercube", None, _hypercube_layout, _gathered, one, rounds=_hypercube_rounds, power_of_two=True))

NAMES = tuple(REGISTRY)


def traced_layout(coll: Collective, in_count: int, out_count: int, elt: int, nranks: int, rank: int) -> Layout | None:
    """The exact layout of a traced call that gave `in_count` and `out_count` elements: the count whose
    layout sends and receives exactly those (a trace names buffers, not nccl-tests' count); None if none."""
    if coll.by_count is None:
        return None
    for count in dict.fromkeys((in_count, out_count, in_count // max(nranks, 1), out_count // max(nranks, 1))):
        lay = coll.by_count(count, elt, nranks, rank)
        if count > 0 and (lay.send, lay.recv) == (in_count, out_count):
            return lay
    return None
