"""`replay` handed any dump (issue 52): every kind of call a PyTorch job makes replayed as issued or named with
its reason, with no false desync; and files from elsewhere that cannot exhaust the node: every bad one is one
line and exit 2, read within bounded memory, before any rank starts; a replay starts no more ranks than have
calls."""
from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, one_line_error, run, run_ranks
from nccl_bench import records

JOB = REPO / "tests" / "jobs" / "callsjob.py"
RANKS = 4
MEMORY_BOUND = 1 << 30  # the whole replay's peak, for any bad file


@pytest.fixture(scope="module")
def calls(tmp_path_factory) -> Path:
    """tests/jobs/callsjob.py's dumps and what each rank expects: four ranks on gloo, as torchrun starts them."""
    out = tmp_path_factory.mktemp("calls")
    run_ranks(JOB, [str(out)], RANKS)
    return out


def test_every_call_a_job_makes_is_replayed_as_issued_or_named(calls, tmp_path):
    dumps = [str(calls / f"dump_rank{r}.pkl") for r in range(RANKS)]
    out = tmp_path / "r.json"
    proc = run(["-m", "nccl_bench", "replay", *dumps, "-n", "2", "-w", "0", "--json", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the result: not strict JSON"))
    doc = records.load(str(out))
    meta = doc.meta["replay"]
    assert not meta["stopped"], meta["stopped"]  # the job had no desync, and none is said
    said = " ".join(meta["notes"] + meta["skipped"]) + proc.stdout
    for r in range(RANKS):
        expect = json.loads((calls / f"expect_rank{r}.json").read_text())
        ran = [x for x in meta["ran"][str(r)]]
        assert ran == [x for x in expect if x[0] != "named"], (r, ran)
        for _, words in (x for x in expect if x[0] == "named"):
            assert words in said, (words, said[:2000])
    assert "barrier call(s) over all ranks, each run as a one-element all_reduce" in proc.stdout
    assert all(row["nwrong"] == 0 for row in doc.rows)


def dump(entries, pg_config=None) -> bytes:
    return pickle.dumps({"version": "2.10", "pg_config": pg_config or {}, "entries": entries})


def entry(k=0, sizes=((5,),), pg=("0", "default_pg"), name="nccl:all_reduce", dtype="Float", **over):
    return {"record_id": k, "profiling_name": name, "process_group": pg, "collective_seq_id": k + 1,
            "p2p_seq_id": 0, "input_sizes": [list(s) for s in sizes], "output_sizes": [list(s) for s in sizes],
            "input_dtypes": [dtype], "output_dtypes": [dtype], "state": "completed", **over}


def two_dumps(folder: Path, first: dict, second: dict | None = None) -> list[str]:
    for r, e in enumerate((first, second or first)):
        (folder / f"dump_rank{r}.pkl").write_bytes(dump([e]))
    return [str(folder / f"dump_rank{r}.pkl") for r in range(2)]


def peak_rss(argv: list[str], timeout: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    """The command's result and the largest resident size of any process it ran (bytes)."""
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    proc = run(["-c", probe, sys.executable, *argv], timeout=timeout)
    *err, rss = proc.stderr.strip().splitlines()
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(err)), int(rss) * 1024


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BAD = {
    "declares 1 GiB a buffer on gloo": (lambda d: two_dumps(d, entry(sizes=((1 << 28,),))), "more than the CPU (gloo)"),
    "declares 4 TiB": (lambda d: two_dumps(d, entry(sizes=((1 << 40,),))), "4096.0 GiB"),
    "declares 2**62 elements": (lambda d: two_dumps(d, entry(sizes=((1 << 62,),))), "not a size a job allocated"),
    "declares 2**93 elements": (lambda d: two_dumps(d, entry(sizes=((1 << 31,) * 3,))), "not a size a job allocated"),
    "sizes that are not numbers": (lambda d: two_dumps(d, entry(input_sizes="abc")), "'input_sizes'"),
    "a process group that is a number": (lambda d: two_dumps(d, entry(process_group=5)), "'process_group' is 5"),
    "100,000 ranks in a group": (lambda d: [_write(d / "dump_rank0.pkl", dump(
        [entry()], {"0": {"name": "0", "desc": "default_pg", "ranks": list(range(100_000))}}))], "not distinct ranks"),
    "100,000-deep nesting": (lambda d: [_write(d / "dump_rank0.json", ('{"version": "2", "entries": '
                                                                       + nested(100_000) + "}").encode())],
                             "nested too deep"),
    "a gzip that expands to 1 GiB": (lambda d: [_bomb(d / "trace_rank0.json.gz")], "expands to more than"),
    "two 1000 MB dumps": (lambda d: [_sparse(d / f"dump_rank{r}.json", 1000 << 20) for r in range(2)],
                          "more than a trace this replay reads"),
    "a rank whose file cannot be read": (lambda d: _one_unreadable(d), "dump_rank1.pkl"),
    "workload bytes 1e15": (lambda d: [_workload(d, {"collective": "all_reduce", "group": "world", "bytes": 1e15})],
                            "'bytes' must be"),
    "workload avg of int32": (lambda d: [_workload(d, {"collective": "all_reduce", "group": "world", "count": 4,
                                                      "dtype": "int32", "op": "avg"})], "op avg needs a floating type"),
    "workload time_us Infinity": (lambda d: [_write(d / "w.json", json.dumps(_wdoc(
        {"collective": "all_reduce", "group": "world", "count": 4}))
        .replace('"count": 4', '"count": 4, "time_us": Infinity')
        .encode())], "Infinity is not a number"),
    "a 200-byte workload that expands to 400 million calls": (lambda d: [_write(d / "w.json", json.dumps(
        {"format": "nccl-bench-workload/1", "ranks": 4096, "groups": {"world": list(range(4096))},
         "steps": [{"collective": "all_reduce", "group": "world", "count": 1, "calls": 100_000}]}).encode())],
        "step 1 brings the workload past 2,000,000 calls"),
}


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _bomb(path: Path) -> str:
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"schemaVersion": 1, "traceEvents": [')
        block = b" " * (1 << 20)
        for _ in range(1024):
            f.write(block)
    return str(path)


def _sparse(path: Path, size: int) -> str:
    with open(path, "wb") as f:
        f.write(b'{"version": "2", "entries": []')
        f.truncate(size)
    return str(path)


def _one_unreadable(d: Path) -> list[str]:
    files = two_dumps(d, entry())
    Path(files[1]).write_bytes(Path(files[1]).read_bytes()[:40])  # cut short: cannot be read
    return files


def _wdoc(step: dict) -> dict:
    return {"format": "nccl-bench-workload/1", "ranks": 2, "groups": {"world": [0, 1]}, "steps": [step]}


def _workload(d: Path, step: dict) -> str:
    return _write(d / "w.json", json.dumps(_wdoc(step)).encode())


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_one_line_before_anything_starts_within_bounded_memory(tmp_path, case):
    make, says = BAD[case]
    files = make(tmp_path)
    proc, rss = peak_rss(["-m", "nccl_bench", "replay", *files, "--backend", "gloo", "-n", "1", "-w", "0"])
    err = one_line_error(proc)  # also: no traceback; helpers.run: no process of it left
    assert says in err, err
    assert rss < MEMORY_BOUND, f"{case}: peak {rss >> 20} MiB"


def test_a_rank_that_cannot_be_read_stops_the_replay_unless_allowed(tmp_path):
    files = _one_unreadable(tmp_path)
    proc = run(["-m", "nccl_bench", "replay", *files, "--backend", "gloo", "--list", "--allow-missing-ranks"])
    err = one_line_error(proc)  # with it allowed, the only group needed rank 1: nothing is left
    assert "nothing left to replay" in err or "no dump could be read" in err or "dump_rank1.pkl" in err, err


def test_a_replay_starts_only_the_ranks_that_have_calls(tmp_path):
    """Dumps of ranks 0 and 15 (gloo leaves a group's ranks to its holders): two ranks, not sixteen; a workload
    of 12 ranks whose one group has two: two ranks."""
    for r in (0, 15):
        (tmp_path / f"fr_rank{r}.pkl").write_bytes(dump([entry()]))
    out = tmp_path / "r.json"
    proc = run(["-m", "nccl_bench", "replay", str(tmp_path / "fr_rank0.pkl"), str(tmp_path / "fr_rank15.pkl"),
                "--backend", "gloo", "-n", "1", "-w", "0", "--json", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert records.load(str(out)).meta["replay"]["nranks"] == 2
    assert "ranks renumbered to the 2 that have calls: 15 -> 1" in proc.stdout
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"format": "nccl-bench-workload/1", "ranks": 12, "groups": {"pair": [3, 7]},
                             "steps": [{"collective": "all_reduce", "group": "pair", "count": 8}]}))
    out2 = tmp_path / "r2.json"
    proc = run(["-m", "nccl_bench", "replay", str(w), "--backend", "gloo", "-n", "1", "-w", "0", "--json", str(out2)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert records.load(str(out2)).meta["replay"]["nranks"] == 2


def test_an_all_to_all_with_uneven_splits_from_a_profiler_trace_runs_as_the_job_split_it(tmp_path):
    """A profiler trace records each rank's split sizes: the group's whole table is put together and the call is
    replayed with it (every received element checked against its sender's)."""
    from test_replay import kineto
    splits = {0: [3, 9], 1: [5, 1]}  # rank r sends splits[r][j] elements to rank j
    for r in range(2):
        doc = kineto(r, 2)
        args = {"Collective name": "all_to_all", "In msg nelems": sum(splits[r]),
                "Out msg nelems": splits[0][r] + splits[1][r], "dtype": "Float", "Process Group Name": "0",
                "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]",
                "In split size": str(splits[r]), "Out split size": str([splits[0][r], splits[1][r]])}
        doc["traceEvents"] += [{"name": "record_param_comms", "cat": "cpu_op", "ts": 9000, "dur": 5, "args": args},
                               {"name": "ncclDevKernel_SendRecv", "cat": "kernel", "ts": 9010, "dur": 30.0,
                                "args": args}]
        (tmp_path / f"trace_rank{r}.json").write_text(json.dumps(doc))
    from nccl_bench.replay import traces
    wl = traces.load([str(tmp_path)])
    (split,) = [op for op in wl.ranks[1] if op.splits]
    assert split.splits == ((3, 9), (5, 1)) and (split.in_count, split.out_count) == (6, 10)
    out = tmp_path / "r.json"
    proc = run(["-m", "nccl_bench", "replay", str(tmp_path), "--backend", "gloo", "-n", "1", "-w", "0",
                "--json", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = records.load(str(out)).rows
    assert any(r["collective"] == "alltoall" and r["nwrong"] == 0 for r in rows), rows


def test_send_and_recv_from_nccl_dumps_are_replayed(tmp_path):
    """NCCL's Flight Recorder records each transfer with its peer ("nccl:send 0->1"): replayed as the job's
    send/recv pair (gloo's records none: said so, as the job test shows)."""
    p2p = {"is_p2p": True, "collective_seq_id": 0, "p2p_seq_id": 1}
    ends = [entry(0, sizes=((17,),), name="nccl:send 0->1", **p2p),
            entry(0, sizes=((17,),), name="nccl:recv 1<-0", **p2p)]
    for r, e in enumerate(ends):
        groups = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
        (tmp_path / f"dump_rank{r}.pkl").write_bytes(dump([entry(0, sizes=((8,),)), {**e, "record_id": 1}], groups))
    out = tmp_path / "r.json"
    proc = run(["-m", "nccl_bench", "replay", str(tmp_path), "--backend", "gloo", "-n", "1", "-w", "0",
                "--json", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["collective"]: r for r in records.load(str(out)).rows}
    assert rows["send/recv"]["bytes"] == 17 * 4 and rows["send/recv"]["nwrong"] == 0, rows


def test_a_profiler_trace_missing_ranks_of_its_group_is_named_not_a_key_error(tmp_path):
    """One rank's trace of a 4-rank FSDP2 job (written on GPUs): the group and its missing ranks are named, exit 2,
    with or without --allow-missing-ranks (then nothing is left: the job's one group lacks them)."""
    import shutil
    shutil.copy(REPO / "tests" / "fixtures" / "zoo" / "fsdp2" / "kineto" / "trace_rank0.pt.trace.json.gz", tmp_path)
    err = one_line_error(run(["-m", "nccl_bench", "replay", str(tmp_path), "--list"], timeout=60))
    assert "no trace for rank(s) [1, 2, 3]" in err and "lacks [1, 2, 3]" in err, err
    err = one_line_error(run(["-m", "nccl_bench", "replay", str(tmp_path), "--list", "--allow-missing-ranks"],
                             timeout=60))
    assert "nothing left to replay" in err, err


def _moe_with_split(d: Path, rank: int, value: str) -> list[str]:
    """The zoo's MoE job's traces (4 x H200), one rank's first uneven all_to_all's In split size set to `value`."""
    out = []
    for r in range(4):
        src = REPO / "tests" / "fixtures" / "zoo" / "moe" / "kineto" / f"trace_rank{r}.pt.trace.json.gz"
        doc = json.loads(gzip.decompress(src.read_bytes()))
        if r == rank:
            ev = next(e for e in doc["traceEvents"] if (e.get("args") or {}).get("In split size", "[]") != "[]")
            ev["args"]["In split size"] = value
        out.append(_write(d / src.name, gzip.compress(json.dumps(doc).encode())))
    return out


@pytest.mark.parametrize("value, says", [
    ("[64, 72, 80, 89]", "sums to 305, which does not divide its In msg nelems 304"),
    ("[64, -72, 80, 88]", "holds a negative split"),
    ("[64, 72, 80, 88, 0]", "has 5 entries for a group of 4"),
    ("[64, 'x', 80, 88]", "is not a list of whole numbers"),
    ("[[64], 72]", "is not a list of whole numbers")], ids=["sum", "sign", "length", "letters", "nested"])
def test_a_split_table_is_checked_against_its_message_with_the_true_reason(tmp_path, value, says):
    files = _moe_with_split(tmp_path, 0, value)  # rank 0's first: [64, 72, 80, 88] of 304 elements
    err = one_line_error(run(["-m", "nccl_bench", "replay", *files, "--list"], timeout=60))
    assert says in err and ("trace_rank0" in err or "rank 0's" in err), err


def test_splits_count_slices_of_the_first_dimension(tmp_path):
    """A [tokens, hidden] tensor's splits count tokens: [38, 34, 40, 40] of 304 elements sent as 2-element rows
    are 76, 68, 80, 80 elements (issue 70)."""
    from nccl_bench.replay import traces
    files = _moe_with_split(tmp_path, 0, "[38, 34, 40, 40]")
    wl = traces.load(files)
    op = next(op for op in wl.ranks[0] if op.splits is not None)
    assert op.splits[0] == (76, 68, 80, 80), op.splits


def test_the_files_of_one_replay_are_bounded_together_on_disk_then_as_read(monkeypatch):
    """Each trace is bounded (256 MiB as read) and the calls together (2,000,000); their bytes together too, so that
    4,096 files at the cap are one line, not hours of reading: on disk before any is read, then as each expands.
    Past it, the dumps are refused even where ranks may be missing (--allow-missing-ranks)."""
    from nccl_bench.core.errors import UsageError
    from nccl_bench.replay import capped_read, traces
    zoo = REPO / "tests" / "fixtures" / "zoo" / "ring"
    gz = sorted((zoo / "kineto").iterdir())
    on_disk = sum(f.stat().st_size for f in gz)
    first = len(gzip.decompress(gz[0].read_bytes()))
    assert first > on_disk  # a gzip trace expands
    monkeypatch.setattr(capped_read, "MAX_READ_ALL", on_disk - 1)
    with pytest.raises(capped_read.OverBudget, match=f"{gz[0]}: the 4 files given hold {on_disk:,} bytes together"):
        traces.load([str(zoo / "kineto")])
    monkeypatch.setattr(capped_read, "MAX_READ_ALL", first + 1)  # the files fit on disk; the second expands past it
    with pytest.raises(capped_read.OverBudget, match=f"^{gz[1]}: with the files before it, [0-9,]+ bytes as read"):
        traces.load([str(zoo / "kineto")])
    dumps = sorted((zoo / "fr").iterdir())  # dumps are read as they lie: their bytes on disk are what is read
    monkeypatch.setattr(capped_read, "MAX_READ_ALL", sum(f.stat().st_size for f in dumps) - 1)
    with pytest.raises(UsageError, match=f"^{dumps[0]}: the 4 files given hold"):
        traces.load([str(zoo / "fr")], allow_missing=True)
    monkeypatch.setattr(capped_read, "MAX_READ_ALL", 1 << 30)
    assert traces.load([str(zoo / "fr")]).ranks and traces.load([str(zoo / "kineto")]).ranks
