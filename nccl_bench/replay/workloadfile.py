"""Our own workload format: a job's communication written by hand or generated.

    {"format": "nccl-bench-workload/1",
     "name": "FSDP step, 4 ranks, TP pairs",
     "ranks": 4,
     "groups": {"world": [0, 1, 2, 3], "tp0": [0, 1], "tp1": [2, 3], "dp0": [0, 2], "dp1": [1, 3]},
     "steps": [
       {"collective": "all_gather", "groups": ["dp0", "dp1"], "count": 1048579, "dtype": "bfloat16", "calls": 4},
       {"collective": "reduce_scatter", "groups": ["dp0", "dp1"], "count": 1048579, "dtype": "float32", "op": "avg"},
       {"collective": "all_reduce", "group": "world", "bytes": 4, "dtype": "float32", "time_us": 35.0},
       {"collective": "send/recv", "group": "tp0", "src": 0, "dst": 1, "count": 1000, "dtype": "float32"}
     ]}

Each step runs, in order, on every member of each group it names (`group` or `groups`), `calls` times.
Its size is nccl-tests' `count` (elements per rank the call is given: all_gather's chunk, reduce_scatter's
output, alltoall's per peer) or `bytes` (nccl-tests' size column, rounded as bench rounds it). `op` is the
reduction (default sum), `root` a group rank (default 0), `time_us` the job's own time per call where
known (the replay is judged against it). A `send/recv` step moves `count` elements from group rank `src`
to `dst`.
"""
from __future__ import annotations

import math
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.measure import collectives
from nccl_bench.measure.vocabulary import ELEMENT_BYTES, FLOATING, OPS
from nccl_bench.replay.capped_read import load_json, read_capped
from nccl_bench.replay.frdump import MAX_ENTRIES_ALL
from nccl_bench.replay.workload import SEND_RECV, Group, Op, Workload

FORMAT = "nccl-bench-workload/1"
MAX_RANKS = 4096  # a workload is one job's ranks
ELEMENTS_MAX = 1 << 40  # elements a step declares, at most
MAX_CALLS = 100_000  # per step: a workload is a step of a job, not its whole run
# calls over every rank, what the file expands to, counted before any is made: as many as every Flight Recorder dump
# of a job together (each costs its check, about 10 us, and 256 B)
MAX_OPS = MAX_ENTRIES_ALL


def is_workload(doc) -> bool:
    return isinstance(doc, dict) and doc.get("format", "").startswith("nccl-bench-workload/")


def read(path: Path, doc: dict) -> Workload:
    where = f"{path}"
    if doc.get("format") != FORMAT:
        raise UsageError(f"{where}: format {doc.get('format')!r}; this replay reads {FORMAT}")
    n = doc.get("ranks")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_RANKS:
        raise UsageError(f"{where}: 'ranks' must be a number of ranks, 1..{MAX_RANKS}")
    raw = doc.get("groups")
    if not isinstance(raw, dict) or not raw:
        raise UsageError(f"{where}: 'groups' must name each group's ranks, e.g. {{\"world\": [0, 1]}}")
    groups = {}
    for key, ranks in raw.items():
        if (not isinstance(ranks, list) or not ranks or len(set(ranks)) != len(ranks)
                or not all(isinstance(r, int) and 0 <= r < n for r in ranks)):
            raise UsageError(f"{where}: group '{key}' must list distinct ranks in 0..{n - 1}")
        groups[key] = Group(key, tuple(ranks), key)
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        raise UsageError(f"{where}: 'steps' must list the calls, in order")
    wl = Workload(nranks=n, groups=groups, ranks={r: [] for r in range(n)}, source="workload file",
                  files=[str(path)], meta={"name": doc.get("name")})
    made, total = [], 0
    for i, step in enumerate(steps):  # every step checked and what it expands to counted, before any call is made
        for key, make in _ops(where, i, step, groups):
            calls = step.get("calls", 1)
            total += calls * (2 if step.get("collective") == SEND_RECV else len(groups[key].ranks))
            if total > MAX_OPS:
                raise UsageError(f"{where}: step {i + 1} brings the workload past {MAX_OPS:,} calls over all ranks "
                                 "(a workload is one step of a job)")
            made.append((key, make, calls))
    for key, make, calls in made:  # an Op a call: readers drop calls by identity (traces.checked)
        for gr, r in enumerate(groups[key].ranks):
            if make(gr) is not None:
                wl.ranks[r] += [make(gr) for _ in range(calls)]
    return wl


