"""A job across its Flight Recorder dumps (nccl_bench.replay.frdump reads each one): the groups (from
pg_config, else from who holds them), the window of calls every member holds, where a hung job stopped, and
the calls whose record differs between ranks made whole from the group's records."""
from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.replay.workload import Group, Op, Workload

MAX_RANKS = 4096  # a rank number (in a file's name, or a group's) above this is not one job's


def ranks_list(value) -> list[int] | None:
    if isinstance(value, str):
        if len(value) > 16 * MAX_RANKS:
            return None
        try:
            value = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return None
    if (isinstance(value, (list, tuple)) and len(value) <= MAX_RANKS
            and all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < MAX_RANKS for r in value)
            and len(set(value)) == len(value)):
        return list(value)
    return None


def show(v) -> str:
    """An untrusted value, shown in a line without walking it (a 100,000-deep list has no printable form)."""
    if isinstance(v, (list, tuple, dict)):
        return f"a {type(v).__name__} of {len(v)}"
    try:
        return repr(v)[:40]
    except ValueError:  # an integer too long to print
        return f"a {type(v).__name__}"


def configs_of(p: Path, r: int, doc: dict, configs: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """The groups this rank's dump lists with their ranks, into `configs` (checked against the other dumps'), and
    returned as (name, ranks, desc) in the order the rank made them."""
    pg_config = doc.get("pg_config") or {}
    listed = []
    if not isinstance(pg_config, dict):
        raise UsageError(f"{p}: 'pg_config' is {type(pg_config).__name__}, not the job's groups")
    for key, cfg in pg_config.items():
        raw = cfg.get("ranks") if isinstance(cfg, dict) else None
        if raw in (None, "", "[]", []):
            continue  # gloo leaves it empty: the group's ranks are its holders
        ranks = ranks_list(raw)
        if ranks is None:
            raise UsageError(f"{p}: pg_config group {show(key)}: 'ranks' is {show(raw)}, not distinct ranks "
                             f"under {MAX_RANKS}")
        seen = configs.setdefault(str(key), (ranks, r, cfg.get("desc", "")))
        if seen[0] != ranks:
            raise UsageError(f"{p}: group {key} has ranks {ranks[:16]}, but rank {seen[1]}'s dump says "
                             f"{seen[0][:16]}: the dumps disagree on a group")
        listed.append((str(key), tuple(ranks), str(cfg.get("desc") or "")))
    return listed


def workload(paths, dumps: dict, configs: dict, allow_missing: bool) -> Workload:
    held: dict[str, set[int]] = {}
    descs: dict[str, str] = {}
    for r, (_, es) in dumps.items():
        for e in es:
            held.setdefault(e["_group"], set()).add(r)
            descs.setdefault(e["_group"], e["_desc"])
    groups = {key: Group(key, tuple(configs[key][0] if key in configs else sorted(holders)), descs.get(key, ""))
              for key, holders in held.items()}
    if not groups:
        raise UsageError(f"{paths[0]}: the dumps record no collective (nothing to replay)")
    wl = Workload(nranks=max(dumps) + 1, groups=groups, ranks={}, source="flight recorder",
                  files=[str(p) for p, _ in dumps.values()], seq_aligned=True)
    missing = sorted({r for g in groups.values() for r in g.ranks} - set(dumps))
    if missing and not allow_missing:
        short = [g.label() for g in groups.values() if set(g.ranks) & set(missing)][:3]
        raise UsageError(f"{paths[0]}: no dump for rank(s) {missing[:8]}{' ...' if len(missing) > 8 else ''}, members "
                         f"of {'; '.join(short)}: give every rank's dump, or --allow-missing-ranks to replay only the "
                         "groups whose ranks all have one")
    if missing:
        wl.notes.append(f"no dump for rank(s) {missing[:8]}: the groups they belong to are left out "
                        "(--allow-missing-ranks)")
        wl.groups = {k: g for k, g in groups.items() if not set(g.ranks) & set(missing)}
    return wl


def rooted_and_split(wl: Workload) -> None:
    """Calls whose record differs between ranks, made whole from the group's records: a gather's output and a
    scatter's input are recorded on its root alone (the root is where they are; every rank gets the root's
    sizes, as nccl-tests sizes them), and an all_to_all with uneven splits is left out on every rank (the
    Flight Recorder records no split sizes; a profiler trace does)."""
    calls: dict[tuple, list[tuple[int, int]]] = {}
    for r, ops in wl.ranks.items():
        for i, op in enumerate(ops):
            if op.collective in ("gather", "scatter", "alltoall") and op.seq is not None:
                calls.setdefault((op.group, op.collective, op.seq), []).append((r, i))
    drop: set[tuple[int, int]] = set()
    for (key, coll, _), at in calls.items():
        n = len(wl.groups[key].ranks)
        mine = {r: wl.ranks[r][i] for r, i in at}
        whole, why = _made_whole(coll, mine, wl.groups[key].ranks, n)
        for r, i in at:
            if whole is None:
                drop.add((r, i))
                wl.skipped.append(f"rank {r}: {mine[r].name}: {why}")
            else:
                wl.ranks[r][i] = whole[r]
    for r in wl.ranks:
        wl.ranks[r] = [op for i, op in enumerate(wl.ranks[r]) if (r, i) not in drop]


def _made_whole(coll: str, mine: dict[int, Op], ranks: tuple[int, ...], n: int):
    """({rank: its call as every rank of the group runs it}, None), or (None, why it cannot be replayed)."""
    if coll == "alltoall":
        if any(o.in_count != o.out_count for o in mine.values()) or len({o.in_count for o in mine.values()}) > 1:
            return None, "an all_to_all with uneven splits: the Flight Recorder records no split sizes (a profiler " \
                         "trace does)"
        return mine, None
    # the root records its own tensor and the list of n on its two sides (which side holds which differs
    # between backends: NCCL writes a scatter's list as its output); every other rank, one side only
    roots = [r for r, o in mine.items() if o.in_count and o.out_count]
    if len(roots) != 1 or len(mine) != n:
        return None, f"a {coll} whose root's record is not among the dumps"
    root = roots[0]
    chunk, whole = sorted((mine[root].in_count, mine[root].out_count))
    if whole != chunk * n:
        return None, f"a {coll} of uneven sizes ({whole} elements over {n} ranks)"
    in_n, out_n = (chunk, chunk * n) if coll == "gather" else (chunk * n, chunk)
    return {r: replace(o, in_count=in_n, out_count=out_n, root=ranks.index(root)) for r, o in mine.items()}, None


def window_and_stop(wl: Workload, entries: dict[int, list[dict]]) -> dict:
    """Per (group, p2p?): the sequence numbers every member holds and finished, (first, last); and the
    lines that say where each rank of a hung group stopped (into wl.stopped)."""
    cut = {}
    for key, g in wl.groups.items():
        members = [r for r in g.ranks if r in entries]
        for p2p in (False, True):
            field = "p2p_seq_id" if p2p else "collective_seq_id"
            seqs = {r: [e for e in entries[r] if e["_group"] == key and bool(e.get("is_p2p")) == p2p
                        and isinstance(e.get(field), int)] for r in members}
            if not any(seqs.values()) or not all(seqs.values()):
                continue
            first = max(min(e[field] for e in es) for es in seqs.values())
            last = {r: max(e[field] for e in es) for r, es in seqs.items()}
            tracked = any(e.get("state") == "completed" for es in seqs.values() for e in es)
            done = {r: max((e[field] for e in es if e.get("state") == "completed"), default=first - 1)
                    if tracked else last[r] for r, es in seqs.items()}
            top = max(last.values())
            cut[(key, p2p)] = (first, min(done.values()))
            if min(last.values()) < top or (tracked and min(done.values()) < top):
                entered = [r for r in members if last[r] == top]
                behind = [r for r in members if last[r] < top]
                at = next(e for e in seqs[entered[0]] if e[field] == top)
                line = (f"group {g.label()}: rank(s) {entered} reached #{top} {at.get('profiling_name')}"
                        f" ({_state(seqs, entered, field, top)})")
                if behind:
                    line += "; never entered it: " + ", ".join(
                        f"rank {r} (last #{last[r]} "
                        f"{next(e for e in seqs[r] if e[field] == last[r]).get('profiling_name')})" for r in behind)
                wl.stopped.append(line)
                wl.stopped.append(f"group {g.label()}: replayed up to #{min(done.values())}, the last call "
                                  + ("every member finished" if tracked else "every member entered"))
    return cut


def _state(seqs, ranks, field, seq) -> str:
    states = {next(e for e in seqs[r] if e[field] == seq).get("state") for r in ranks}
    return "state " + "/".join(sorted(str(s) for s in states))
