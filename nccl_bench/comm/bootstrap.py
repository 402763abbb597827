"""Unique-ID exchange through the job store, per init mode (docs/init.md).

- regular: rank 0 publishes one ID under the communicator counter (PyTorch's
  broadcastUniqueNCCLID key is `str(ncclCommCounter_++)`); ncclCommInitRank.
- stock:   scalable init as PyTorch ships it: each root publishes under
  `UniqueNCCLID:<root index>`, every rank multi-gets every key; the keys are the same
  for every init, so a rank can read the previous init's ID (pytorch#178473).
- scoped:  the same keys prefixed with the per-communicator counter (PR 178493).

Roots follow PyTorch's getRootIndex and NCCL's rootIdFromRank (block rule).
In the same-group scenario the keys follow PyTorch's layout inside one process group
(nccl_bench.comm.scenario): a group prefix, and the per-group counter on the broadcast path.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable

from nccl_bench.core.deadline import Deadline
from nccl_bench.core.errors import DeadlineExceeded, UsageError, at_least
from nccl_bench.comm.scenario import key_layout

MODES = ("regular", "stock", "scoped")
DEFAULT_RANKS_PER_ROOT = 128  # TORCH_NCCL_RANKS_PER_ROOT's default


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise UsageError(f"unknown init mode '{mode}' (choose from {', '.join(MODES)})")
    return mode


def num_roots(nranks: int, ranks_per_root: int) -> int:
    """ceil(nranks / ranks_per_root), as PyTorch computes the number of unique IDs."""
    at_least("--ranks-per-root", ranks_per_root, 1)
    return max(1, math.ceil(nranks / ranks_per_root))


def root_index(rank: int, nranks: int, nroots: int) -> int:
    """PyTorch's getRootIndex: this rank's root number if it is a root, else -1."""
    rmr = nranks % nroots
    rpr = nranks // nroots
    rlim = rmr * (rpr + 1)
    if rank < rlim:
        return -1 if rank % (rpr + 1) else rank // (rpr + 1)
    return -1 if (rank - rlim) % rpr else (rank - rlim) // rpr + rmr


def root_of(rank: int, nranks: int, nroots: int) -> int:
    """NCCL's rootIdFromRank: the root (block) this rank belongs to."""
    rmr = nranks % nroots
    rpr = nranks // nroots
    rlim = rmr * (rpr + 1)
    return rank // (rpr + 1) if rank < rlim else (rank - rlim) // rpr + rmr


def root_ranks(nranks: int, nroots: int) -> list[int]:
    return [r for r in range(nranks) if root_index(r, nranks, nroots) >= 0]


def id_keys(mode: str, counter: int, nroots: int) -> list[str]:
    """Store keys (relative to the exchange namespace) one init reads, in root order."""
    if mode == "regular":
        return [str(counter)]
    if mode == "stock":
        return [f"UniqueNCCLID:{i}" for i in range(nroots)]
    if mode == "scoped":
        return [f"{counter}:UniqueNCCLID:{i}" for i in range(nroots)]
    raise UsageError(f"unknown init mode '{mode}'")


def fingerprint(uid: bytes) -> str:
    """A short, stable fingerprint of a unique ID (8 hex digits)."""
    return hashlib.blake2b(uid, digest_size=4).hexdigest()


@dataclass
class IdExchange:
    """What one rank did and saw in one init: the evidence for a later diagnosis."""

    mode: str
    counter: int
    rank: int
    nroots: int
    keys: list[str]
    ids: list[bytes] = field(repr=False, default_factory=list)
    fingerprints: list[str] = field(default_factory=list)  # as read, in root order
    published_root: int = -1  # root number this rank published for, or -1
    published: str = ""  # fingerprint of the ID this rank published
    seconds: float = 0.0
    namespace: str = ""  # the store prefix of `keys`

    def store_key(self) -> str | None:
        """The full key this rank published under, or None (not a root)."""
        return f"{self.namespace}/{self.keys[self.published_root]}" if self.published_root >= 0 else None

    def evidence(self) -> dict:
        return {"mode": self.mode, "counter": self.counter, "rank": self.rank,
                "keys": self.keys, "fingerprints": self.fingerprints,
                "published_root": self.published_root, "published": self.published,
                "exchange_s": self.seconds, "namespace": self.namespace}


def exchange_ids(store, namespace: str, mode: str, rank: int, nranks: int, ranks_per_root: int,
                 counter: int, new_id: Callable[[], bytes], deadline: Deadline) -> IdExchange:
    """Publish (if root) and read the IDs of one init through the raw TCPStore `store`."""
    t0 = time.perf_counter()
    nroots = 1 if mode == "regular" else num_roots(nranks, ranks_per_root)
    keys = id_keys(mode, counter, nroots)
    full = [f"{namespace}/{k}" for k in keys]
    me = 0 if (mode == "regular" and rank == 0) else (
        -1 if mode == "regular" else root_index(rank, nranks, nroots))
    ex = IdExchange(mode, counter, rank, nroots, keys, published_root=me, namespace=namespace)
    if me >= 0:
        uid = new_id()
        store.set(full[me], uid)
        ex.published = fingerprint(uid)
    try:
        store.wait(full, timedelta(seconds=max(deadline.remaining(), 0.001)))
    except Exception as e:  # TCPStore raises DistStoreError / RuntimeError on timeout
        missing = [k for k in full if not store.check([k])]
        raise DeadlineExceeded("id-exchange", "store wait timed out",
                               f"keys never published: {', '.join(missing) or '?'} ({e.__class__.__name__})")
    ex.ids = [bytes(v) for v in store.multi_get(full)]
    ex.fingerprints = [fingerprint(v) for v in ex.ids]
    ex.seconds = time.perf_counter() - t0
    return ex


def exchange_for(plan, new_id: Callable[[], bytes], deadline: Deadline) -> IdExchange:
    """The exchange of one InitPlan (nccl_bench.comm.base), in its scenario's key layout."""
    if plan.group is None:  # restart: one namespace, the run's counter
        return exchange_ids(plan.store.raw, plan.namespace, plan.mode, plan.rank, plan.nranks,
                            plan.ranks_per_root, plan.counter, new_id, deadline)
    layout = key_layout(plan.mode, plan.nranks, plan.ranks_per_root)
    ex = exchange_ids(plan.store.raw, plan.group.namespace(plan.namespace), layout, plan.rank, plan.nranks,
                      plan.ranks_per_root, plan.group.index, new_id, deadline)
    ex.mode, ex.counter = plan.mode, plan.counter  # the evidence speaks of the run's mode and round
    return ex
