"""The verification collective: inputs whose result is known exactly, element by element.

Values are small integers in float32, so every sum is exact and any difference is a
wrong element (silent corruption), not rounding. Each check is a small record: how many
elements to send and receive, how to fill the input, what to expect, how to launch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

ROOT = 0  # broadcast and reduce root


def _base(count: int) -> torch.Tensor:
    return (torch.arange(count, dtype=torch.float32) % 13)


def _tri(n: int) -> float:
    return n * (n + 1) / 2


@dataclass(frozen=True)
class Check:
    name: str
    per_rank: Callable[[int, int], int]  # (bytes, n) -> elements per chunk c
    send: Callable[[int, int, int], torch.Tensor]  # (rank, n, c) -> input
    recv_count: Callable[[int, int], int]  # (n, c) -> output elements
    expect: Callable[[int, int, int], torch.Tensor | None]  # (rank, n, c) -> expected, None: no output
    launch: Callable  # (comm, send, recv, rank, n) -> None (enqueue)


def _chunks(fn):
    """Concatenate fn(j, c) over the n chunks j."""
    return lambda rank, n, c: torch.cat([fn(rank, j, n, c) for j in range(n)])


CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("all_reduce", lambda b, n: b // 4,
          lambda rank, n, c: rank + 1 + _base(c), lambda n, c: c,
          lambda rank, n, c: _tri(n) + n * _base(c),
          lambda comm, s, r, rank, n: comm.all_reduce(s, r, "sum")),
    Check("all_gather", lambda b, n: b // 4 // n,
          lambda rank, n, c: rank + 1 + _base(c), lambda n, c: n * c,
          _chunks(lambda rank, j, n, c: j + 1 + _base(c)),
          lambda comm, s, r, rank, n: comm.all_gather(s, r)),
    Check("reduce_scatter", lambda b, n: b // 4 // n,
          _chunks(lambda rank, j, n, c: (rank + 1) * (j + 1) + _base(c)), lambda n, c: c,
          lambda rank, n, c: (rank + 1) * _tri(n) + n * _base(c),
          lambda comm, s, r, rank, n: comm.reduce_scatter(s, r, "sum")),
    Check("broadcast", lambda b, n: b // 4,
          lambda rank, n, c: rank + 1 + _base(c), lambda n, c: c,
          lambda rank, n, c: ROOT + 1 + _base(c),
          lambda comm, s, r, rank, n: comm.broadcast(s, r, ROOT)),
    Check("reduce", lambda b, n: b // 4,
          lambda rank, n, c: rank + 1 + _base(c), lambda n, c: c,
          lambda rank, n, c: _tri(n) + n * _base(c) if rank == ROOT else None,
          lambda comm, s, r, rank, n: comm.reduce(s, r, "sum", ROOT)),
    Check("alltoall", lambda b, n: b // 4 // n,
          _chunks(lambda rank, j, n, c: rank * n + j + _base(c)), lambda n, c: n * c,
          _chunks(lambda rank, j, n, c: j * n + rank + _base(c)),
          lambda comm, s, r, rank, n: comm.alltoall(s, r)),
    Check("sendrecv", lambda b, n: b // 4,
          lambda rank, n, c: rank + 1 + _base(c), lambda n, c: c,
          lambda rank, n, c: (rank - 1) % n + 1 + _base(c),
          lambda comm, s, r, rank, n: comm.sendrecv(s, r, (rank + 1) % n, (rank - 1) % n)),
)}


# Where each received element came from, for the checks that move data without reducing it:
# (rank, n, c, element index) -> source rank. Reductions mix every rank into every element.
SOURCE = {
    "all_gather": lambda rank, n, c, i: i // c,
    "alltoall": lambda rank, n, c, i: i // c,
    "broadcast": lambda rank, n, c, i: ROOT,
    "sendrecv": lambda rank, n, c, i: (rank - 1) % n,
}


class Verification:
    """Buffers for one rank, built once per run; `run` enqueues, `wrong` counts bad elements."""

    def __init__(self, name: str, nbytes: int, rank: int, nranks: int):
        self.check = CHECKS[name]
        self.rank, self.nranks = rank, nranks
        self.count = max(1, self.check.per_rank(nbytes, nranks))
        self._send = self.check.send(rank, nranks, self.count)
        self._expect = self.check.expect(rank, nranks, self.count)
        self.device = None

    def buffers(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh input and a poisoned output on `device` (NaN: never an expected value)."""
        send = self._send.to(device)
        recv = torch.full((self.check.recv_count(self.nranks, self.count),), float("nan"), device=device)
        return send, recv

    def run(self, comm, send, recv) -> None:
        self.check.launch(comm, send, recv, self.rank, self.nranks)

    def wrong(self, recv: torch.Tensor) -> int:
        if self._expect is None:
            return 0
        return int((recv.cpu() != self._expect).sum())

    def input_wrong(self, send: torch.Tensor) -> int:
        """Elements of this rank's input that differ from the table (corrupted at the source)."""
        return int((send.cpu() != self._send).sum())

    def sources(self, recv: torch.Tensor) -> list[int] | None:
        """The ranks whose data arrived wrong here; None where a reduction hides it."""
        src = SOURCE.get(self.check.name)
        if src is None or self._expect is None:
            return None
        bad = (recv.cpu() != self._expect).nonzero().flatten().tolist()
        return sorted({src(self.rank, self.nranks, self.count, i) for i in bad})