def _ops(where: str, i: int, step, groups: dict):
    """(group, make) per group the step names; make(rank in group) -> that rank's Op, or None."""
    at = f"{where}: step {i + 1}"
    if not isinstance(step, dict):
        raise UsageError(f"{at}: not an object")
    name = step.get("collective")
    names = step.get("groups", [step.get("group")])
    if not isinstance(names, list) or not names or not all(k in groups for k in names):
        raise UsageError(f"{at}: 'group'/'groups' must name groups of 'groups' ({', '.join(groups)})")
    dtype = step.get("dtype", "float32")
    if dtype not in ELEMENT_BYTES:
        raise UsageError(f"{at}: dtype '{dtype}' (choose from {', '.join(ELEMENT_BYTES)})")
    calls = step.get("calls", 1)
    if not isinstance(calls, int) or not 1 <= calls <= MAX_CALLS:
        raise UsageError(f"{at}: 'calls' must be 1..{MAX_CALLS}")
    op = step.get("op")
    if op is not None and op not in OPS:
        raise UsageError(f"{at}: op '{op}' (choose from {', '.join(OPS)})")
    if op == "avg" and dtype not in FLOATING:
        raise UsageError(f"{at}: op avg needs a floating type (as bench's -o avg); dtype {dtype} is an integer type")
    t = step.get("time_us")
    if t is not None and not (isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t < math.inf):
        raise UsageError(f"{at}: 'time_us' must be a positive number of microseconds")
    elt = ELEMENT_BYTES[dtype]
    for key in names:
        g = groups[key]
        size = len(g.ranks)
        if name == SEND_RECV:
            src, dst, count = step.get("src"), step.get("dst"), _count(at, step, elt, None, size)
            if not (isinstance(src, int) and isinstance(dst, int) and src != dst and 0 <= src < size
                    and 0 <= dst < size):
                raise UsageError(f"{at}: send/recv needs 'src' and 'dst', two group ranks of '{key}'")
            yield key, (lambda gr, src=src, dst=dst, count=count, key=key:
                        Op("send", key, count, 0, dtype, peer=dst, duration_us=t) if gr == src else
                        Op("recv", key, 0, count, dtype, peer=src, duration_us=t) if gr == dst else None)
            continue
        if name not in collectives.REGISTRY or collectives.REGISTRY[name].by_count is None:
            able = [c for c, rec in collectives.REGISTRY.items() if rec.by_count is not None]
            raise UsageError(f"{at}: collective '{name}' (choose from {', '.join(able)}, {SEND_RECV})")
        coll = collectives.REGISTRY[name]
        lay = coll.by_count(_count(at, step, elt, coll, size), elt, size, 0)
        root = step.get("root", 0)
        if not isinstance(root, int) or not 0 <= root < size:
            raise UsageError(f"{at}: 'root' must be a group rank of '{key}' (0..{size - 1})")
        yield key, (lambda gr, lay=lay, key=key, root=root:
                    Op(name, key, lay.send, lay.recv, dtype, op=op, root=root, duration_us=t))


def _count(at: str, step: dict, elt: int, coll, size: int) -> int:
    if ("count" in step) == ("bytes" in step):
        raise UsageError(f"{at}: give 'count' (elements) or 'bytes', one of them")
    if "count" in step:
        count = step["count"]
    else:
        nbytes = step["bytes"]
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or not 1 <= nbytes <= ELEMENTS_MAX:
            raise UsageError(f"{at}: 'bytes' must be a whole number of bytes, 1..{ELEMENTS_MAX}")
        count = coll.layout(nbytes, elt, size, 0).count if coll is not None else nbytes // elt
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= ELEMENTS_MAX:
        raise UsageError(f"{at}: the size comes to {count!r} elements; it must be 1..{ELEMENTS_MAX}")
    return count


def load(path: Path) -> Workload:
    return read(path, load_json(path, read_capped(path), "a workload file"))
