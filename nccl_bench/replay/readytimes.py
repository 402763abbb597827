"""The ready time of each call from its kernels: its time once every rank it waited for had started, so that a
late peer's wait is not the call's cost. One measure for both sides: the job's, from a profiler trace of one node
(ready_times), and the replay's, from the kernels of its profiled passes (replay.rows). Spans are each call's
kernel (start, end) in microseconds on the node's one clock, None where none. Also the holds that start the
replay's kernels in the job's order of arrival (arrival_holds)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from nccl_bench.replay.workload import P2P, Workload

At = tuple[int, int]  # (global rank, index of the call in its sequence)
Batches = dict[int, dict[tuple, list[int]]]  # rank -> (group, batch number) -> the indices of its transfers


def call_instances(wl: Workload) -> dict[tuple, list[At]]:
    """Each call of the job across its ranks: the j-th call of a group, collective and size on each of its ranks; an
    uneven all_to_all (a size of its own on each rank) the j-th uneven one of its group; a transfer its two ends, a
    send's j-th matched with its peer's j-th receive of that size."""
    nth: dict[tuple, list[At]] = {}
    for r, ops in wl.ranks.items():
        seen: dict[tuple, int] = {}
        for i, op in enumerate(ops):
            k = (op.group, op.collective) + (("uneven",) if op.splits is not None else (op.in_count, op.out_count))
            if op.collective in P2P and op.peer is not None:
                me = wl.groups[op.group].ranks.index(r)
                way = (me, op.peer) if op.collective == "send" else (op.peer, me)  # from, to: a batch may hold both
                k = (op.group, "p2p", way, op.in_count + op.out_count)
            j = seen[k] = seen.get(k, -1) + 1
            nth.setdefault((*k, j), []).append((r, i))
    return nth


def _complete(wl: Workload, spans: dict[int, list], k: tuple, at: list[At]) -> bool:
    """Every member of the call seen, each with its kernel: a transfer's two ends, or the whole group."""
    members = 2 if k[1] == "p2p" else len(wl.groups[k[0]].ranks)
    return len(at) == members and all(spans[r][i] is not None for r, i in at)


@dataclass
class Transfers:
    """The kernels that transfers join: each receive's sender, and the sets of kernels joined that way (a lone
    transfer's two ends; every rank's kernel of one ring hop), with each set's ready time."""

    sender: dict[At, At] = field(default_factory=dict)  # a receive -> its matched send
    sets: dict[tuple, list[At]] = field(default_factory=dict)  # a set's root kernel -> its transfers' (rank, index)
    set_of: dict[At, tuple] = field(default_factory=dict)  # a transfer -> its set's root kernel
    ready: dict[tuple, float] = field(default_factory=dict)  # a set's root kernel -> its ready time


def transfers(wl: Workload, spans: dict[int, list], nth: dict[tuple, list[At]]) -> Transfers:
    """Per set of kernels that transfers join, as replay times them, its ready time: every kernel from the moment it
    and every kernel sending to it had started (NCCL's sender writes into the receiver's buffer without waiting for
    it, up to the buffer's size, so a send may end before its receiver starts), the slowest of them. A kernel is a
    rank's span: the transfers of one batch share their rank's one kernel."""
    t = Transfers()
    for k, at in nth.items():
        if k[1] == "p2p" and _complete(wl, spans, k, at):
            (a, i), (b, j) = at if wl.ranks[at[0][0]][at[0][1]].collective == "recv" else at[::-1]
            t.sender[(a, i)] = (b, j)
    kernel = {x: (x[0], tuple(spans[x[0]][x[1]])) for pair in t.sender.items() for x in pair}
    joined = {k: k for k in kernel.values()}

    def root(k):
        while joined[k] != k:
            joined[k] = joined[joined[k]]
            k = joined[k]
        return k
    starts: dict[tuple, list[float]] = {}  # a receiving kernel: its start and its senders'
    for recv, send in t.sender.items():
        joined[root(kernel[recv])] = root(kernel[send])
        starts.setdefault(kernel[recv], [kernel[recv][1][0]]).append(kernel[send][1][0])
    for k, s in starts.items():
        t.ready[root(k)] = max(t.ready.get(root(k), 0.0), k[1][1] - max(s))
    for x, k in kernel.items():
        t.set_of[x] = root(k)
        t.sets.setdefault(root(k), []).append(x)
    return t


