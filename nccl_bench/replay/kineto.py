"""PyTorch profiler (Kineto) traces, one JSON per rank, into a Workload.

NCCL's process groups record each collective as a CPU event `record_param_comms` whose args carry
"Collective name", "In msg nelems", "Out msg nelems", "dtype", "Process Group Name", "Process Group
Description" and "Process Group Ranks" (a string, "[0, 1]"); the NCCL kernel the call launched carries
the same args on the GPU side, with its duration. The sequence is read from the CPU events in time
order; each call's duration is the i-th kernel of the same group and collective name, where the trace
has kernels. The rank is the trace's `distributedInfo.rank`; its groups, `distributedInfo.pg_config`.

Two more facts per call, from the kernels: its time once the last of its ranks had started it (the
call's end less the latest start over the group's ranks: a job's NCCL kernel also waits for its late
peers, which a replay lined up by a barrier does not), taken where the traces come from one node (one
clock: the world fits the GPUs a trace lists); and the share of its time that other kernels ran beside
it on the GPU (the job's compute competing with its communication, which a replay does not have).
"""
from __future__ import annotations

import ast
import bisect
from dataclasses import replace
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.measure import collectives
from nccl_bench.replay.capped_read import ReadBudget, load_json, read_capped
from nccl_bench.replay.workload import P2P, Group, Op, Workload
from nccl_bench.replay.frdump import COALESCED, DTYPES, ELEMENTS_MAX, MAX_ENTRIES_ALL, NAMES
from nccl_bench.replay.frgroups import MAX_RANKS, ranks_list
from nccl_bench.replay.groupnames import Listed, joined
from nccl_bench.replay.readytimes import ready_times

EVENT = "record_param_comms"
NCCL_KERNEL = ("ncclDevKernel", "ncclKernel")  # how NCCL names its kernels (2.19 on: ncclDevKernel_...)


def is_trace(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)


def load_trace(path: Path, budget: ReadBudget | None = None) -> dict:
    doc = load_json(path, read_capped(path, budget=budget), "a profiler trace")
    if not is_trace(doc):
        raise UsageError(f"{path}: not a profiler trace (no traceEvents)")
    return doc


def _call(args: dict) -> tuple[str | None, str]:
    raw = str(args.get("Collective name") or "").lstrip("_")
    base = raw[:-len(COALESCED)] if raw.endswith(COALESCED) else raw
    return NAMES.get(base), raw


