"""A job's communication as one neutral sequence per rank: what `replay` runs.

Every reader (Flight Recorder dumps, profiler traces, our own workload file: nccl_bench.replay.traces)
produces a Workload; the replay (nccl_bench.replay.worker) runs it through the collective records,
buffers and checks `bench` uses. Pure data, no torch: it crosses into the ranks by being read again.

A group's ranks are global ranks in group-rank order. An op's `root` and `peer` are group ranks.
Sizes are the element counts the call was given (input and output), exact: no rounding.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from nccl_bench.measure import collectives
from nccl_bench.measure.vocabulary import ELEMENT_BYTES

P2P = ("send", "recv")
SEND_RECV = "send/recv"  # how a row names a point-to-point transfer (both ends)
PLACED = "the job ran "  # the start of a placement's note (Workload.place), which a later placement replaces


@dataclass(frozen=True)
class Group:
    key: str  # the trace's name for it (a process group's name), unique in the workload
    ranks: tuple[int, ...]
    desc: str = ""

    def spans_nodes(self, ranks_per_node: int) -> bool:
        """Whether its ranks sit on more than one node, `ranks_per_node` to a node in rank order."""
        return len({r // ranks_per_node for r in self.ranks}) > 1

    def label(self) -> str:
        name = self.desc if self.desc not in ("", "undefined") else f"group {self.key}"
        return f"{name} {list(self.ranks)}"


@dataclass(frozen=True)
class Op:
    collective: str  # a collectives.REGISTRY name, or "send" / "recv"
    group: str
    in_count: int  # elements the call was given to send
    out_count: int  # elements it was given to receive
    dtype: str  # torch's name: float32, bfloat16, ...
    op: str | None = None  # the reduction; None where the trace does not record it (sum is replayed)
    root: int = 0  # group rank (rooted collectives; traces record none: 0)
    peer: int | None = None  # group rank at the other end (send, recv)
    seq: int | None = None  # the trace's sequence number in its group
    duration_us: float | None = None  # the job's own time for this call, where the trace has it
    name: str = ""  # the trace's own name for it ("nccl:_all_gather_base")
    # profiler traces of one node: the job's time for the call once its last rank had started it (its
    # end less the latest start: no wait for a late peer), and the share of the call's time that other
    # kernels ran beside it on this GPU (the job's compute overlapping its communication)
    ready_us: float | None = None
    overlap: float | None = None
    # an all-to-all with uneven splits, where the trace gives them: splits[i][j], the elements group rank i
    # sends group rank j (the whole group's, so that each rank's result can be checked)
    splits: tuple[tuple[int, ...], ...] | None = None
    # the transfers of one coalesced group (batch_isend_irecv) share this number on their rank: they are launched
    # as one NCCL group, as the job launched them, and the group's time is each one's
    batch: int | None = None
    # from a profiler trace of one node: how long this rank waits, once the call's ranks have lined up, before it
    # starts (0 for the rank that came first in the job; readytimes.arrival_holds), so that the replay's kernels
    # start in the job's order: a receiver that waits for its sender and one that comes late take the same
    # transfer in different times (docs/replay.md)
    hold_us: float | None = None

    @property
    def elt(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def nbytes(self) -> int:
        """nccl-tests' size column: bytes of the larger buffer (for a transfer, what moves)."""
        return max(self.in_count, self.out_count) * self.elt

    def row_collective(self) -> str:
        """A transfer's row says whether it ran in a batch (one NCCL group with the batch's other transfers, as
        batch_isend_irecv makes it): its time is the batch's, not one transfer's."""
        if self.collective in P2P:
            return SEND_RECV if self.batch is None else f"{SEND_RECV} in a batch"
        return self.collective

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}

    @classmethod
    def from_json(cls, d: dict) -> "Op":
        splits = d.get("splits")
        return cls(**{**d, "splits": tuple(map(tuple, splits)) if splits else None})


