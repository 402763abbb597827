"""How successive communicators come about: a restart per init, or many inside one process group.

- `restart`: every init is a new process group on the same store (a job restarted, or
  init_process_group / destroy_process_group in a loop). The torch backend makes a new
  default group per round; nccl and gloo exchange IDs in one namespace with the run's counter.
- `same-group`: pytorch#178473's own repro. ONE process group makes a new communicator per
  round, as ProcessGroupNCCL does when a collective runs on a device it has no communicator
  for (the seed: `device = (rank + round) % world`). Inside one group PyTorch 2.11 keys
    - the broadcast path (scalable init off: ranks per root >= world size) by its per-group
      comm counter, `<group prefix>/<ncclCommCounter_>`: fresh for every communicator;
    - the scalable path (world size > TORCH_NCCL_RANKS_PER_ROOT) as `<group prefix>/UniqueNCCLID:<root>`
      with no counter: the same keys for every communicator of the group, so a rank that
      reads before a slow root has overwritten its key uses the previous communicator's ID.
  So in one group: `stock` = the scalable path at --ranks-per-root (stale reads), `regular` =
  scalable init off (PyTorch's default 128 ranks per root, on fewer ranks), `scoped` = what a
  user can do today: TORCH_NCCL_RANKS_PER_ROOT >= world size, i.e. the broadcast path (same
  code as `regular` below 128 ranks; the fix, PR 178493, would scope the scalable keys instead).

A group ends after a failed round (a hung communicator can only be aborted with its whole
group), when the mode changes, and, on the torch backend, after one communicator per local
GPU (a group holds one communicator per device, so the seed's scheme makes as many as there
are GPUs); the next round starts a new group under a fresh store prefix, whose first
communicator's keys are new.
"""
from __future__ import annotations

from dataclasses import dataclass

from nccl_bench.core.errors import UsageError

SCENARIOS = ("restart", "same-group")


def check_scenario(name: str) -> str:
    if name not in SCENARIOS:
        raise UsageError(f"unknown --scenario '{name}' (choose from {', '.join(SCENARIOS)})")
    return name


@dataclass(frozen=True)
class GroupSlot:
    """same-group: which process group this init belongs to and its place in it."""

    generation: int  # the group's number in this run (the same on every rank)
    index: int  # communicators the group made before this one (PyTorch's ncclCommCounter_)
    last: bool  # the group ends after this communicator (destroy it with the communicator)

    def namespace(self, base: str) -> str:
        """The group's store prefix (PyTorch: `default_pg/<n>/`): new for every group."""
        return f"{base}/group{self.generation}"


def key_layout(mode: str, nranks: int, ranks_per_root: int) -> str:
    """Inside one group, PyTorch's key layout for `mode`: 'stock' (scalable, unscoped keys) or
    'regular' (the broadcast path, keyed by the per-group counter)."""
    return "stock" if mode == "stock" and nranks > ranks_per_root else "regular"


class Groups:
    """Hands out GroupSlots along a run's plan of seqs 0, 1, 2, ...; `mode_of(seq)` is the seq's init mode, None
    past the plan's end (computed, never a table: a soak's plan of 100 million rounds held as two dicts took
    gigabytes). Every rank agrees as every rank takes the same seqs and learns the same verdicts."""

    def __init__(self, mode_of, size: int | None = None):
        self.mode_of = mode_of
        self.size = size  # at most this many communicators per group (torch: local GPUs)
        self.generation, self.made, self.mode, self.open = -1, 0, None, False

    def take(self, seq: int) -> GroupSlot:
        mode = self.mode_of(seq)
        full = self.size is not None and self.made >= self.size
        if not self.open or mode != self.mode or full:
            self.generation, self.made, self.mode, self.open = self.generation + 1, 0, mode, True
        last = self.mode_of(seq + 1) != mode or (self.size is not None and self.made + 1 >= self.size)
        slot = GroupSlot(self.generation, self.made, last)
        self.made += 1
        self.open = not last
        return slot

    def finished(self, ok: bool) -> None:
        """After the round's verdict: a failed round ends its group on every rank."""
        if not ok:
            self.open = False