def read(paths: list[Path]) -> Workload:
    """Every rank's trace, one file at a time (each is let go once its calls are read)."""
    groups: dict[str, Group] = {}
    said: dict[str, tuple[list[int], int]] = {}
    wl = Workload(nranks=0, groups=groups, ranks={}, source="profiler trace", files=[])
    spans: dict[int, list] = {}  # rank -> each call's kernel (start, end), in its sequence's order
    first_file: dict[int, Path] = {}
    listed: Listed = {}  # rank -> the groups its trace lists, in the order it made them
    gpus = calls = 0
    budget = ReadBudget(paths)
    for p in paths:
        doc = load_trace(p, budget)
        info = doc.get("distributedInfo") or {}
        r = info.get("rank")
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise UsageError(f"{p}: a profiler trace without distributedInfo.rank (not a distributed job's)")
        if r in first_file:
            raise UsageError(f"{p}: a second trace of rank {r} (the first: {first_file[r]})")
        first_file[r] = p
        wl.origin[r] = str(p)
        wl.files.append(str(p))
        wl.nranks = max(wl.nranks, _int(info.get("world_size"), p, "distributedInfo.world_size"), r + 1)
        listed[r] = []
        for cfg in info.get("pg_config") or []:
            if not isinstance(cfg, dict):
                raise UsageError(f"{p}: distributedInfo.pg_config holds {type(cfg).__name__}, not a group")
            name, ranks, desc = str(cfg.get("pg_name")), ranks_list(cfg.get("ranks")), str(cfg.get("pg_desc") or "")
            _group(groups, said, p, r, name, ranks, desc)
            if ranks:
                listed[r].append((name, tuple(ranks), desc))
        try:
            wl.ranks[r], spans[r] = _rank_calls(wl, groups, said, p, r, doc)
        except (TypeError, ValueError, KeyError, AttributeError) as e:  # an event's fields not what a trace has
            raise UsageError(f"{p}: an event of the trace does not read ({type(e).__name__}: {str(e)[:80]})") from None
        calls += len(wl.ranks[r])
        if calls > MAX_ENTRIES_ALL:  # as the dumps' entries together
            raise UsageError(f"{p}: the traces hold more than {MAX_ENTRIES_ALL} calls together: replay a step's "
                             "traces, not a whole run's")
        gpus = max(gpus, len(doc.get("deviceProperties") or []))
        del doc
    wl.files.sort()
    rename, joins = joined(listed)
    wl.notes += joins
    wl.ranks = {r: [replace(op, group=rename.get(op.group, op.group)) for op in ops] for r, ops in wl.ranks.items()}
    for name in rename:
        groups.pop(name, None)
    if not any(wl.ranks.values()):
        raise UsageError(f"{paths[0]}: the profiler trace holds no NCCL collective ({EVENT} events)")
    if 0 < wl.nranks <= gpus and len(first_file) == wl.nranks:  # one node: one clock for every trace
        ready_times(wl, spans)
    else:
        wl.notes.append("ready times not taken: the traces may come from several nodes (several clocks)")
    wl.groups = {k: g for k, g in groups.items() if any(op.group == k for ops in wl.ranks.values() for op in ops)}
    if 0 < gpus < wl.nranks:  # more ranks than a node's GPUs (each trace lists its node's): several nodes
        wl.place(gpus, f"{wl.nranks} ranks and {gpus} GPUs a node in the traces, ranks placed in order")
    _split_tables(wl)
    return wl


