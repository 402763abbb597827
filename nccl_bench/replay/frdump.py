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

import io
import math
import pickle
import re
from dataclasses import replace
from pathlib import Path

from nccl_bench.core.errors import UsageError
from nccl_bench.replay.capped_read import OverBudget, ReadBudget, load_json, read_capped
from nccl_bench.replay.frgroups import (MAX_RANKS, configs_of, rooted_and_split, show, window_and_stop,
                                         workload)
from nccl_bench.replay.groupnames import Listed, joined
from nccl_bench.replay.workload import Op, Workload

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
         "all_to_allv": "alltoall", "send": "send", "recv": "recv"}
COALESCED = "_coalesced"
UNDEFINED = "UNKNOWN_SCALAR"
RANK_IN_NAME = re.compile(r"(\d+)(\.(pkl|pickle|json))?$")
PEERS = {"send": re.compile(r"(\d+)\s*->\s*(\d+)"), "recv": re.compile(r"(\d+)\s*<-\s*(\d+)")}
ELEMENTS_MAX = 1 << 40  # elements one call declares, at most (a size past it is no real job's)


class PlainData(pickle.Unpickler):
    """Admits dict, list, tuple, str, bytes, numbers, bool and None: the opcodes that build those never
    look up a global, and every other object needs one."""

    def find_class(self, module, name):
        raise UsageError(f"asks for {module}.{name}: a Flight Recorder dump holds plain data only, so it "
                         "was refused and nothing of it ran")

    def persistent_load(self, pid):
        raise UsageError("asks for a persistent object: refused, nothing of it ran")


MAX_ENTRIES = 200_000  # a dump's calls: 100 x the recorder's default buffer; bytes alone do not bound the reading
MAX_ENTRIES_ALL = 2_000_000  # every dump's together (each entry costs its check, about 10 us)


def load_dump(path: Path, budget: ReadBudget | None = None) -> dict:
    """One rank's dump, pickle or JSON, read within bounds (nccl_bench.replay.capped_read) and checked to be a
    Flight Recorder dump."""
    data = read_capped(path, budget=budget)
    if data.lstrip()[:1] == b"{":
        doc = load_json(path, data, "a Flight Recorder dump")
    else:
        try:
            doc = PlainData(io.BytesIO(data)).load()
        except UsageError as e:
            raise UsageError(f"{path}: {e}") from None
        except RecursionError:
            raise UsageError(f"{path}: nested too deep to be a Flight Recorder dump") from None
        except (EOFError, pickle.UnpicklingError, ValueError, IndexError, TypeError, MemoryError) as e:
            what = "a truncated pickle" if isinstance(e, EOFError) or "truncated" in str(e) else "not a pickle"
            raise UsageError(f"{path}: {what} ({type(e).__name__}: {str(e)[:80]}); not a Flight Recorder "
                             "dump that can be read") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("entries"), list) and "version" in doc):
        raise UsageError(f"{path}: not a Flight Recorder dump (no 'version' and 'entries')")
    if len(doc["entries"]) > MAX_ENTRIES:
        raise UsageError(f"{path}: {len(doc['entries'])} entries, more than a Flight Recorder keeps "
                         f"(TORCH_FR_BUFFER_SIZE, default 2000; read up to {MAX_ENTRIES})")
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
    if int(m.group(1)) >= MAX_RANKS:
        raise UsageError(f"{path}: rank {int(m.group(1))} from its name, more than one job's ranks ({MAX_RANKS})")
    return int(m.group(1))


def _count(sizes, path: Path, at: str, field: str) -> int:
    """Elements over every tensor of a call: [[3, 1001]] -> 3003, [[5], [5]] -> 10; one line if malformed."""
    if sizes is None:
        return 0
    if not isinstance(sizes, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in sizes):
        raise UsageError(f"{path}: {at}: '{field}' is {show(sizes)}, not a list of tensor shapes")
    total = 0
    for shape in sizes:
        n = 1
        for d in shape:
            if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                raise UsageError(f"{path}: {at}: '{field}' holds {show(d)}, not a dimension")
            n *= d
            if n > ELEMENTS_MAX:
                raise UsageError(f"{path}: {at}: '{field}' declares a tensor of more than {ELEMENTS_MAX} elements: "
                                 "not a size a job allocated")
        total += n
        if total > ELEMENTS_MAX:
            raise UsageError(f"{path}: {at}: '{field}' declares more than {ELEMENTS_MAX} elements over its tensors")
    return total


