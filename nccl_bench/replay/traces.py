"""What `replay` reads: files or folders of Flight Recorder dumps, profiler traces or a workload file,
into one checked Workload (nccl_bench.replay.workload). A trace is data: reading it runs no job.

Every file is read and checked before anything runs: a file of no known kind, a mix of kinds, a
truncated or refused pickle, ranks that disagree on a group: one line, exit 2 (UsageError). A call
that cannot be replayed is left out with its reason where the rest can run. Where the members of a
group disagree on a call (a desync: different collective, size or dtype at the same place), the
group is replayed up to it and the disagreement is said.
"""
from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.replay.workload import P2P, Workload, check_op
from nccl_bench.replay import frdump
from nccl_bench.replay import kineto
from nccl_bench.replay import workloadfile

MAX_FILES = 4096  # one per rank; a folder with more is not one job's dumps


def files_of(given: list[str], passed_over: list[str] | None = None) -> list[Path]:
    """The files named, and the traces inside each folder named (its other files go to `passed_over`:
    a job's dump folder often holds more than dumps)."""
    out = []
    for name in given:
        p = Path(name)
        if p.is_dir():
            inside = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
            traces = [f for f in inside if _is_trace(f)]
            if not traces:
                raise UsageError(f"{name}: a folder with no Flight Recorder dump, profiler trace or workload "
                                 "file in it")
            if passed_over is not None:
                passed_over += [f.name for f in inside if f not in traces]
            out += traces
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"{name}: no such file or folder")
    if len(out) > MAX_FILES:
        raise UsageError(f"{given[0]}: {len(out)} files; a job's dumps are one per rank ({MAX_FILES} at most)")
    return out


def kind_of(path: Path) -> str:
    try:
        head = path.open("rb").read(4096)
        if head[:2] == b"\x1f\x8b":  # gzip: what is inside decides
            with gzip.open(path, "rb") as f:
                head = f.read(4096)
    except (OSError, EOFError) as e:
        raise UsageError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not head.strip():
        raise UsageError(f"{path}: an empty file, not a trace")
    if frdump.is_dump(path):
        return "flight recorder"
    if head.lstrip()[:1] == b"{":
        if b'"traceEvents"' in head or b'"schemaVersion"' in head:
            return "profiler trace"
        if b'"format"' in head and b"nccl-bench-workload" in head:
            return "workload file"
    raise UsageError(f"{path}: not a trace this replay reads (a Flight Recorder dump, a profiler trace, "
                     "or a workload file)")


def _is_trace(path: Path) -> bool:
    try:
        kind_of(path)
        return True
    except UsageError:
        return False


def load(given: list[str], allow_missing: bool = False) -> Workload:
    """Every file read once and checked; `allow_missing`: a group whose ranks do not all have a file is left
    out (else that is bad input)."""
    passed_over: list[str] = []
    paths = files_of(given, passed_over)
    kinds = {p: kind_of(p) for p in paths}
    found = sorted(set(kinds.values()))
    if len(found) > 1:
        raise UsageError(f"{given[0]}: a mix of {' and '.join(found)}s; give one kind at a time")
    kind = found[0]
    if kind == "workload file":
        if len(paths) > 1:
            raise UsageError(f"{paths[1]}: one workload file at a time")
        wl = workloadfile.load(paths[0])
    elif kind == "profiler trace":
        wl = kineto.read(paths)
    else:
        wl = frdump.read(paths, allow_missing)
    if passed_over:
        wl.notes.append(f"passed over {len(passed_over)} file(s) in the folder that are not traces: "
                        + ", ".join(passed_over[:4]) + (" ..." if len(passed_over) > 4 else ""))
    return checked(whole_groups(wl, allow_missing))


def whole_groups(wl: Workload, allow_missing: bool) -> Workload:
    """Only groups every member of which has a file: a group missing some is bad input naming them, or, with
    `allow_missing`, left out with its calls and said."""
    files = set(wl.ranks)
    short = {k: sorted(set(g.ranks) - files) for k, g in wl.groups.items() if set(g.ranks) - files}
    if not short:
        return wl
    missing = sorted({r for rs in short.values() for r in rs})
    some = "; ".join(f"{wl.groups[k].label()} lacks {rs[:8]}" for k, rs in list(short.items())[:3])
    if not allow_missing:
        raise UsageError(f"{wl.files[0] if wl.files else 'the traces'}: no trace for rank(s) {missing[:8]}"
                         f"{' ...' if len(missing) > 8 else ''} ({some}): give every rank's trace, or "
                         "--allow-missing-ranks to replay only the groups whose ranks all have one")
    wl.notes.append(f"no trace for rank(s) {missing[:8]}: the groups they belong to are left out "
                    "(--allow-missing-ranks)")
    wl.groups = {k: g for k, g in wl.groups.items() if k not in short}
    wl.ranks = {r: [op for op in ops if op.group in wl.groups] for r, ops in wl.ranks.items()}
    return wl