@dataclass
class Workload:
    nranks: int
    groups: dict[str, Group]
    ranks: dict[int, list[Op]]  # global rank -> its sequence, in order
    source: str  # "flight recorder", "profiler trace", "workload file"
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what reading found worth saying
    skipped: list[str] = field(default_factory=list)  # calls left out, each with its reason
    stopped: list[str] = field(default_factory=list)  # a hung job: where each rank stopped
    meta: dict = field(default_factory=dict)  # the job's versions, where the trace has them
    seq_aligned: bool = False  # the calls carry the job's own sequence numbers per group (Flight Recorder)
    origin: dict[int, str] = field(default_factory=dict)  # rank -> the file its calls were read from
    # the groups whose ranks were on more than one node in the job (a network between them): their rows get no
    # ratio against the job's times, since a network hop and this node's links do not compare
    crossed: list[str] = field(default_factory=list)

    def file_of(self, rank: int) -> str:
        return self.origin.get(rank) or (self.files[0] if self.files else "?")

    def fit(self, nranks: int) -> "Workload":
        """The groups whose ranks all exist on `nranks` ranks, and each such rank's calls on them;
        the groups left out are named in notes."""
        if nranks >= self.nranks:
            return self
        keep = {k: g for k, g in self.groups.items() if max(g.ranks) < nranks}
        gone = [g for k, g in self.groups.items() if k not in keep]
        notes = self.notes + [f"left out group {g.label()}: rank {max(g.ranks)} is beyond the {nranks} "
                              f"rank(s) here" for g in gone]
        ranks = {r: [op for op in ops if op.group in keep] for r, ops in self.ranks.items() if r < nranks}
        return replace(self, nranks=nranks, groups=keep, ranks=ranks, notes=notes)

    def place(self, ranks_per_node: int, source: str) -> None:
        """The job's ranks were `ranks_per_node` to a node, in rank order (torchrun's and srun's placement): the
        groups that spanned nodes are named, once each. Placed again (--ranks-per-node over what the traces said), the
        earlier placement's note goes."""
        self.notes = [n for n in self.notes if not n.startswith(PLACED)]
        self.crossed = [k for k, g in self.groups.items() if g.spans_nodes(ranks_per_node)]
        if self.crossed:
            names = ", ".join(self.groups[k].label() for k in self.crossed[:6])
            names += " ..." if len(self.crossed) > 6 else ""
            self.notes.append(f"{PLACED}{ranks_per_node} rank(s) a node ({source}): {names} crossed a network in "
                              "the job; their rows get no ratio against the job's times (a network hop and this "
                              "node's links do not compare)")

    def crossing_here(self, ranks_per_node: int) -> "Workload":
        """This replay runs over several nodes, `ranks_per_node` to a node in rank order: a group that crossed a
        network in the job and crosses one here too compares again; only the others keep no ratio."""
        both = [k for k in self.crossed if self.groups[k].spans_nodes(ranks_per_node)]
        if not both:
            return self
        note = (f"{', '.join(self.groups[k].label() for k in both[:6])}: crossed a network here as in the job "
                f"({ranks_per_node} rank(s) a node here): compared")
        return replace(self, crossed=[k for k in self.crossed if k not in both], notes=self.notes + [note])

    def duration_known(self) -> bool:
        return any(op.duration_us is not None for ops in self.ranks.values() for op in ops)

    def compact(self) -> "Workload":
        """The ranks that have calls, numbered 0..k-1 in their order (a replay starts those and no more); the
        groups' ranks renumbered with them. Where nothing is missing this is the workload itself."""
        present = sorted(r for r, ops in self.ranks.items() if ops)
        if present == list(range(self.nranks)):
            return self
        new = {r: k for k, r in enumerate(present)}
        groups = {key: replace(g, ranks=tuple(new[r] for r in g.ranks)) for key, g in self.groups.items()
                  if all(r in new for r in g.ranks)}
        ranks = {new[r]: [op for op in self.ranks[r] if op.group in groups] for r in present}
        renumbered = [f"{r} -> {new[r]}" for r in present if r != new[r]]
        notes = self.notes + ([f"ranks renumbered to the {len(present)} that have calls: " + ", ".join(renumbered[:8])
                               + (" ..." if len(renumbered) > 8 else "")] if renumbered else [])
        origin = {new[r]: f for r, f in self.origin.items() if r in new}
        return replace(self, nranks=len(present), groups=groups, ranks=ranks, notes=notes, origin=origin)

    def buffer_bytes(self, rank: int) -> int:
        """What a rank's replay allocates: one send and one receive buffer per dtype, each as large as that
        dtype's largest call (nccl_bench.replay.worker)."""
        need: dict[str, list[int]] = {}
        for op in self.ranks.get(rank, []):
            s, r = need.setdefault(op.dtype, [1, 1])
            n = len(self.groups[op.group].ranks)
            send, recv = op.in_count, op.out_count
            if op.collective in ("gather", "scatter"):  # every rank's buffers as the root's (nccl-tests)
                send, recv = max(send, recv // max(n, 1)), max(recv, send * n)
            need[op.dtype] = [max(s, send), max(r, recv)]
        return sum((s + r) * ELEMENT_BYTES[d] for d, (s, r) in need.items())

    def sequence_doc(self, rank: int | None = None) -> dict:
        """The JSON form a rank of the replay reads: the groups, and one rank's calls (every rank's: None)."""
        ranks = self.ranks if rank is None else {rank: self.ranks.get(rank, [])}
        return {"nranks": self.nranks, "source": self.source, "files": self.files,
                "groups": {k: {"ranks": list(g.ranks), "desc": g.desc} for k, g in self.groups.items()},
                "ranks": {str(r): [op.to_json() for op in ops] for r, ops in ranks.items()},
                "notes": self.notes, "skipped": self.skipped, "stopped": self.stopped, "trace_meta": self.meta,
                "seq_aligned": self.seq_aligned, "origin": {str(r): f for r, f in self.origin.items()},
                "crossed": self.crossed}

    @classmethod
    def from_sequence_doc(cls, doc: dict) -> "Workload":
        return cls(nranks=doc["nranks"], source=doc["source"], files=doc["files"],
                   groups={k: Group(k, tuple(g["ranks"]), g["desc"]) for k, g in doc["groups"].items()},
                   ranks={int(r): [Op.from_json(o) for o in ops] for r, ops in doc["ranks"].items()},
                   notes=doc["notes"], skipped=doc["skipped"], stopped=doc["stopped"], meta=doc["trace_meta"],
                   seq_aligned=doc["seq_aligned"], origin={int(r): f for r, f in doc["origin"].items()},
                   crossed=doc.get("crossed", []))


def check_op(op: Op, group: Group) -> str | None:
    """Why this call cannot be replayed, or None."""
    if op.dtype not in ELEMENT_BYTES:
        return f"dtype {op.dtype} is not one this replay fills and checks"
    if op.collective in P2P:
        if op.peer is None or not 0 <= op.peer < len(group.ranks):
            return f"{op.collective} with no peer in group {group.label()}"
        return None if op.in_count or op.out_count else f"{op.collective} of nothing"
    if op.collective not in collectives.REGISTRY:
        return f"collective '{op.name or op.collective}' has no replay"
    if op.splits is not None:
        n = len(group.ranks)
        if len(op.splits) != n or any(len(row) != n or min(row, default=0) < 0 for row in op.splits):
            return f"an all_to_all whose splits do not make a {n} x {n} table"
        return None
    coll = collectives.REGISTRY[op.collective]
    if coll.by_count is None:
        return f"{op.collective} cannot be replayed from a trace's sizes"
    if collectives.traced_layout(coll, op.in_count, op.out_count, op.elt, len(group.ranks), 0) is None:
        return (f"{op.collective} of {op.in_count} -> {op.out_count} elements does not fit its shape on "
                f"{len(group.ranks)} ranks")
    return None