def ready_of(wl: Workload, spans: dict[int, list], nth: dict[tuple, list[At]] | None = None,
             joined: Transfers | None = None) -> dict[At, float]:
    """Each call's ready time on each of its ranks: its last end less its latest start over its group's ranks, the
    same on each of them (the last end, not each rank's: a rooted call's senders may finish before the last rank
    starts; an uneven all_to_all's, the whole call's, on every rank's share); a transfer's, its set's (transfers)."""
    nth = call_instances(wl) if nth is None else nth
    joined = transfers(wl, spans, nth) if joined is None else joined
    out: dict[At, float] = {}
    for k, at in nth.items():
        if not _complete(wl, spans, k, at):
            continue
        if k[1] == "p2p":
            ready = joined.ready.get(joined.set_of.get(at[0]))
            if ready is None:
                continue
        else:
            ready = max(max(spans[r][i][1] for r, i in at) - max(spans[r][i][0] for r, i in at), 0.0)
        out.update((x, ready) for x in at)
    return out


def ready_times(wl: Workload, spans: dict[int, list]) -> None:
    """The job's ready time of each call in a profiler trace of one node (Op.ready_us), then its holds."""
    nth = call_instances(wl)
    joined = transfers(wl, spans, nth)
    for (r, i), ready in ready_of(wl, spans, nth, joined).items():
        wl.ranks[r][i] = replace(wl.ranks[r][i], ready_us=ready)
    arrival_holds(wl, spans, nth, joined)


HOLD_FLOOR_US = 10.0  # a lead this far past the call's own time starts it as any longer lead would
HOLD_MAX_US = 2000.0  # and no hold is longer: a profiled pass stays bounded whatever the job's waits


def arrival_holds(wl: Workload, spans: dict[int, list], nth: dict[tuple, list[At]], joined: Transfers) -> None:
    """Each call's ranks the job's order of arrival: each rank holds back by how much later than the call's first
    rank its kernel started in the job (hold_us; 0 for the first). A call's ready time depends on it, as it is
    taken from the last rank's start: NCCL's sender writes into its receiver's buffer without waiting for it, so
    a late receiver finds its data there and ends soon after it starts, where one that waited ends a whole
    transfer after its sender started; a rooted call's root, come last, finds its peers' data there. Each gap
    between successive arrivals is capped past twice the call's ready time (HOLD_FLOOR_US beyond), where a longer
    one starts it the same way: the order is kept, the pass bounded. A batch's transfers are held as one with the
    batches they join (_batch_set). Not held: an uneven all_to_all (its rounds are several kernels a rank)."""
    for k, at in nth.items():
        if any(spans[r][i] is None for r, i in at):
            continue
        ops = [wl.ranks[r][i] for r, i in at]
        if any(op.batch is not None or op.splits is not None for op in ops) or ops[0].ready_us is None:
            continue
        _hold(wl, {r: [i] for r, i in at}, {r: spans[r][i][0] for r, i in at}, ops[0].ready_us)
    batches: Batches = {}
    for r, ops in wl.ranks.items():
        for i, op in enumerate(ops):
            if op.batch is not None:
                batches.setdefault(r, {}).setdefault((op.group, op.batch), []).append(i)
    for root, members in joined.sets.items():
        launch = _batch_set(wl, members, batches)
        if launch is not None:
            _hold(wl, launch, {r: spans[r][ix[0]][0] for r, ix in launch.items()}, joined.ready[root])


def _hold(wl: Workload, launch: dict[int, list[int]], start: dict[int, float], ready: float) -> None:
    """Each rank's calls `launch[r]` held by its lead in arrival order (`start`), each gap capped."""
    cap = min(2 * ready + HOLD_FLOOR_US, HOLD_MAX_US)
    held, last = 0.0, None
    for at, r in sorted((at, r) for r, at in start.items()):
        held = 0.0 if last is None else min(held + min(at - last, cap), HOLD_MAX_US)
        for i in launch[r]:
            wl.ranks[r][i] = replace(wl.ranks[r][i], hold_us=held)
        last = at


def _batch_set(wl: Workload, members: list[At], batches: Batches) -> dict[int, list[int]] | None:
    """The batches (batch_isend_irecv) that transfers join into one set, as rank -> the indices of its one batch:
    each rank lines up with every peer of its batch (replay.worker.Call), so the set is held only where those
    line-ups meet: every member a batch's, one batch a rank, each batch whole in the set. Else None."""
    ops = {x: wl.ranks[x[0]][x[1]] for x in members}
    if any(op.batch is None for op in ops.values()):
        return None
    batch: dict[int, set] = {}
    for (r, _), op in ops.items():
        batch.setdefault(r, set()).add((op.group, op.batch))
    if any(len(b) != 1 for b in batch.values()):
        return None
    launch = {r: batches[r][next(iter(b))] for r, b in batch.items()}
    return launch if all((r, i) in ops for r, ix in launch.items() for i in ix) else None