def _entries(path: Path, doc: dict) -> list[dict]:
    """A rank's calls, each checked: the fields a replay reads hold what they should (else one line naming
    the file, the entry and the field). The element counts come out as `_in` and `_out`, the group as `_group`."""
    out = []
    for k, e in enumerate(doc["entries"]):
        at = f"entry {k}"
        if not isinstance(e, dict):
            raise UsageError(f"{path}: {at} is {type(e).__name__}, not a call")
        name = e.get("profiling_name")
        at = f"entry {k} ({name[:40] if isinstance(name, str) else show(name)})"
        pg = e.get("process_group")
        if not (isinstance(pg, (list, tuple)) and pg and isinstance(pg[0], (str, int)) and not isinstance(pg[0], bool)):
            raise UsageError(f"{path}: {at}: 'process_group' is {show(pg)}, not [name, description]")
        if not isinstance(e.get("profiling_name", ""), str):
            raise UsageError(f"{path}: {at}: 'profiling_name' is not a name")
        for field in ("collective_seq_id", "p2p_seq_id", "record_id"):
            v = e.get(field)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise UsageError(f"{path}: {at}: '{field}' is {show(v)}, not a number")
        for field in ("input_dtypes", "output_dtypes"):
            v = e.get(field)
            if v is not None and not (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)):
                raise UsageError(f"{path}: {at}: '{field}' is {show(v)}, not a list of type names")
        ms = e.get("duration_ms")
        if ms is not None and not (isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms)
                                   and ms >= 0):
            raise UsageError(f"{path}: {at}: 'duration_ms' is {show(ms)}, not a duration")
        out.append({**e, "_group": str(pg[0]), "_desc": str(pg[1]) if len(pg) > 1 else "",
                    "_in": _count(e.get("input_sizes"), path, at, "input_sizes"),
                    "_out": _count(e.get("output_sizes"), path, at, "output_sizes")})
    return out


def _op(entry: dict) -> tuple[Op | None, str | None]:
    """(the replayed call, None) or (None, why it is left out)."""
    pname = str(entry.get("profiling_name") or "")
    raw = pname.split(":", 1)[-1].strip()
    base = raw.split()[0].lstrip("_") if raw else ""
    coalesced = base.endswith(COALESCED)
    name = NAMES.get(base[:-len(COALESCED)] if coalesced else base)
    if name is None:
        return None, f"{pname or '(unnamed)'}: no replay for this call"
    # NCCL's recorder writes an undefined tensor (a gather's output and a scatter's input off the root) as
    # [0] of UNKNOWN_SCALAR: no dtype of the call
    dtypes = [d for d in list(entry.get("input_dtypes") or []) + list(entry.get("output_dtypes") or [])
              if d != UNDEFINED]
    in_n, out_n = entry["_in"], entry["_out"]
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
    return Op(name, entry["_group"], in_n, out_n, dtype, peer=peer, name=pname,
              seq=entry.get("p2p_seq_id" if name in PEERS else "collective_seq_id"),
              duration_us=float(ms) * 1e3 if ms is not None else None), None