def _split_row(args: dict, in_n: int, where: str) -> tuple[int, ...] | None:
    """An all_to_all's "In split size" (what this rank sends each peer) where it is recorded and uneven, in
    elements. PyTorch records splits in slices of the tensor's first dimension (a [tokens, hidden] tensor's rows),
    so each is that many times the elements of a slice, which the message's element count over the splits' sum
    gives; a table that is not whole numbers, is negative or does not divide the message is bad input, named."""
    value = args.get("In split size")  # a list of counts, as a list or its string
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value) if len(value) < 1 << 16 else None
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            value = None
    if not (isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise UsageError(f"{where}: its In split size is not a list of whole numbers")
    if not value:  # even splits: PyTorch records none
        return None
    if any(v < 0 for v in value):
        raise UsageError(f"{where}: its In split size {list(value)[:8]} holds a negative split")
    total = sum(value)
    if total == 0 or in_n % total or max(value) > ELEMENTS_MAX:
        raise UsageError(f"{where}: its In split size sums to {total}, which does not divide its In msg nelems "
                         f"{in_n} into slices of the tensor's first dimension")
    per_slice = in_n // total
    return tuple(v * per_slice for v in value) if len(set(value)) > 1 else None


def _split_tables(wl: Workload) -> None:
    """Each uneven all_to_all's whole table from its members' rows (the call is the same n-th all_to_all of
    the group on every rank); where a member's row is not there, the call is left out on every member."""
    rows: dict[tuple, dict[int, tuple]] = {}
    for r, ops in wl.ranks.items():
        for op in ops:
            if op.splits is not None:
                rows.setdefault((op.group, op.seq), {})[r] = op.splits[0]
    for r, ops in wl.ranks.items():
        keep = []
        for op in ops:
            if op.collective == "alltoall" and (op.group, op.seq) in rows:
                g = wl.groups[op.group].ranks
                got = rows[(op.group, op.seq)]
                if r in got and len(got[r]) != len(g):
                    raise UsageError(f"{wl.files[0] if wl.files else 'the traces'}: rank {r}'s {op.name}: its In split "
                                     f"size has {len(got[r])} entries for a group of {len(g)}")
                if not all(m in got and len(got[m]) == len(g) for m in g):
                    wl.skipped.append(f"rank {r}: {op.name}: an all_to_all with uneven splits whose every "
                                      "member's splits are not in the traces")
                    continue
                op = replace(op, splits=tuple(got[m] for m in g))
            keep.append(op)
        wl.ranks[r] = keep


def _int(value, path: Path, name: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UsageError(f"{path}: {name} is {value!r}, not a count")
    return value


def _rank_calls(wl: Workload, groups, said, p: Path, r: int, doc: dict) -> tuple[list[Op], list]:
    """One rank's calls in order, each matched with its kernel (the job's time), and the kernels' spans."""
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and isinstance(e.get("args"), dict)
              and "Collective name" in e["args"]]
    cpu = sorted((e for e in events if e.get("name") == EVENT), key=lambda e: e.get("ts", 0))
    kernels, by_id, untagged, busy = _kernels(doc, events)
    used: dict[tuple, int] = {}
    ops, spans, cpu_ts = [], [], []
    run: list[int] = []  # the transfers since the last other event: one batch (batch_isend_irecv) where several
    batches = 0
    for e in cpu:
        a = e["args"]
        key = str(a.get("Process Group Name", ""))
        _group(groups, said, p, r, key, ranks_list(a.get("Process Group Ranks")),
               str(a.get("Process Group Description") or ""))
        name, raw = _call(a)
        if name is None or name not in P2P or (run and ops[run[-1]].group != key):
            batches += _close(ops, run, batches)
        if raw == "wait":  # a work's wait(): not a call
            continue
        if name is None:
            wl.skipped.append(f"rank {r}: {raw or '(unnamed)'}: no replay for this call from a profiler trace")
            continue
        dtype = DTYPES.get(str(a.get("dtype")))
        if dtype is None:
            wl.skipped.append(f"rank {r}: {raw}: dtype {a.get('dtype')} has no replay")
            continue
        in_n, out_n = int(a.get("In msg nelems") or 0), int(a.get("Out msg nelems") or 0)
        if raw.startswith("barrier"):
            in_n = out_n = 1
        i = used[_key(a)] = used.get(_key(a), -1) + 1
        span = by_id.get(a.get("External id")) if by_id else None
        if span is None and not by_id:  # an older trace: the i-th kernel of the same group and call
            k = kernels.get(_key(a), [])
            span = _span(k[i]) if i < len(k) else None
        row = _split_row(a, in_n, f"{p}: {raw} (call {len(ops) + 1})") if name == "alltoall" else None
        # "Rank" is the root of a rooted call and the other end of a transfer, in group ranks
        other = _rank_arg(a, "Dst Rank" if name == "send" else "Src Rank" if name == "recv" else "Rank")
        if name in P2P:
            in_n, out_n = (in_n, 0) if name == "send" else (0, out_n or in_n)
            run.append(len(ops))
        cpu_ts.append(float(e.get("ts", 0)))
        ops.append(Op(name, key, in_n, out_n, dtype, name=raw, seq=i, root=other if _rooted(name) and other else 0,
                      peer=other if name in P2P else None,
                      duration_us=span[1] - span[0] if span else None,
                      overlap=_overlapped(busy, *span) if span else None, splits=(row,) if row else None))
        spans.append(span)
    _close(ops, run, batches)
    _transfer_spans(ops, spans, cpu_ts, untagged, busy)
    return ops, spans


def _transfer_spans(ops: list[Op], spans: list, cpu_ts: list[float], untagged: list[dict], busy) -> None:
    """Each batch, and each lone transfer, with no kernel of its own gets the next untagged NCCL kernel that started
    after it was called: a batch_isend_irecv is one NCCL group, launched as one kernel when the group ends."""
    k, i = 0, 0
    while i < len(ops):
        j = i + 1
        if ops[i].batch is not None:
            while j < len(ops) and ops[j].batch == ops[i].batch and ops[j].group == ops[i].group:
                j += 1
        if ops[i].collective in P2P and all(spans[x] is None for x in range(i, j)):
            while k < len(untagged) and float(untagged[k]["ts"]) < cpu_ts[i]:
                k += 1
            if k < len(untagged):
                span = _span(untagged[k])
                k += 1
                for x in range(i, j):
                    spans[x] = span
                    ops[x] = replace(ops[x], duration_us=span[1] - span[0], overlap=_overlapped(busy, *span))
        i = j


def _kernels(doc: dict, events: list[dict]):
    """The trace's kernels as the calls need them: (the kernels of each group and call, in order; each call's span
    by its "External id", which its kernels carry; NCCL's kernels that carry no call's tag; what else ran)."""
    kernels: dict[tuple, list[dict]] = {}
    by_id: dict[int, tuple[float, float]] = {}
    for k in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e.get("ts", 0)):
        kernels.setdefault(_key(k["args"]), []).append(k)
        if isinstance(k["args"].get("External id"), int):
            a, b = _span(k)
            got = by_id.get(k["args"]["External id"])
            by_id[k["args"]["External id"]] = (a, b) if got is None else (min(got[0], a), max(got[1], b))
    every = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"
             and isinstance(e.get("args"), dict) and "Collective name" not in e["args"]]
    # NCCL's own kernels with no call's tag: the transfers of a batch (batch_isend_irecv), launched at the group's
    # end, outside any call's record; they are the batch's time, not compute beside it
    untagged = sorted((e for e in every if str(e.get("name", "")).startswith(NCCL_KERNEL)), key=lambda e: e["ts"])
    busy = _union([_span(e) for e in every if not str(e.get("name", "")).startswith(NCCL_KERNEL)])
    return kernels, by_id, untagged, busy


