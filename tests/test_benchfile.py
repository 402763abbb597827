"""bench -J in nccl-tests' layout (issue 15): the keys and types nccl-tests' analyze_perf_json.py reads,
-I per-iteration rows from every process, the other nccl-tests options on gloo, and files written
by nccl-tests itself read by report and compare."""
import json
import os
import subprocess
import sys

import pytest

from helpers import REPO, one_line_error, run
from nccl_bench.records import bench as benchfile
from nccl_bench.measure import collectives
from nccl_bench.report import compare
from nccl_bench.core import stats
from nccl_bench.bench.options import BenchOptions
from nccl_bench.core.errors import UsageError
from nccl_bench.job.options import JobOptions
from nccl_bench.measure.timing import TimingPlan
from nccl_bench import records

FIX = REPO / "tests" / "fixtures"
THEIRS = [FIX / "nccltests_all_reduce_I1.json", FIX / "nccltests_alltoall.json"]
ITERS, SKIP = 8, 1
ANALYZER = os.environ.get("NCCL_TESTS_ANALYZER")


@pytest.fixture(scope="module")
def per_iter_file(tmp_path_factory):
    """One gloo job: 2 ranks, -I 1 -K 1 -S 1 -M 1; (process, path)."""
    out = tmp_path_factory.mktemp("periter") / "bench.json"
    proc = run(["-m", "nccl_bench", "bench", "--backend", "gloo", "-b", "8", "-e", "32K", "-f", "64", "-n", str(ITERS),
                "-w", "1", "-I", "1", "-K", str(SKIP), "-S", "1", "-M", "1", "-J", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out


def test_layout_has_every_key_the_analyzer_reads(per_iter_file):
    proc, out = per_iter_file
    doc = json.loads(out.read_text())  # the file as nccl-tests' analyzer reads it
    assert list(doc)[:11] == ["version", "start_time", "args", "env", "nccl_version", "config", "results",
                              "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"]
    assert doc["version"] == 2 and doc["kind"] == "bench" and doc["schema"] == benchfile.SCHEMA
    cfg = doc["config"]
    assert isinstance(cfg["iterations"], int) and cfg["aggregated_iterations"] == 1
    assert cfg["per_iter_timing"] == "true" and cfg["blocking_collectives"] == "false"  # nccl-tests' bool strings
    assert [d["rank"] for d in cfg["devices"]] == [0, 1] and all(isinstance(d["hostname"], str) for d in cfg["devices"])
    assert doc["out_of_bounds"] == {"count": 0, "okay": "true"} and all("=" in e for e in doc["env"])
    assert [r["size"] for r in doc["results"]] == [8, 512, 32768]
    for r in doc["results"]:
        assert r["root"] == "    -1" and r["collective"] == "all_reduce" and r["algo"] == "default"  # ours beside
        assert list(r)[:10] == ["size", "count", "type", "redop", "root", "out_of_place", "out_of_place_per_iter",
                                "in_place", "in_place_per_iter", "actual_iterations"]
        for place in ("out_of_place_per_iter", "in_place_per_iter"):
            it = r[place]
            for key in ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct"):
                assert isinstance(it[key], float), key
            rows = it["per_process_max_times_us"]
            assert len(rows) == 2 and all(len(row) == ITERS - SKIP for row in rows)
            assert it["times_us"] == [max(a, b) for a, b in zip(*rows)]
            assert it["min_us"] == min(it["times_us"]) and it["p99_us"] == max(it["times_us"])
        assert len(r["timestamp"]) == 19  # -S
    assert "# GPU memory usage : N/A (gloo runs on the CPU); host peak RSS" in proc.stdout  # -M
    assert "i_p99" in proc.stdout and "timestamp" in proc.stdout
    res = records.load(str(out))  # ours, read back: root an int again, per-iteration blocks kept
    assert res.kind == "bench" and res.nranks == 2 and res.rows[0]["root"] == -1
    assert "out_of_place_per_iter" in res.rows[0]


@pytest.mark.skipif(not ANALYZER, reason="nccl-tests' analyzer is third-party, not in this repo: set "
                    "NCCL_TESTS_ANALYZER=/path/to/nccl-tests/tools/analyze_perf_json.py (nccl-tests 2.19.6)")
def test_nccl_tests_analyzer_reads_our_file_in_every_mode(per_iter_file):
    _, out = per_iter_file
    for mode in ([], ["--all"], ["--straggler"], ["--spikes"], ["--nodes"], ["--in-place"], ["--all", "--in-place"]):
        p = subprocess.run([sys.executable, ANALYZER, str(out), *mode], capture_output=True, text=True, timeout=60)
        text = p.stdout + p.stderr
        assert p.returncode == 0 and "Traceback" not in text, (mode, text[-2000:])
        assert "Process rows: 2" in text and "Iterations: 8" in text
        assert "Consistency (times_us == max over process rows" in text and "): PASS" in text, text
        if not mode or mode[0] == "--all":
            assert all(f"\n{s:14d}  " in text for s in (8, 512, 32768)), text  # every size in the stats table
        if "--straggler" in mode or "--all" in mode:
            assert "PER-PROCESS STRAGGLER ANALYSIS" in text and "fastest=process" in text
        if "--nodes" in mode or "--all" in mode:
            assert "PER-NODE ANALYSIS (1 nodes" in text
        if "--spikes" in mode:
            assert "SPIKE ANALYSIS" in text


def test_per_iter_statistics_follow_nccl_tests():
    s = stats.per_iter_summary([float(x) for x in range(10, 0, -1)])
    assert (s["min_us"], s["max_us"], s["p50_us"], s["p95_us"], s["p99_us"]) == (1, 10, 6, 10, 10)
    assert s["avg_us"] == 5.5 and s["stdev_us"] == pytest.approx(8.25 ** 0.5)  # population stdev
    big = stats.per_iter_summary([float(x) for x in range(200)])
    assert (big["p50_us"], big["p95_us"], big["p99_us"]) == (100, 189, 197)
    assert stats.per_iter_summary([0.0])["cv_pct"] == 0.0
    tail = stats.per_iter_summary([10.0] * 97 + [20.0, 21.0, 55.0])  # p50 10 us: 20 is not above 2 x, 21 and 55 are
    assert tail["outliers"] == 2 and big["outliers"] == 0


def test_timeout_fails_the_test_with_a_verdict(tmp_path):
    out = tmp_path / "t.json"
    proc = run(["-m", "nccl_bench", "bench", "--backend", "gloo", "-b", "16M", "-e", "16M", "-n", "100", "-w", "1",
                "-c", "0", "-T", "0.3", "-J", str(out)], timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "# test timeout: all_reduce did not finish within -T/--timeout 0.3 s" in proc.stdout
    doc = records.load(str(out))  # what was measured is kept, the error named
    assert doc.top["errors"] and doc.meta["error"]["kind"] == "hang"


def test_every_op_and_root_unaligned_and_aggregated(tmp_path):
    out = tmp_path / "all.json"
    proc = run(["-m", "nccl_bench", "bench", "--backend", "gloo", "--collective", "reduce,all_gather", "-b", "256",
                "-e", "256", "-n", "1", "-w", "0", "-o", "all", "-r", "all", "-u", "3", "-m", "2", "-p", "1",
                "-t", "1", "-g", "1", "-y", "0", "-J", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    red = [r for r in doc["results"] if r["collective"] == "reduce"]
    ops = ("sum", "prod", "min", "max", "avg")
    assert sorted((r["redop"], r["root"]) for r in red) == sorted((op, f"{root:6d}") for op in ops for root in (0, 1))
    assert [r["redop"] for r in doc["results"] if r["collective"] == "all_gather"] == ["none"]  # -o all: once
    assert all(r[p]["nwrong"] == 0 for r in doc["results"] for p in ("out_of_place", "in_place"))
    assert doc["config"]["aggregated_iterations"] == 2 and doc["config"]["parallel_init"] == "true"
    meta = records.load(str(out)).meta["bench"]
    assert meta["unalign"] == 3 and meta["agg_iters"] == 2 and meta["root"] == "all" and meta["op"] == "all"
    # every option has one name: the command line's long flag, the dataclass's field, the result's key
    from dataclasses import fields
    for f in fields(BenchOptions):
        if "flags" in f.metadata:
            assert f"--{f.name}" in {"--" + x[2:].replace("-", "_") for x in f.metadata["flags"]}, f.name
            assert f.name in meta or not f.metadata["recorded"], f.name


def test_every_type_skips_avg_on_integers():
    o = BenchOptions(job=JobOptions(backend="gloo"), collective=["all_reduce"], op="all", datatype="all")
    combos = o.combos(collectives.get("all_reduce"), 2)
    assert ("int32", "avg", 0) not in combos and ("bfloat16", "avg", 0) in combos and ("int8", "prod", 0) in combos
    assert len(combos) == 8 * 5 - 4
    assert o.combos(collectives.get("sendrecv"), 2) == [(t, "sum", 0) for t in o.types()]


def test_bad_new_option_from_the_command_line_one_line_exit_2():
    assert "-r/--root: 'x' is not a rank or all" in one_line_error(
        run(["-m", "nccl_bench", "bench", "--backend", "gloo", "-I", "1", "-r", "x"]))


@pytest.mark.parametrize("kw,needle", [
    ({"per_iter_timing": 2}, "-I/--per_iter_timing must be 0 or 1"),
    ({"per_iter_skip": 1}, "-K/--per_iter_skip needs -I"),
    ({"per_iter_timing": 1, "per_iter_skip": 20}, "-K/--per_iter_skip must be >= 0 and below -n/--iters 20"),
    ({"agg_iters": 0}, "-m/--agg_iters must be >= 1"),
    ({"unalign": -1}, "-u/--unalign must be >= 0"),
    ({"parallel_init": 2}, "-p/--parallel_init must be 0 or 1"),
    ({"ngpus": 8}, "-g/--ngpus 8: here every GPU is a rank of its own process .nccl-tests' -g 8 runs 8 GPUs in one "
                   "thread.: --nranks 8"),
    ({"nthreads": 2}, "-t/--nthreads 2: here every GPU is a rank of its own process"),
    ({"stream_null": 1}, "-y/--stream_null 1: every launch here is on a non-blocking stream"),
    ({"memory": 3}, "-M/--memory must be 0 or 1"),
    ({"report_timestamps": -1}, "-S/--report_timestamps must be 0 or 1"),
    ({"root": "some"}, "-r/--root: 'some' is not a rank or all"),
])
def test_bad_new_options(kw, needle):
    with pytest.raises(UsageError, match=needle.replace("/", ".").replace("(", ".")):
        BenchOptions(job=JobOptions(backend="gloo"), **kw)


def test_per_iter_inside_a_graph_is_refused():
    with pytest.raises(UsageError, match="-I/--per_iter_timing cannot time iterations inside a CUDA graph"):
        TimingPlan(per_iter=True, graph_replays=5)


# --- files written by nccl-tests itself ----------------------------------------------------------
def test_nccl_tests_files_read_as_bench_results():
    ar, a2a = (records.load(str(p)) for p in THEIRS)
    assert ar.kind == "bench" and ar.nranks == 2 and ar.machine == "dgx-a" and ar.versions() == "NCCL 2.28.9"
    assert [r["collective"] for r in ar.rows] == ["all_reduce"] * 4  # named from args[0]: all_reduce_perf
    assert {(r["algo"], r["init"], r["root"]) for r in ar.rows} == {("default", "regular", -1)}
    assert "out_of_place_per_iter" in ar.rows[0] and "out_of_place_per_iter" not in ar.rows[-1]
    assert a2a.rows[0]["in_place"]["skipped"] and a2a.rows[0]["in_place"]["nwrong"] is None  # null placement
    assert a2a.rows[1]["in_place"]["nwrong"] is None and a2a.rows[1]["out_of_place"]["nwrong"] == 0
    old = records.load(str(FIX / "bench_gloo.json"))  # schema 1 ({kind, schema, meta, rows}) still reads
    assert old.kind == "bench" and old.rows[0]["root"] == -1


def test_nccl_tests_run_cycles_read_as_cycles_of_one_point():
    # written by nccl-tests 2.19.6 on 4 x H200, `gather_perf -b 64K -e 64K -N 3` under mpiexec (issue 68's
    # beside-nccl-tests): -N repeats the sweep and names no cycle, so its one size is there three times
    doc = records.load(str(FIX / "nccltests_gather_N3.json"))
    assert [(r["size"], r["cycle"]) for r in doc.every_cycle()] == [(65536, 0), (65536, 1), (65536, 2)]
    assert len(doc.rows) == 1 and doc.rows[0]["cycles"] == 3 and doc.nranks == 4
    times = sorted(r["out_of_place"]["time"] for r in doc.every_cycle())
    assert doc.rows[0]["out_of_place"]["time"] == times[1]  # the median of its cycles, as bench -N gives


def test_report_and_compare_on_nccl_tests_files(tmp_path):
    slower = tmp_path / "nccltests_slower.json"
    doc = json.loads(THEIRS[0].read_text())  # nccl-tests' own layout, edited as it is
    for r in doc["results"]:
        for p in ("out_of_place", "in_place"):
            r[p]["bus_bw"] *= 0.8
            r[p]["time"] /= 0.8
    slower.write_text(json.dumps(doc))
    rows = compare.bench(records.load_all([str(slower)]), records.load_all([str(THEIRS[0])]))
    assert len(rows) == 8 and all(r["verdict"] == "regression" for r in rows)
    proc = run(["-m", "nccl_bench", "report", *map(str, THEIRS), str(FIX / "bench_gloo.json"), "--compare",
                str(slower), "--out", str(tmp_path / "rep")], timeout=120)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "nccltests_alltoall.json" in md and "| all_reduce " in md and "| alltoall " in md
    assert "## Comparison with the --compare run" in md and "improvement" in md
    assert {p.name for p in (tmp_path / "rep").glob("*.png")} >= {"busbw-all_reduce.png", "busbw-alltoall.png"}
