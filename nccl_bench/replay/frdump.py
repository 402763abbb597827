"""PyTorch Flight Recorder dumps, one per rank, into a Workload (nccl_bench.replay.workload).

A dump (torch's `_dump_fr_trace()`, or the file `TORCH_NCCL_DUMP_ON_TIMEOUT` writes under
`TORCH_FR_DUMP_TEMP_FILE<rank>`; pickle or its JSON form) holds its rank's last calls: `profiling_name`
("nccl:_all_gather_base", "gloo:all_reduce", "nccl:send 0->1"), input and output sizes and dtypes, the
process group (name, description), `collective_seq_id` / `p2p_seq_id`, `state`, and with
`TORCH_NCCL_ENABLE_TIMING=1` `duration_ms`. The rank is not inside the dump: it is the number that ends
the file's name, as torch names them.

A pickle is code as much as data: it is read by an unpickler that admits plain data only, and one that
asks for any global is refused before anything of it runs.

Groups: `pg_config` gives a group's ranks where the backend fills it (NCCL; as a list or a string
"[0, 1]"); gloo leaves it empty, and there a group's ranks are the ranks whose dumps hold it. Each rank
keeps only its last calls (a ring), so per group only the sequence numbers every member still holds are
replayed. A hung job's dumps end at different sequence numbers: where each rank stopped is said, and the
replay stops at the last call every member finished (entered, where the backend records no completion).
"""
from __future__ import annotations

import ast
import io
import json
import pickle
import re
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.replay.workload import Group, Op, Workload

MAX_DUMP_BYTES = 1 << 30  # a dump is KBs to MBs; more is not a dump, and is not read into memory
DTYPES = {"Float": "float32", "BFloat16": "bfloat16", "Half": "float16", "Double": "float64", "Int": "int32",
          "Long": "int64", "Char": "int8", "Byte": "uint8"}
# the trace's name, less its backend prefix and leading underscores -> the collective replayed
NAMES = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_reduce_barrier": "all_reduce",
         "barrier": "all_reduce", "all_gather": "all_gather", "allgather": "all_gather",
         "all_gather_base": "all_gather", "allgather_base": "all_gather", "all_gather_into_tensor": "all_gather",
         "allgather_into_tensor": "all_gather", "reduce_scatter": "reduce_scatter",
         "reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
         "broadcast": "broadcast", "reduce": "reduce", "all_to_all": "alltoall", "alltoall": "alltoall",
         "alltoall_base": "alltoall", "all_to_all_single": "alltoall", "gather": "gather", "scatter": "scatter",
         "send": "send", "recv": "recv"}
COALESCED = "_coalesced"
RANK_IN_NAME = re.compile(r"(\d+)(\.(pkl|pickle|json))?$")
PEERS = {"send": re.compile(r"(\d+)\s*->\s*(\d+)"), "recv": re.compile(r"(\d+)\s*<-\s*(\d+)")}


class PlainData(pickle.Unpickler):
    """Admits dict, list, tuple, str, bytes, numbers, bool and None: the opcodes that build those never
    look up a global, and every other object needs one."""

    def find_class(self, module, name):
        raise UsageError(f"asks for {module}.{name}: a Flight Recorder dump holds plain data only, so it "
                         "was refused and nothing of it ran")

    def persistent_load(self, pid):
        raise UsageError("asks for a persistent object: refused, nothing of it ran")


def load_dump(path: Path) -> dict:
    """One rank's dump, pickle or JSON, checked to be a Flight Recorder dump."""
    size = path.stat().st_size
    if size > MAX_DUMP_BYTES:
        raise UsageError(f"{path}: {size} bytes, more than a Flight Recorder dump ({MAX_DUMP_BYTES} at most)")
    data = path.read_bytes()
    if data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise UsageError(f"{path}: not a Flight Recorder dump (JSON that does not parse: {e})") from None
    else:
        try:
            doc = PlainData(io.BytesIO(data)).load()
        except UsageError as e:
            raise UsageError(f"{path}: {e}") from None
        except (EOFError, pickle.UnpicklingError, ValueError, IndexError, TypeError, MemoryError) as e:
            what = "a truncated pickle" if isinstance(e, EOFError) or "truncated" in str(e) else "not a pickle"
            raise UsageError(f"{path}: {what} ({type(e).__name__}: {str(e)[:80]}); not a Flight Recorder "
                             "dump that can be read") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("entries"), list) and "version" in doc):
        raise UsageError(f"{path}: not a Flight Recorder dump (no 'version' and 'entries')")
    return doc


def is_dump(path: Path) -> bool:
    """Whether a file looks like a dump without reading it all: a pickle, or JSON with 'entries'."""
    head = path.open("rb").read(4096)
    return head[:1] == b"\x80" or (head.lstrip()[:1] == b"{" and b'"entries"' in head and b'"traceEvents"' not in head)


def rank_of(path: Path) -> int:
    m = RANK_IN_NAME.search(path.name)
    if not m:
        raise UsageError(f"{path}: cannot tell which rank wrote it; name each dump as torch does, ending "
                         "in its rank (TORCH_FR_DUMP_TEMP_FILE<rank>, e.g. nccl_trace_rank_3)")
    return int(m.group(1))


def _ranks(value) -> list[int] | None:
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError):
            return None
    if isinstance(value, (list, tuple)) and all(isinstance(r, int) for r in value):
        return list(value)
    return None


def _count(sizes) -> int:
    """Elements over every tensor of a call: [[3, 1001]] -> 3003, [[5], [5]] -> 10."""
    total = 0
    for shape in sizes or []:
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total