def _span(kernel: dict) -> tuple[float, float]:
    return float(kernel["ts"]), float(kernel["ts"]) + float(kernel.get("dur", 0))


def _close(ops: list[Op], run: list[int], number: int) -> int:
    """Several transfers of one group with no other event between them were launched together (a batch_isend_irecv):
    mark them one batch. Empties `run`; 1 where a batch was made."""
    made = len(run) > 1
    if made:
        for i in run:
            ops[i] = replace(ops[i], batch=number)
    run.clear()
    return int(made)


def _rooted(name: str) -> bool:
    return name in collectives.REGISTRY and collectives.REGISTRY[name].rooted


def _rank_arg(args: dict, field: str) -> int | None:
    v = args.get(field, args.get("Rank"))
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_RANKS else None


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _overlapped(busy: list[tuple[float, float]], a: float, b: float) -> float:
    """The share of [a, b] covered by `busy` (sorted, disjoint)."""
    if b <= a:
        return 0.0
    i, covered = max(bisect.bisect_left(busy, (a, a)) - 1, 0), 0.0
    while i < len(busy) and busy[i][0] < b:
        covered += max(0.0, min(b, busy[i][1]) - max(a, busy[i][0]))
        i += 1
    return covered / (b - a)


def _key(args: dict) -> tuple:
    return (str(args.get("Process Group Name", "")), str(args.get("Collective name", "")))


def _group(groups, said, path, rank, key, ranks, desc) -> None:
    if not ranks:
        return
    if key in said and said[key][0] != ranks:
        raise UsageError(f"{path}: group {key} has ranks {ranks}, but rank {said[key][1]}'s trace says "
                         f"{said[key][0]}: the traces disagree on a group")
    said.setdefault(key, (ranks, rank))
    groups.setdefault(key, Group(key, tuple(ranks), desc))
