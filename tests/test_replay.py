"""`replay` on gloo: a real PyTorch job's Flight Recorder dumps replayed exactly, a workload file, a
profiler trace, a hung job's dumps, and every kind of bad input (one line, exit 2; a hostile pickle
refused with nothing of it run)."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from helpers import REPO, one_line_error, run, run_ranks
from nccl_bench.replay import traces
from nccl_bench import records

JOB = REPO / "tests" / "jobs" / "frjob.py"
RANKS = 4


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    """The Flight Recorder dumps of tests/jobs/frjob.py: four ranks on gloo, started as torchrun would."""
    out = tmp_path_factory.mktemp("fr")
    run_ranks(JOB, [str(out)], RANKS)
    return out


def dump_files(folder: Path) -> list[str]:
    return [str(folder / f"dump_rank{r}.pkl") for r in range(RANKS)]


def replay(*args: str, timeout: float = 180):
    return run(["-m", "nccl_bench", "replay", *args], timeout=timeout)


def test_a_real_jobs_dumps_replay_its_sequence_exactly(dumps, tmp_path):
    out = tmp_path / "replay.json"
    proc = replay(*dump_files(dumps), "-n", "3", "-w", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = records.load(str(out))
    assert doc.kind == "replay" and doc.meta["replay"]["source"] == "flight recorder"
    ran = doc.meta["replay"]["ran"]
    for r in range(RANKS):  # per rank: the same calls, sizes, dtypes and groups, in order
        assert ran[str(r)] == json.loads((dumps / f"called_rank{r}.json").read_text()), r
    rows = doc.rows
    assert sum(r["nwrong"] for r in rows) == 0
    kinds = {r["collective"] for r in rows}
    assert {"all_reduce", "all_gather", "broadcast", "alltoall", "reduce"} <= kinds
    groups = {tuple(r["group_ranks"]) for r in rows}
    assert {(0, 1, 2, 3), (0, 1), (2, 3), (0, 2), (1, 3)} <= groups
    gather = next(r for r in rows if r["collective"] == "all_gather" and r["group_ranks"] == [0, 1, 2, 3])
    assert gather["bytes"] == 257 * 4 * 4 and gather["calls"] == 2 and gather["time_us"] > 0  # nccl-tests' size
    assert {"time_us", "busbw", "trace_time_us", "calls", "dtype"} <= set(gather)
    for line in ("group_ranks", "# sequence per pass", "# Out of bounds values : 0 OK"):
        assert line in proc.stdout
    assert "tp0 [0, 1]" in proc.stdout and "dp1 [1, 3]" in proc.stdout


def test_the_json_form_of_the_dumps_reads_the_same(dumps):
    as_pickle = traces.load(dump_files(dumps))
    as_json = traces.load([str(dumps / "json")])
    assert as_json.ranks == as_pickle.ranks and as_json.groups == as_pickle.groups


def test_a_hung_jobs_dumps_say_where_each_rank_stopped(dumps, tmp_path):
    """Rank 3 never entered the world's last barrier; the others did: said, then replayed up to it."""
    folder = tmp_path / "hung"
    folder.mkdir()
    for r in range(RANKS):
        doc = pickle.loads((dumps / f"dump_rank{r}.pkl").read_bytes())
        if r == 3:
            doc["entries"] = doc["entries"][:-1]
        (folder / f"dump_rank{r}.pkl").write_bytes(pickle.dumps(doc))
    wl = traces.load([str(folder)])
    said = "\n".join(wl.stopped)
    assert "rank(s) [0, 1, 2] reached #" in said and "barrier" in said and "never entered it: rank 3" in said
    assert len(wl.ranks[0]) == 19 and len(wl.ranks[3]) == 19  # the last barrier left out on every rank
    assert any(line.startswith("stopped: group default_pg [0, 1, 2, 3]: rank(s) [0, 1, 2] reached")
               for line in traces.describe(wl))


WORKLOAD = {
    "format": "nccl-bench-workload/1", "name": "two steps of a small FSDP-like job", "ranks": 4,
    "groups": {"world": [0, 1, 2, 3], "tp0": [0, 1], "tp1": [2, 3], "dp0": [0, 2], "dp1": [1, 3]},
    "steps": [
        {"collective": "all_gather", "groups": ["dp0", "dp1"], "count": 1003, "dtype": "bfloat16", "calls": 2,
         "time_us": 1e6},
        {"collective": "reduce_scatter", "groups": ["dp0", "dp1"], "count": 1003, "dtype": "float32", "op": "avg"},
        {"collective": "all_reduce", "groups": ["tp0", "tp1"], "bytes": 4096, "dtype": "float32", "op": "max"},
        {"collective": "send/recv", "group": "tp0", "src": 0, "dst": 1, "count": 77, "dtype": "float32"},
        {"collective": "broadcast", "group": "world", "count": 5, "dtype": "int32", "root": 2},
    ]}


