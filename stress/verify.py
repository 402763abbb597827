"""The verification collective of a round, from the measuring floor's one table of collectives:
nccl_bench.measure.collectives says how a size becomes each rank's buffers and which rank's input lands
where (its segments); nccl_bench.measure.datacheck fills the inputs with small integers and knows every
element of the result exactly, so any difference is a wrong element (silent corruption), not rounding.
bench and replay check their results with the same two."""
from __future__ import annotations

import torch

from nccl_bench.measure import collectives, datacheck
from nccl_bench.measure.collectives import ALL

ROOT = 0  # broadcast and reduce root
OP = "sum"


class Verification:
    """One rank's verification: buffers built per communicator, `run` enqueues, `wrong` counts bad elements."""

    def __init__(self, name: str, nbytes: int, rank: int, nranks: int):
        self.coll = collectives.get(name)
        self.name, self.rank, self.nranks = name, rank, nranks
        lay = self.coll.layout(nbytes, 4, nranks, rank)
        if not (lay.send and lay.recv) and self.coll.by_count:  # too few bytes to split: one element a rank
            lay = self.coll.by_count(1, 4, nranks, rank)
        self.layout = lay
        self.segments = self.coll.segments(self.layout, rank, nranks, ROOT)

    def buffers(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's input, and an output poisoned with NaN (never an expected value)."""
        send = torch.empty(self.layout.send, dtype=torch.float32, device=device)
        datacheck.fill(send, self.rank, OP, self.nranks)
        recv = torch.full((self.layout.recv,), float("nan"), device=device)
        return send, recv

    def run(self, comm, send, recv) -> None:
        args = self.coll.call_args(OP, ROOT, self.rank, self.nranks, self.layout)
        comm.prepare(self.coll.method, send, recv, **args)()

    def wrong(self, recv: torch.Tensor) -> int:
        return datacheck.count_wrong(recv, self.segments, OP, self.nranks)

    def input_wrong(self, send: torch.Tensor) -> int:
        """Elements of this rank's input that differ from the table (corrupted at the source)."""
        want = datacheck.pattern(self.rank, 0, send.numel(), OP, self.nranks, send.device)
        return int((send != want.to(send.dtype)).sum())

    def sources(self, recv: torch.Tensor) -> list[int] | None:
        """The ranks whose data arrived wrong here; None where a reduction hides it."""
        bad = [seg.source for seg in self.segments if datacheck.count_wrong(recv, [seg], OP, self.nranks)]
        if any(s == ALL for s in bad) or not self.segments or any(seg.source == ALL for seg in self.segments):
            return None
        return sorted(set(bad))

    @staticmethod
    def spoil(recv: torch.Tensor) -> None:
        """The legacy `wrong` injection: one result element changed after the collective."""
        recv[0] += 1