def checked(wl: Workload) -> Workload:
    """Calls that cannot be replayed left out with their reason; each group cut where its members' calls stop
    agreeing: by the job's own sequence numbers where the trace has them (a call left out on one member is
    left out on all, and is no desync), else by position."""
    for r, ops in wl.ranks.items():
        keep = []
        for op in ops:
            why = "not a member" if r not in wl.groups[op.group].ranks else check_op(op, wl.groups[op.group])
            if why:
                wl.skipped.append(f"rank {r}: {op.name or op.collective}: {why}")
            else:
                keep.append(op)
        wl.ranks[r] = keep
    for key, g in wl.groups.items():
        calls = {r: [op for op in wl.ranks.get(r, []) if op.group == key and op.collective not in P2P]
                 for r in g.ranks}
        keep = _by_seq(wl, g, calls) if wl.seq_aligned and all(op.seq is not None for c in calls.values() for op in c) \
            else _by_position(wl, g, calls)
        for r in g.ranks:
            extra = {id(op) for op in calls[r]} - {id(op) for op in keep[r]}
            wl.ranks[r] = [op for op in wl.ranks[r] if id(op) not in extra]
    if not any(wl.ranks.values()):
        raise UsageError(f"{wl.files[0]}: nothing left to replay ({'; '.join(wl.skipped[:3]) or 'no calls'})")
    return wl


def _by_position(wl: Workload, g, calls: dict) -> dict:
    n = min(map(len, calls.values()))
    stop = next((i for i in range(n) if len({_shape(calls[r][i]) for r in g.ranks}) > 1), None)
    if stop is None and len(set(map(len, calls.values()))) == 1:
        return calls
    at = n if stop is None else stop
    if stop is not None:
        seen = "; ".join(f"rank {r}: {_shape(calls[r][stop])}" for r in g.ranks)
        wl.stopped.append(f"group {g.label()}: its ranks disagree on call {stop + 1} ({seen}); replayed up "
                          "to the call before it")
    else:
        wl.stopped.append(f"group {g.label()}: ranks hold {sorted(set(map(len, calls.values())))} calls; "
                          f"replayed the first {at}, which every member holds")
    return {r: c[:at] for r, c in calls.items()}


def _by_seq(wl: Workload, g, calls: dict) -> dict:
    by = {r: {op.seq: op for op in c} for r, c in calls.items()}
    common = set.intersection(*(set(s) for s in by.values())) if by else set()
    for s in sorted(set().union(*(set(s) for s in by.values())) - common):
        wl.skipped.append(f"group {g.label()}: call #{s}: left out on every member (not replayable on "
                          f"rank(s) {sorted(r for r in g.ranks if s not in by[r])})")
    order = sorted(common)
    stop = next((s for s in order if len({_shape(by[r][s]) for r in g.ranks}) > 1), None)
    if stop is not None:
        seen = "; ".join(f"rank {r}: {_shape(by[r][stop])}" for r in g.ranks)
        wl.stopped.append(f"group {g.label()}: its ranks disagree on the job's call #{stop} ({seen}); replayed "
                          "up to the call before it")
        order = [s for s in order if s < stop]
    return {r: [by[r][s] for s in order] for r in g.ranks}


def _shape(op) -> str:
    """What every member of a group records alike for one call (an uneven all_to_all: its whole table)."""
    if op.splits is not None:
        return f"{op.collective} splits {op.splits} {op.dtype}"
    return f"{op.collective} {op.in_count}->{op.out_count} {op.dtype}"


def describe(wl: Workload) -> list[str]:
    """What was read, for the terminal: one line each."""
    calls = sum(map(len, wl.ranks.values()))
    lines = [f"replay: {wl.source}, {len(wl.files)} file(s), {wl.nranks} rank(s), {len(wl.groups)} group(s), "
             f"{calls} call(s) over all ranks" + ("" if wl.duration_known() else "; no durations in the trace")]
    lines += [f"replay: {g.label()}" for g in wl.groups.values()]
    lines += [f"replay: {n}" for n in wl.notes]
    barriers = sum(1 for ops in wl.ranks.values() for op in ops if "barrier" in op.name)
    if barriers:
        lines.append(f"replay: {barriers} barrier call(s) over all ranks, each run as a one-element all_reduce (as "
                     "NCCL makes a barrier)")
    lines += [f"stopped: {s}" for s in wl.stopped]
    if wl.skipped:
        why: dict[str, list[str]] = {}
        for s in wl.skipped:  # "rank R: reason", folded over the ranks that share a reason
            who, _, reason = s.partition(": ") if s.startswith("rank ") else ("", "", s)
            why.setdefault(reason, []).append(who.removeprefix("rank "))
        folded = [_folded(reason, who) for reason, who in why.items()]
        lines.append(f"replay: left out {len(wl.skipped)} call(s): " + "; ".join(folded[:5])
                     + (" ..." if len(folded) > 5 else ""))
    return lines


def _folded(reason: str, who: list[str]) -> str:
    """One reason once: how many calls it left out and on which ranks ("3 calls, ranks 0, 1")."""
    if not who[0]:
        return reason
    ranks = sorted(set(who), key=lambda r: (len(r), r))
    shown = ", ".join(ranks[:8]) + (" ..." if len(ranks) > 8 else "")
    return f"{reason} ({len(who)} call{'s' if len(who) > 1 else ''}, rank{'s' if len(ranks) > 1 else ''} {shown})"


def digest(given: list[str]) -> str:
    """What names one workload across nodes: the sha256 of its files' contents, in name order."""
    h = hashlib.sha256()
    for p in sorted(files_of(given), key=lambda p: p.name):
        h.update(p.name.encode() + b"\0")
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]