def test_the_documented_workload_reads():
    wl = traces.load([str(REPO / "docs" / "workloads" / "fsdp-tp.json")])
    assert len(wl.groups) == 5 and len(wl.ranks[0]) == 22 and not wl.skipped


def test_a_hand_written_workload_runs_and_is_judged(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(WORKLOAD))
    out = tmp_path / "r.json"
    proc = replay(str(path), "-n", "2", "--json", str(out), "--max-slowdown", "1.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # 1 s per call in the "job": never slower here
    rows = records.load(str(out)).rows
    assert sum(r["nwrong"] for r in rows) == 0
    by = {(r["collective"], tuple(r["group_ranks"])): r for r in rows}
    assert by[("all_gather", (0, 2))]["calls"] == 2 and by[("all_gather", (0, 2))]["trace_time_us"] == 1e6
    assert by[("send/recv", (0, 1))]["bytes"] == 77 * 4
    assert by[("reduce_scatter", (1, 3))]["bytes"] == 1003 * 2 * 4
    slow = dict(WORKLOAD, steps=[dict(WORKLOAD["steps"][0], time_us=0.001)])
    path.write_text(json.dumps(slow))
    proc = replay(str(path), "-n", "3", "--json", str(tmp_path / "r2.json"), "--max-slowdown", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL all_gather" in proc.stdout and "more than --max-slowdown 2" in proc.stdout


def kineto(rank: int, world: int) -> dict:
    """A profiler trace as PyTorch writes one for NCCL: CPU record_param_comms events, kernels with the
    same args and their durations (gloo records neither, so the test writes them as NCCL's look)."""
    args = lambda name, n_in, n_out: {"Collective name": name, "In msg nelems": n_in, "Out msg nelems": n_out,  # noqa
                                      "dtype": "BFloat16", "Process Group Name": "0",
                                      "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]",
                                      "Group size": world}
    ev = []
    for step in range(3):
        for k, (name, n_in, n_out, dur) in enumerate((("_allgather_base", 4096, 8192, 150.0),
                                                      ("_reduce_scatter_base", 8192, 4096, 120.0),
                                                      ("allreduce", 1, 1, 9.0))):
            ts = step * 1000 + k * 100
            ev.append({"name": "record_param_comms", "cat": "cpu_op", "ts": ts, "dur": 5,
                       "args": args(name, n_in, n_out)})
            ev.append({"name": f"ncclDevKernel_{name}", "cat": "kernel", "ts": ts + 10, "dur": dur,
                       "args": args(name, n_in, n_out)})
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world,
                                                      "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                                                     "ranks": [0, 1]}]},
            "traceEvents": ev}


def test_a_profiler_trace_replays_with_the_jobs_durations(tmp_path):
    import gzip
    for r in range(2):
        (tmp_path / f"trace_rank{r}.json").write_text(json.dumps(kineto(r, 2)))
    wl = traces.load([str(tmp_path)])
    (tmp_path / "gz").mkdir()
    for r in range(2):  # PyTorch's own handler writes .pt.trace.json.gz
        packed = gzip.compress(json.dumps(kineto(r, 2)).encode())
        (tmp_path / "gz" / f"trace_rank{r}.pt.trace.json.gz").write_bytes(packed)
    assert traces.load([str(tmp_path / "gz")]).ranks == wl.ranks
    assert [(op.collective, op.in_count, op.out_count, op.duration_us) for op in wl.ranks[1][:3]] == [
        ("all_gather", 4096, 8192, 150.0), ("reduce_scatter", 8192, 4096, 120.0), ("all_reduce", 1, 1, 9.0)]
    out = tmp_path / "r.json"
    proc = replay(str(tmp_path / "trace_rank0.json"), str(tmp_path / "trace_rank1.json"), "-n", "2",
                  "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = records.load(str(out))
    assert {r["trace_time_us"] for r in doc.rows} == {150.0, 120.0, 9.0}
    assert doc.meta["sequence"]["trace_us"] == 3 * (150 + 120 + 9)


# --- bad input --------------------------------------------------------------------------------------
class Hostile:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_a_command_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    bad = tmp_path / "nccl_trace_rank_0"
    bad.write_bytes(pickle.dumps({"version": "2.10", "entries": [], "x": Hostile(marker)}))
    err = one_line_error(replay(str(bad)))
    assert "asks for posix.system" in err or "asks for os.system" in err, err
    assert "refused" in err and not marker.exists()


@pytest.mark.parametrize("make,says", [
    (lambda d: (d / "notes_rank0.txt").write_text("hello"), "not a trace this replay reads"),
    (lambda d: (d / "dump_rank0.pkl").write_bytes(pickle.dumps({"version": "2.10", "entries": [1] * 50})[:40]),
     "a truncated pickle"),
    (lambda d: (d / "w.json").write_text(json.dumps(dict(WORKLOAD, steps=[{"collective": "allgatherv", "group": "world",
                                                                           "count": 4}]))),
     "collective 'allgatherv'"),
    (lambda d: (d / "w.json").write_text(json.dumps(dict(WORKLOAD, groups={"world": [0, 9]}))), "group 'world'"),
    (lambda d: (d / "empty_rank0.pkl").write_bytes(b""), "an empty file"),
])
def test_bad_input_is_one_line(tmp_path, make, says):
    make(tmp_path)
    err = one_line_error(replay(*(str(p) for p in tmp_path.iterdir())))  # the file itself, named
    assert says in err, err


def test_a_folder_with_no_trace_in_it_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    assert "a folder with no Flight Recorder dump" in one_line_error(replay(str(tmp_path)))


def test_dumps_that_disagree_on_a_group_are_one_line(dumps, tmp_path):
    for r in range(2):
        doc = json.loads((dumps / "json" / f"dump_rank{r}.json").read_text())
        doc["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]" if r == 0 else "[0, 1, 2]"}}
        (tmp_path / f"dump_rank{r}.json").write_text(json.dumps(doc))
    err = one_line_error(replay(str(tmp_path)))
    assert "disagree on a group" in err


def test_a_call_with_no_replay_is_left_out_and_the_rest_runs(dumps, tmp_path):
    for r in range(RANKS):
        doc = pickle.loads((dumps / f"dump_rank{r}.pkl").read_bytes())
        doc["entries"][0]["profiling_name"] = "gloo:allgather_coalesced_object"
        (tmp_path / f"dump_rank{r}.pkl").write_bytes(pickle.dumps(doc))
    wl = traces.load([str(tmp_path)])
    assert any("allgather_coalesced_object" in s for s in wl.skipped)
    assert len(wl.ranks[0]) == 19


def test_a_trace_from_more_ranks_replays_the_groups_that_fit(dumps):
    wl = traces.load(dump_files(dumps)).fit(2)
    assert set(wl.groups) == {k for k, g in traces.load(dump_files(dumps)).groups.items() if max(g.ranks) < 2}
    assert [g.ranks for g in wl.groups.values()] == [(0, 1)]
    said = " ".join(wl.notes)
    assert "left out group default_pg [0, 1, 2, 3]: rank 3 is beyond the 2 rank(s) here" in said
    assert "dp0 [0, 2]" in said and sorted(wl.ranks) == [0, 1]
    assert {op.group for ops in wl.ranks.values() for op in ops} == set(wl.groups)


GPU_RUN = REPO / "results" / "h100x2" / "replay"


def test_a_real_nccl_jobs_dumps_and_traces_read_as_the_job_ran():
    """The committed 2 x H100 FSDP2 run: NCCL's dumps (pg_config ranks as a string, durations) and its
    gzip'd profiler traces (kernels: durations, ready times, overlap) read into the same calls."""
    fr = traces.load([str(GPU_RUN / "fr")])
    assert [g.ranks for g in fr.groups.values()] == [(0, 1)] and fr.duration_known()
    per_step = [(op.collective, op.in_count, op.out_count, op.dtype) for op in fr.ranks[0][:12]]
    assert per_step.count(("all_gather", 25179136, 50358272, "bfloat16")) == 8
    assert per_step.count(("reduce_scatter", 50358272, 25179136, "float32")) == 4
    assert len(fr.ranks[0]) == len(fr.ranks[1]) == 60  # five steps
    kt = traces.load([str(GPU_RUN / "kineto")])
    assert len(kt.ranks[0]) == 24 and all(op.duration_us and op.ready_us is not None for op in kt.ranks[0])
    # a call's ready time is its group's: its last end less its latest start, within the longest of its kernels
    assert all(op.ready_us == theirs.ready_us <= max(op.duration_us, theirs.duration_us) + 0.01 and 0 <= op.overlap <= 1
               for op, theirs in zip(kt.ranks[1], kt.ranks[0]))
    calls = lambda ops: [(op.collective, op.in_count) for op in ops]  # noqa: E731
    assert calls(kt.ranks[0]) == calls(fr.ranks[0][-24:])
