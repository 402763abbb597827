"""Fault injection: `--inject KIND[@ROUND][:RANK]`, checked before anything starts.

Each kind produces one failure of the field guide (hang, error, silent corruption) on
demand, so the harness can prove it detects, classifies and explains it. The journal
records which faults a round carried (`injected`), but the diagnosis never reads that:
it is built from the ranks' evidence only, as it would be for a real fault.

ROUND defaults to 1 (one healthy round first; 0 when there is one round), RANK to the
last rank (rank 0 for store-loss: rank 0 hosts the job store). The two older forms
`wrong:ROUND:RANK` (one result element changed after the collective) and
`delay:ROUND:RANK:SECONDS` (extra sleep before init) still work.
"""
from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, replace

from nccl_bench.comm.bootstrap import num_roots, root_index
from nccl_bench.core.errors import UsageError

KINDS = {
    "missing-rank": "the rank does not join the round: the others wait in init",
    "crash": "the rank kills itself with SIGKILL during init (after its ID exchange)",
    "crash-collective": "the rank kills itself with SIGKILL after enqueueing the verification collective",
    "skip-collective": "the rank skips the verification collective (unbalanced control flow)",
    "corrupt": "one bit flipped in the rank's input before the collective",
    "stale-key": "stock keys: the root is held back until the others have read its previous ID",
    "slow-rank": "the rank sleeps the deadline + 1 s before init",
    "store-loss": "rank 0 shuts the job store's server down at the start of the round",
    "leak": "from the round on, the rank keeps SIZE more bytes of host memory every round (leak@R:K=64K)",
}
LEGACY = ("wrong", "delay")
SLOW_EXTRA_S = 1.0  # slow-rank: this much past the deadline
CORRUPT_BIT = 23  # float32 exponent's lowest bit: the value halves or doubles, never lost in a sum
_NEW = re.compile(r"^([a-z-]+)(?:@(\d+))?(?::(\d+))?(?:=(\d+)([KMG]?))?$")
LEAK_DEFAULT_BYTES = 64 << 10
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_OLD = re.compile(r"^(wrong|delay):(\d+):(\d+)(?::([0-9.]+))?$")


@dataclass(frozen=True)
class Injection:
    """One fault: `kind` in `round` (within each init mode) on `rank`; None until resolved."""

    kind: str
    round: int | None = None
    rank: int | None = None
    seconds: float = 0.0  # legacy delay only
    bytes: int = 0  # leak only: bytes kept per round

    @classmethod
    def parse(cls, text: str) -> "Injection":
        old = _OLD.match(text)
        if old:
            kind, rnd, rank, secs = old.groups()
            if (kind == "delay") != (secs is not None):
                raise UsageError(f"--inject: '{text}': use wrong:ROUND:RANK or delay:ROUND:RANK:SECONDS")
            return cls(kind, int(rnd), int(rank), float(secs or 0.0))
        new = _NEW.match(text)
        if not new or new.group(1) not in KINDS:
            raise UsageError(f"--inject: unknown fault '{text}' (KIND[@ROUND][:RANK], KIND one of "
                             f"{', '.join(KINDS)})")
        kind, rnd, rank, size, scale = new.groups()
        if size is not None and kind != "leak":
            raise UsageError(f"--inject: '{text}': only leak takes =SIZE")
        nbytes = (int(size) * _SCALE[scale] if size is not None else LEAK_DEFAULT_BYTES) if kind == "leak" else 0
        if kind == "leak" and nbytes < 1:
            raise UsageError(f"--inject: '{text}': the leak's SIZE must be >= 1 byte")
        return cls(kind, None if rnd is None else int(rnd), None if rank is None else int(rank), bytes=nbytes)

    def __str__(self) -> str:
        if self.kind in LEGACY:
            return f"{self.kind}:{self.round}:{self.rank}" + (f":{self.seconds:g}" if self.kind == "delay" else "")
        return self.kind + ("" if self.round is None else f"@{self.round}") + (
            "" if self.rank is None else f":{self.rank}") + (f"={self.bytes}" if self.kind == "leak" else "")