def _op(entry: dict) -> tuple[Op | None, str | None]:
    """(the replayed call, None) or (None, why it is left out)."""
    pname = str(entry.get("profiling_name") or "")
    raw = pname.split(":", 1)[-1].strip()
    base = raw.split()[0].lstrip("_") if raw else ""
    coalesced = base.endswith(COALESCED)
    name = NAMES.get(base[:-len(COALESCED)] if coalesced else base)
    if name is None:
        return None, f"{pname or '(unnamed)'}: no replay for this call"
    dtypes = list(entry.get("input_dtypes") or []) + list(entry.get("output_dtypes") or [])
    in_n, out_n = _count(entry.get("input_sizes")), _count(entry.get("output_sizes"))
    if base.startswith("barrier") or base == "all_reduce_barrier" or (name == "all_reduce" and not dtypes):
        in_n = out_n = 1  # a barrier is NCCL's one-element all_reduce
        dtypes = dtypes or ["Float"]
    dtype = DTYPES.get(dtypes[0]) if dtypes else None
    if dtype is None:
        return None, f"{pname}: dtype {dtypes[0] if dtypes else '(none)'} has no replay"
    if len(set(dtypes)) > 1:
        return None, f"{pname}: mixed dtypes {sorted(set(dtypes))}"
    peer = None
    if name in PEERS:
        m = PEERS[name].search(raw)
        if not m:
            return None, f"{pname}: a {name} without its peer in the name"
        peer = int(m.group(2))
        in_n, out_n = (in_n, 0) if name == "send" else (0, out_n or in_n)
    ms = entry.get("duration_ms")
    return Op(name, str(entry["process_group"][0]), in_n, out_n, dtype, peer=peer, name=pname,
              seq=entry.get("p2p_seq_id" if name in PEERS else "collective_seq_id"),
              duration_us=float(ms) * 1e3 if isinstance(ms, (int, float)) else None), None


def read(paths: list[Path]) -> Workload:
    dumps = {}
    for p in paths:
        r = rank_of(p)
        if r in dumps:
            raise UsageError(f"{p}: a second dump of rank {r} (the first: {dumps[r][0]})")
        dumps[r] = (p, load_dump(p))
    configs: dict[str, tuple[list[int], int, str]] = {}  # group -> (ranks, which rank said so, desc)
    held: dict[str, set[int]] = {}
    for r, (p, doc) in sorted(dumps.items()):
        for key, cfg in (doc.get("pg_config") or {}).items():
            ranks = _ranks((cfg or {}).get("ranks")) if isinstance(cfg, dict) else None
            if ranks:
                seen = configs.setdefault(str(key), (ranks, r, cfg.get("desc", "")))
                if seen[0] != ranks:
                    raise UsageError(f"{p}: group {key} has ranks {ranks}, but rank {seen[1]}'s dump says "
                                     f"{seen[0]}: the dumps disagree on a group")
        for e in doc["entries"]:
            if isinstance(e, dict) and e.get("process_group"):
                held.setdefault(str(e["process_group"][0]), set()).add(r)
    descs = {str(e["process_group"][0]): str(e["process_group"][1]) for _, doc in dumps.values()
             for e in doc["entries"] if isinstance(e, dict) and e.get("process_group")}
    groups = {}
    for key, holders in held.items():
        ranks = configs[key][0] if key in configs else sorted(holders)
        groups[key] = Group(key, tuple(ranks), descs.get(key, ""))
    wl = Workload(nranks=max(dumps) + 1, groups=groups, ranks={}, source="flight recorder",
                  files=[str(p) for p, _ in dumps.values()])
    versions = {d.get("comm_lib_version") for _, d in dumps.values() if d.get("comm_lib_version")}
    wl.meta = {"fr_version": sorted({str(d.get("version")) for _, d in dumps.values()}),
               "comm_lib_version": sorted(versions)}
    if not all(g.ranks for g in groups.values()) or not groups:
        raise UsageError(f"{paths[0]}: the dumps record no collective (nothing to replay)")
    missing = sorted({r for g in groups.values() for r in g.ranks} - set(dumps))
    if missing:
        wl.notes.append(f"no dump for rank(s) {missing}: their groups are replayed without them where they "
                        "fit, else left out")
    entries = {r: [e for e in doc["entries"] if isinstance(e, dict) and e.get("process_group")]
               for r, (_, doc) in dumps.items()}
    cut = _window_and_stop(wl, entries)
    for r, es in sorted(entries.items()):
        seq_ops = []
        for e in sorted(es, key=lambda e: e.get("record_id", 0)):
            key = str(e["process_group"][0])
            op, why = _op(e)
            if op is None:
                wl.skipped.append(f"rank {r}: {why}")
                continue
            lo, hi = cut.get((key, op.collective in ("send", "recv")), (None, None))
            if op.seq is not None and lo is not None and not lo <= op.seq <= hi:
                continue
            seq_ops.append(op)
        wl.ranks[r] = seq_ops
    if missing:
        wl.groups = {k: g for k, g in groups.items() if not set(g.ranks) & set(missing)}
        wl.ranks = {r: [op for op in ops if op.group in wl.groups] for r, ops in wl.ranks.items()}
    return wl


def _window_and_stop(wl: Workload, entries: dict[int, list[dict]]) -> dict:
    """Per (group, p2p?): the sequence numbers every member holds and finished, (first, last); and the
    lines that say where each rank of a hung group stopped (into wl.stopped)."""
    cut = {}
    for key, g in wl.groups.items():
        members = [r for r in g.ranks if r in entries]
        for p2p in (False, True):
            field = "p2p_seq_id" if p2p else "collective_seq_id"
            seqs = {r: [e for e in entries[r] if str(e["process_group"][0]) == key and bool(e.get("is_p2p")) == p2p
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
