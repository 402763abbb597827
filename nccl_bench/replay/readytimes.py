"""The job's ready time of each call in a profiler trace of one node: its kernels' time once every rank it waited
for had started, so that a late peer's wait is not the call's cost (the replay times its own kernels the same
way). Spans are each call's kernel (start, end) in microseconds on the node's one clock, None where none."""
from __future__ import annotations

from dataclasses import replace

from nccl_bench.replay.workload import P2P, Workload


def ready_times(wl: Workload, spans: dict[int, list]) -> None:
    """Each call's ready time: its last end less its latest start over its group's ranks (the j-th call of that
    group, collective and size on each), the same on each of them. The last end, not each rank's: a rooted call's
    senders may finish before the last rank starts. A transfer's is its batch's (below)."""
    nth: dict[tuple, list[tuple[int, int]]] = {}
    for r, ops in wl.ranks.items():
        seen: dict[tuple, int] = {}
        for i, op in enumerate(ops):
            # an uneven all_to_all has a different size on each rank: the j-th uneven one of the group is one call
            k = (op.group, op.collective) + (("uneven",) if op.splits is not None else (op.in_count, op.out_count))
            if op.collective in P2P and op.peer is not None:  # a send's j-th is its peer's j-th receive of its size
                me = wl.groups[op.group].ranks.index(r)
                way = (me, op.peer) if op.collective == "send" else (op.peer, me)  # from, to: a batch may hold both
                k = (op.group, "p2p", way, op.in_count + op.out_count)
            j = seen[k] = seen.get(k, -1) + 1
            nth.setdefault((*k, j), []).append((r, i))
    received = _receivers_ready(wl, spans, nth)
    for k, at in nth.items():
        members = 2 if k[1] == "p2p" else len(wl.groups[k[0]].ranks)  # a transfer's two ends, or the group
        if len(at) != members or any(spans[r][i] is None for r, i in at):
            continue
        if k[1] == "p2p":
            ready = received.get(at[0])
        else:
            ready = max(max(spans[r][i][1] for r, i in at) - max(spans[r][i][0] for r, i in at), 0.0)
        for r, i in at:
            wl.ranks[r][i] = replace(wl.ranks[r][i], ready_us=ready)
    arrival_holds(wl, spans, nth)


HOLD_FLOOR_US = 10.0  # a lead this far past the call's own time starts it as any longer lead would
HOLD_MAX_US = 2000.0  # and no hold is longer: a profiled pass stays bounded whatever the job's waits


def arrival_holds(wl: Workload, spans: dict[int, list], nth: dict[tuple, list]) -> None:
    """Each call's ranks the job's order of arrival: each rank holds back by how much later than the call's first
    rank its kernel started in the job (hold_us; 0 for the first). A call's ready time depends on it, as it is
    taken from the last rank's start: NCCL's sender writes into its receiver's buffer without waiting for it, so
    a late receiver finds its data there and ends soon after it starts, where one that waited ends a whole
    transfer after its sender started; a rooted call's root, come last, finds its peers' data there. Each gap
    between successive arrivals is capped past twice the call's ready time (HOLD_FLOOR_US beyond), where a longer
    one starts it the same way: the order is kept, the pass bounded. An uneven all_to_all's ranks line up and
    start together (hold 0): each rank's row is its own share, timed by its own kernel alone, which a peer's hold
    would be in. A batch's transfers are not held: its kernels start as its ranks reach it."""
    for k, at in nth.items():
        if any(spans[r][i] is None for r, i in at):
            continue
        ops = [wl.ranks[r][i] for r, i in at]
        if any(op.batch is not None for op in ops) or ops[0].ready_us is None:
            continue
        if any(op.splits is not None for op in ops):
            for r, i in at:
                wl.ranks[r][i] = replace(wl.ranks[r][i], hold_us=0.0)
            continue
        cap = min(2 * ops[0].ready_us + HOLD_FLOOR_US, HOLD_MAX_US)
        held, last = 0.0, None
        for start, r, i in sorted((spans[r][i][0], r, i) for r, i in at):
            held = 0.0 if last is None else min(held + min(start - last, cap), HOLD_MAX_US)
            wl.ranks[r][i], last = replace(wl.ranks[r][i], hold_us=held), start


def _receivers_ready(wl: Workload, spans: dict[int, list], nth: dict[tuple, list]) -> dict[tuple[int, int], float]:
    """Per transfer, the ready time of the kernels it ran in, as replay times them: every rank's kernel of one
    batch (a ring's hop: each rank sends to the next and receives from the previous in one kernel) or of a lone
    transfer's two ends, each kernel from the moment it and every kernel sending to it had started (NCCL's sender
    writes into the receiver's buffer without waiting for it, up to the buffer's size, so a send may end before
    its receiver starts), the slowest of them."""
    sender: dict[tuple[int, int], tuple[int, int]] = {}
    for k, at in nth.items():
        if k[1] == "p2p" and len(at) == 2 and all(spans[r][i] is not None for r, i in at):
            (a, i), (b, j) = at if wl.ranks[at[0][0]][at[0][1]].collective == "recv" else at[::-1]
            sender[(a, i)] = (b, j)
    kernel = {x: (x[0], spans[x[0]][x[1]]) for pair in sender.items() for x in pair}  # a call's (rank, span)
    joined = {k: k for k in kernel.values()}

    def root(k):
        while joined[k] != k:
            joined[k] = joined[joined[k]]
            k = joined[k]
        return k
    starts: dict[tuple, list[float]] = {}  # a receiving kernel: its start and its senders'
    for recv, send in sender.items():
        joined[root(kernel[recv])] = root(kernel[send])
        starts.setdefault(kernel[recv], [kernel[recv][1][0]]).append(kernel[send][1][0])
    slowest: dict[tuple, float] = {}
    for k, s in starts.items():
        slowest[root(k)] = max(slowest.get(root(k), 0.0), k[1][1] - max(s))
    return {x: slowest.get(root(k), 0.0) for x, k in kernel.items()}