def resolve(injections: list[Injection], rounds: int, nranks: int, backend: str, modes: list[str],
            ranks_per_root: int, collective: str) -> list[Injection]:
    """Defaults filled in, every fault checked against this run (UsageError: exit 2)."""
    out = []
    for i in injections:
        if i.kind not in LEGACY:
            i = replace(i, round=min(1, rounds - 1) if i.round is None else i.round,
                        rank=(0 if i.kind == "store-loss" else nranks - 1) if i.rank is None else i.rank)
        name = f"--inject {i}"
        if i.round >= rounds:
            raise UsageError(f"{name}: round {i.round} is beyond --rounds {rounds} (rounds count from 0)")
        if i.rank >= nranks:
            raise UsageError(f"{name}: rank {i.rank} is beyond the world size {nranks}")
        why = cannot(i, nranks, backend, modes, ranks_per_root, collective)
        if why:
            raise UsageError(f"{name}: {why}")
        out.append(i)
    return out


def cannot(i: Injection, nranks: int, backend: str, modes: list[str], ranks_per_root: int,
           collective: str) -> str | None:
    """Why this run cannot perform the fault, or None."""
    k = i.kind
    if k in ("crash", "crash-collective") and i.rank == 0:
        return "rank 0 hosts the job store and writes the journal; crash another rank (store-loss is rank 0's)"
    if k == "store-loss" and i.rank != 0:
        return "the job store is hosted by rank 0 (store-loss takes rank 0 or no rank)"
    if k in ("crash", "stale-key") and backend == "torch":
        return (f"{k} needs a backend whose IDs this tool exchanges (nccl, gloo); "
                "the torch backend exchanges them inside PyTorch")
    if k == "stale-key":
        if modes != ["stock"]:
            return "stale-key forces the stock race: it needs --init stock (other modes scope their keys)"
        if i.round == 0:
            return "round 0 has no previous ID to go stale; use a round >= 1"
        if root_index(i.rank, nranks, num_roots(nranks, ranks_per_root)) < 0:
            return f"rank {i.rank} is not a root with --ranks-per-root {ranks_per_root}; hold back a root"
    if k == "corrupt" and collective == "broadcast" and i.rank != 0:
        return "broadcast sends only the root's (rank 0's) input; corrupt rank 0"
    if k in ("missing-rank", "crash", "crash-collective", "skip-collective", "stale-key", "slow-rank") \
            and nranks < 2:
        return f"{k} needs at least 2 ranks"
    return None


def here(injections: list[Injection], kind: str, round_: int, rank: int) -> bool:
    return any(i.kind == kind and i.round == round_ and i.rank == rank for i in injections)


def in_round(injections: list[Injection], round_: int) -> list[str]:
    return [str(i) for i in injections if i.round == round_]


class Leak:
    """The planted leak: memory kept, written (so that it is resident), never let go. Each piece is a mapping
    of its own: from the heap, a piece could land on pages freed earlier and already resident, and the
    process's RSS would not grow by it."""

    def __init__(self, injections: list[Injection], rank: int):
        self.mine = [i for i in injections if i.kind == "leak" and i.rank == rank]
        self.kept: list = []

    def round(self, round_: int) -> None:
        import mmap
        for i in self.mine:
            if round_ >= i.round:
                piece = mmap.mmap(-1, i.bytes)
                piece.write(b"\x01" * i.bytes)  # every page touched: resident
                self.kept.append(piece)


def die() -> None:
    """The crash: SIGKILL, no cleanup, no last words, as an OOM kill or a segfault would leave it."""
    os.kill(os.getpid(), signal.SIGKILL)


def flip_bit(send):
    """A copy of `send` with one bit flipped in its first element (never the caller's tensor)."""
    import torch  # here, on the rank: --inject is parsed and checked without torch
    bad = send.clone()
    bad.view(torch.int32)[0] ^= 1 << CORRUPT_BIT
    return bad