def read(paths: list[Path], allow_missing: bool = False) -> Workload:
    """Every rank's dump into one Workload: groups from pg_config (else from who holds them), each rank's calls
    in order within the window every member holds, gather and scatter made whole on every rank of the group."""
    dumps: dict[int, tuple[Path, list[dict]]] = {}
    configs: dict[str, tuple[list[int], int, str]] = {}  # group -> (ranks, which rank said so, desc)
    listed: Listed = {}  # rank -> the groups its dump lists, in the order it made them
    meta = {"fr_version": set(), "comm_lib_version": set(), "backends": set()}
    unread: list[str] = []  # --allow-missing-ranks: files passed over, each with why
    read = 0  # entries over the dumps so far
    budget = ReadBudget(paths)  # and their bytes
    for p in paths:
        r = rank_of(p)
        if r in dumps:
            raise UsageError(f"{p}: a second dump of rank {r} (the first: {dumps[r][0]})")
        try:
            doc = load_dump(p, budget)
        except UsageError as e:
            if not allow_missing or isinstance(e, OverBudget):  # a file past the files' bound is not one missing
                raise
            unread.append(f"rank {r}'s dump cannot be read ({e})")
            continue
        listed[r] = configs_of(p, r, doc, configs)
        read += len(doc["entries"])
        if read > MAX_ENTRIES_ALL:
            raise UsageError(f"{p}: the dumps hold more than {MAX_ENTRIES_ALL} entries together: replay a step's "
                             "dumps, not a whole run's")
        dumps[r] = (p, _entries(p, doc))
        descs = {e["_group"]: e["_desc"] for e in dumps[r][1]}  # a hashed group's config has no description
        listed[r] = [(key, ranks, descs.get(key) or desc) for key, ranks, desc in listed[r]]
        meta["fr_version"].add(str(doc.get("version")))
        if doc.get("comm_lib_version"):
            meta["comm_lib_version"].add(str(doc["comm_lib_version"]))
        meta["backends"] |= {str(e.get("profiling_name", "")).split(":")[0] for e in dumps[r][1] if ":" in
                             str(e.get("profiling_name", ""))}
        del doc
    if not dumps:
        raise UsageError(f"{paths[0]}: no dump could be read ({'; '.join(unread[:2])})")
    configs, joins = _one_name_per_group(dumps, listed, configs)
    wl = workload(paths, dumps, configs, allow_missing)
    wl.notes += joins
    wl.notes += [f"{u}: its groups are left out (--allow-missing-ranks)" for u in unread]
    if unread:  # a group whose ranks the dumps do not record (gloo's) may have had an unread rank in it
        unknown = [g.label() for k, g in wl.groups.items() if k not in configs]
        wl.groups = {k: g for k, g in wl.groups.items() if k in configs}
        if unknown:
            wl.notes.append(f"left out {', '.join(unknown[:4])}: the dumps do not record their ranks, and an unread "
                            "dump's rank may be one of them")
    wl.meta = {"fr_version": sorted(meta["fr_version"]), "comm_lib_version": sorted(meta["comm_lib_version"])}
    wl.origin = {r: str(p) for r, (p, _) in dumps.items()}
    entries = {r: es for r, (_, es) in dumps.items()}
    cut = window_and_stop(wl, entries)
    for r, es in sorted(entries.items()):
        wl.ranks[r] = _rank_ops(wl, r, es, cut)
    rooted_and_split(wl)
    if meta["backends"] == {"gloo"}:
        wl.notes.append("gloo's Flight Recorder records no send or recv: point-to-point calls the job made are not "
                        "in these dumps (NCCL's are)")
    return wl


def _is_marker(e: dict) -> bool:
    """NCCL's record that closes a coalesced group ("nccl:coalesced"): the group's time, not a call of its own."""
    return str(e.get("profiling_name") or "").split(":", 1)[-1].strip().lstrip("_") == "coalesced"


def _one_name_per_group(dumps: dict, listed: Listed, configs: dict) -> tuple[dict, list[str]]:
    """Each group under one name in every rank's entries (nccl_bench.replay.groupnames): the configs left, and a note
    for each group its ranks named apart."""
    rename, joins = joined(listed)
    for _, es in dumps.values():
        for e in es:
            e["_group"] = rename.get(e["_group"], e["_group"])
    return {k: v for k, v in configs.items() if k not in rename}, joins


def _rank_ops(wl: Workload, r: int, es: list[dict], cut: dict) -> list[Op]:
    """A rank's calls in order. The transfers of a batch_isend_irecv are recorded one by one ("scheduled", no
    duration), then closed by a marker with the group's p2p number and duration: they become one batch."""
    closed = {(e["_group"], e.get("p2p_seq_id")): e.get("duration_ms") for e in es if _is_marker(e)}
    out = []
    for e in sorted(es, key=lambda e: e.get("record_id") or 0):
        if e["_group"] not in wl.groups or _is_marker(e):
            continue
        op, why = _op(e)
        if op is not None and op.collective in PEERS and (op.group, op.seq) in closed:
            ms = closed[(op.group, op.seq)]
            op = replace(op, batch=op.seq, duration_us=float(ms) * 1e3 if ms is not None else None)
        if op is None:
            wl.skipped.append(f"rank {r}: {why}")
            continue
        lo, hi = cut.get((op.group, op.collective in ("send", "recv")), (None, None))
        if op.seq is not None and lo is not None and not lo <= op.seq <= hi:
            continue
        out.append(op)
    return out
