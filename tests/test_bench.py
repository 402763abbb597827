"""`bench` as users run it: real multi-process jobs on gloo, JSON fields, bad input."""
import json
import os

import pytest

from helpers import one_line_error, run
from nccl_bench.records import bench_layouts
from nccl_bench.records import bench as benchfile
from nccl_bench import records
from nccl_bench.bench.options import BenchOptions
from nccl_bench.bench.worker import _exit_code
from nccl_bench.bench.table import footer, table
from nccl_bench.core.errors import UsageError
from nccl_bench.job.options import JobOptions

SMALL = ["--backend", "gloo", "-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1", "-c", "1"]


def bench(tmp_path, *args, name="out.json"):
    out = tmp_path / name
    proc = run(["-m", "nccl_bench", "bench", *SMALL, *args, "--json", str(out)], timeout=120)
    return proc, (records.load(str(out)) if out.exists() else None)


def test_all_collectives_three_ranks_two_init_modes(tmp_path):
    proc, doc = bench(tmp_path, "--nranks", "3", "--collective", "all", "--init", "regular,scoped")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = doc.every_cycle()
    names = {r["collective"] for r in rows}
    assert names == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv",
                     "gather", "scatter", "alltoallv"}
    assert "# skipped hypercube: hypercube needs a power-of-two number of ranks, not 3" in proc.stdout
    assert {r["init"] for r in rows} == {"regular", "scoped"}
    for r in rows:
        assert set(r) >= {"size", "count", "type", "redop", "root", "out_of_place", "in_place",
                          "collective", "algo", "init"}
        for place in ("out_of_place", "in_place"):
            assert set(r[place]) == {"time", "alg_bw", "bus_bw", "nwrong"}
            assert r[place]["nwrong"] == 0
            assert r[place]["alg_bw"] == pytest.approx(r["size"] / (r[place]["time"] * 1e-6) / 1e9)
        factor = {"all_reduce": 4 / 3, "all_gather": 2 / 3, "reduce_scatter": 2 / 3, "alltoall": 2 / 3,
                  "gather": 2 / 3, "scatter": 2 / 3, "alltoallv": 2 / 3}.get(
            r["collective"], 1.0)
        assert r["out_of_place"]["bus_bw"] == pytest.approx(r["out_of_place"]["alg_bw"] * factor)
    ag = [r for r in rows if r["collective"] == "all_gather" and r["init"] == "regular"]
    assert [r["size"] for r in ag] == [48, 480, 4080]  # 8 B has no element per rank; 16-byte chunks
    said = "no row at 8 B: a rank's share rounds down to 0 elements on 3 ranks"
    # once per chunked collective, over both inits
    assert f"# all_gather float: {said}" in proc.stdout and proc.stdout.count(said) == 6
    meta = doc.meta
    assert meta["backend"] == "gloo" and meta["bench"]["nranks"] == 3 and "versions" in meta and "git_sha" in meta
    assert "# Out of bounds values : 0 OK" in proc.stdout and "# Avg bus bandwidth" in proc.stdout
    assert "size" in proc.stdout and "busbw" in proc.stdout and "#wrong" in proc.stdout


def test_warm_up_bounded_by_time_keeps_ranks_in_step(tmp_path):
    """--warmup_ms: each rank decides from its own clock when the warm-up has lasted long enough; the ranks
    agree on the number of rounds (a rank alone in one more round would hang the sweep)."""
    proc, doc = bench(tmp_path, "--nranks", "3", "--collective", "all_reduce,gather,sendrecv", "--warmup_ms", "300",
                      "-b", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert doc.meta["bench"]["warmup_ms"] == 300
    # under one element, said as such where the whole count moves; a rank's share where each gets a part
    assert "# all_reduce float: no row at 2 B: under one float (4 B) (nccl-tests' rounding" in proc.stdout
    assert "# gather float: no row at 2, 16 B: a rank's share rounds down to 0 elements on 3 ranks" in proc.stdout
    assert all(r[p]["nwrong"] == 0 for r in doc.every_cycle() for p in ("out_of_place", "in_place"))


def test_avg_half_min_aggregate_and_never_overwrite(tmp_path):
    proc, doc = bench(tmp_path, "--collective", "all_reduce,reduce_scatter,reduce", "-o", "avg", "-d", "half",
                      "-a", "2", "-r", "1", "-z", "-N", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # -N 2: each cycle printed and kept, as nccl-tests' --run_cycles; readers take the median per point
    assert proc.stdout.count("cycle 2/2") == 3 and doc.meta["bench"]["run_cycles"] == 2
    rows = doc.every_cycle()
    assert sorted({r["cycle"] for r in rows}) == [0, 1]
    # each point's spread across its cycles goes in the file, and the table has a spread column
    assert all(set(r["spread_pct"]) == {"out_of_place", "in_place"} and isinstance(r["unstable"], bool) for r in rows)
    assert " spread" in proc.stdout
    per_point = records.load(str(tmp_path / "out.json")).rows
    assert len(per_point) * 2 == len(rows) and {r["cycles"] for r in per_point} == {2}
    assert {r["type"] for r in rows} == {"half"} and {r["redop"] for r in rows} == {"avg"}
    assert {r["root"] for r in rows if r["collective"] == "reduce"} == {1}
    assert doc.meta["bench"]["average"] == "min" and doc.meta["bench"]["blocking"] is True
    before = (tmp_path / "out.json").read_text()
    err = one_line_error(run(["-m", "nccl_bench", "bench", *SMALL, "--json", str(tmp_path / "out.json")]))
    assert "never overwritten" in err
    assert (tmp_path / "out.json").read_text() == before


def test_report_cputime_shows_host_time_per_launch(tmp_path):
    proc, doc = bench(tmp_path, "--nranks", "2", "-C", "1", "-N", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "host time per launch" in proc.stdout
    for r in json.loads((tmp_path / "out.json").read_text())["results"]:  # the file as nccl-tests writes it
        for place in ("out_of_place", "in_place"):
            assert set(r[place]) == {"cpu_time", "alg_bw", "bus_bw", "nwrong"}  # nccl-tests' -C 1 key
            assert r[place]["cpu_time"] == pytest.approx(r["host_us"][place]) and r[place]["cpu_time"] > 0
    meta = doc.meta["bench"]
    assert meta["report_cputime"] is True and meta["launch"] == "python" and meta["local_register"] == 0


@pytest.mark.parametrize("args,needle", [
    (["-b", "1M", "-e", "1K"], "larger than -e"),
    (["-f", "1"], "stepfactor must be > 1"),
    (["--collective", "gatherv"], "unknown collective"),
    (["--collective", "hypercube", "--nranks", "3"], "hypercube needs a power-of-two number of ranks, not 3"),
    (["--split", "XOR 1"], "--split: 'XOR 1' is not a split expression"),
    (["--split", "%0"], "divides by zero"),
    (["--nranks", "4", "--split", "DIV 2", "-r", "2"], "not a rank of the smallest split group (2 ranks)"),
    # unquoted, as nccl-tests' expression is typed: the same expression
    (["--nranks", "4", "--split", "DIV", "2", "-r", "2"], "not a rank of the smallest split group (2 ranks)"),
    (["-G", "5"], "-G/--cudagraph needs --backend nccl"),
    (["-R", "1"], "-R/--local_register 1 needs --backend nccl"),
    (["-x", "1"], "-x/--cta_policy 1 needs --backend nccl"),
    (["-D", "1"], "-D/--device_implementation 1: nccl-tests' -D > 0 runs kernels of its own"),
])
def test_bad_input_one_line_exit_2(args, needle):
    err = one_line_error(run(["-m", "nccl_bench", "bench", "--backend", "gloo", *args]))
    assert needle in err


@pytest.mark.parametrize("kw,needle", [
    ({"datatype": "float8"}, "unknown type"),
    ({"op": "mul"}, "unknown reduction"),
    ({"op": "avg", "datatype": "int32"}, "avg needs a floating type"),
    ({"stepfactor": 0.5}, "stepfactor"),
    ({"maxbytes": 1 << 40}, "too large"),
    ({"algo": ["tree"], "collective": ["all_gather"]}, "no collective"),
    ({"algo": ["fast"]}, "unknown algorithm"),
    ({"average": "median"}, "-a/--average"),
    ({"iters": 0}, "-n/--iters"),
    ({"run_cycles": 0}, "-N/--run_cycles"),
    ({"check": -1}, "-c/--check"),
    ({"local_register": 3}, "-R/--local_register must be 0, 1 or 2"),
    ({"cta_policy": 3}, "-x/--cta_policy must be 0 .default., 1 .efficiency. or 2 .zero., got 3"),
    ({"device_cta_count": 0}, "-V/--device_cta_count must be 1-128, got 0"),
    ({"warmup_ms": -1}, "--warmup_ms must be 0..60000"),
])
def test_bad_options(kw, needle):
    with pytest.raises(UsageError, match=needle.replace("/", ".")):
        BenchOptions(job=JobOptions(backend="gloo"), **kw)


def test_torch_free_type_tables_match_torch():
    """bench checks types and sizes before torch loads; its tables must say what torch says."""
    import torch
    from nccl_bench.measure.vocabulary import DTYPES, ELEMENT_BYTES, TYPE_NAMES
    assert set(ELEMENT_BYTES) == set(DTYPES.values()) == set(TYPE_NAMES)
    for name, size in ELEMENT_BYTES.items():
        assert torch.empty((), dtype=getattr(torch, name)).element_size() == size, name


def test_a_small_sweep_without_torch_fits_any_gpu_unasked():
    """The check's kernels keep no temporaries: a first-row sweep's need is its buffers, small enough that NVML
    is not asked (why_not answers without it); torch's check adds its temporaries and is asked."""
    from nccl_bench.measure import datacheck, fits
    buffers = fits.need_bytes(["all_reduce"], 8, ["float"], 2, check_temporaries=False)
    assert buffers == 16
    assert fits.need_bytes(["all_reduce"], 8, ["float"], 2) == buffers + 4 * datacheck.CHUNK * 8
    assert fits.why_not("nccl", buffers, 2) is None and buffers <= fits.FITS_ANY_GPU


def test_each_bench_communicator_exchanges_ids_in_a_namespace_of_its_own():
    """--algo ring,tree or several --init: the second communicator's rank must not read the first one's ID under
    keys PyTorch reuses (the torch backend's second init failed with ncclRemoteError on 2 x H200)."""
    from types import SimpleNamespace
    from nccl_bench.bench.worker import _plan
    job = SimpleNamespace(rank=0, nranks=2, store=None, namespace="bench", ident=SimpleNamespace(local_rank=0))
    o = BenchOptions(job=JobOptions(backend="gloo"), algo=["ring", "tree"])
    spaces = {_plan(job, o, "regular", algo, n).namespace for n, algo in enumerate(["ring", "tree"], 1)}
    assert len(spaces) == 2


def test_algo_pairs_skip_what_nccl_lacks():
    o = BenchOptions(job=JobOptions(backend="gloo"), collective=["all"], algo=["ring", "tree"])
    pairs = o.pairs()
    assert ("tree", "all_reduce") in pairs and ("tree", "all_gather") not in pairs
    assert ("ring", "sendrecv") in pairs and ("tree", "sendrecv") not in pairs  # p2p once
    assert ("tree", "broadcast") in o.skipped()


def _row(wrong, algo="default", confirmed=None):
    place = {"time": 10.0, "alg_bw": 1.0, "bus_bw": 2.0, "nwrong": wrong}
    return {"collective": "all_reduce", "size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
            "out_of_place": place, "in_place": dict(place), "algo": algo, "algo_confirmed": confirmed}


def _bench_row(*a, **kw) -> benchfile.BenchRow:
    return benchfile.BenchRow.from_json(_row(*a, **kw))


def test_wrong_values_and_unconfirmed_algo_exit_1():
    o = BenchOptions(job=JobOptions(backend="gloo"))
    assert _exit_code([_bench_row(0)], {}, o) == 0
    assert _exit_code([_bench_row(3)], {}, o) == 1
    assert "# Out of bounds values : 6 FAILED" in footer([_bench_row(3)])
    assert _exit_code([_bench_row(0, "tree", "TREE")], {}, o) == 0
    assert _exit_code([_bench_row(0, "tree", "RING")], {}, o) == 1
    assert "N/A" in table([_bench_row(None)], "t")


def test_min_bw_fails_an_average_below_nine_tenths_of_it_as_nccl_tests_does():
    rows = [_bench_row(0)]  # busbw 2.0 GB/s in both places
    assert _exit_code(rows, {}, BenchOptions(job=JobOptions(backend="gloo"), min_bw=2.2)) == 0  # 2.0 >= 0.9 x 2.2
    assert _exit_code(rows, {}, BenchOptions(job=JobOptions(backend="gloo"), min_bw=2.3)) == 1
    assert footer(rows, 2.2).splitlines()[1] == "# Avg bus bandwidth    : 2 OK"
    assert footer(rows, 2.3).splitlines()[1] == "# Avg bus bandwidth    : 2 FAILED"
    assert footer(rows).splitlines()[1] == "# Avg bus bandwidth    : 2"
    doc = benchfile.document(rows, {}, {}, [], "", [], [], 2.3)
    assert doc["average_bus_bandwidth"] == {"bandwidth": 2.0, "okay": "false"}
    assert benchfile.document(rows, {}, {}, [], "", [], [])["average_bus_bandwidth"]["okay"] == "unchecked"


def test_min_bw_from_the_environment_fails_a_real_run(tmp_path):
    out = tmp_path / "b.json"
    proc = run(["-m", "nccl_bench", "bench", *SMALL, "-e", "8", "-J", str(out)], env={"NCCL_TESTS_MIN_BW": "1e6"})
    assert proc.returncode == 1 and "FAILED" in proc.stdout.splitlines()[-2], proc.stdout[-1000:]
    doc = json.loads(out.read_text())
    assert doc["average_bus_bandwidth"]["okay"] == "false" and doc["meta"]["bench"]["min_bw"] == 1e6


def test_a_bench_row_reads_back_from_its_json_form():
    row = _bench_row(0)
    assert benchfile.BenchRow.from_json(row.to_json()) == row
    assert row.to_json("x")["root"] == "    -1" and row.to_json("x")["experiment_name"] == "x"
    assert list(row.to_json())[:6] == ["size", "count", "type", "redop", "root", "out_of_place"]


def test_median_over_cycles_per_point():
    rows = []
    for cycle, t in enumerate((10.0, 30.0, 20.0)):
        r = _row(0)
        r["cycle"] = cycle
        r["out_of_place"] = {"time": t, "alg_bw": 100 / t, "bus_bw": 200 / t, "nwrong": cycle}
        rows.append(r)
    (one,) = bench_layouts.median_over_cycles(rows)
    assert one["cycles"] == 3 and "cycle" not in one
    assert one["out_of_place"] == {"time": 20.0, "alg_bw": 5.0, "bus_bw": 10.0, "nwrong": 3}
    assert bench_layouts.median_over_cycles([_row(0)]) == [_row(0)]  # one cycle: untouched


def test_point_to_point_collectives_four_ranks_exact_in_and_out_of_place(tmp_path):
    proc, doc = bench(tmp_path, "--nranks", "4", "--collective", "gather,scatter,alltoallv,hypercube", "-r", "3",
                      "-b", "1K", "-e", "64K", "-f", "64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = doc.every_cycle()
    assert {r["collective"] for r in rows} == {"gather", "scatter", "alltoallv", "hypercube"} and len(rows) == 8
    for r in rows:
        assert r["out_of_place"]["nwrong"] == 0 and r["in_place"]["nwrong"] == 0  # the CPU checks in place too
        assert r["root"] == (3 if r["collective"] in ("gather", "scatter") else -1)
        t, place = r["out_of_place"]["time"] * 1e-6, r["out_of_place"]
        moved = r["count"] * 3 * 4 if r["collective"] == "hypercube" else r["size"]  # hypercube: (n-1) chunks
        assert place["alg_bw"] == pytest.approx(moved / t / 1e9)
        assert place["bus_bw"] == pytest.approx(place["alg_bw"] * (1.0 if r["collective"] == "hypercube" else 0.75))
    sizes = {r["collective"]: r["size"] for r in rows if r["size"] > 60000}
    assert sizes == {"gather": 65536, "scatter": 65536, "hypercube": 65536, "alltoallv": 65520}


def test_split_two_groups_of_two(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_TESTS_SPLIT_MASK", "0x1")  # nccl-tests' variable: color = rank & 1
    proc, doc = bench(tmp_path, "--nranks", "4", "--collective", "all_reduce,hypercube", "-b", "4K", "-e", "4K")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = doc.every_cycle()
    assert sorted((r["collective"], r["group"], r["color"], r["nranks"]) for r in rows) == [
        ("all_reduce", 0, 0, 2), ("all_reduce", 1, 1, 2), ("hypercube", 0, 0, 2), ("hypercube", 1, 1, 2)]
    assert all(r[p]["nwrong"] == 0 for r in rows for p in ("out_of_place", "in_place"))
    for r in rows:  # busbw for the group's 2 ranks: all_reduce's 2 (n-1) / n is 1, not 1.5 as for 4
        assert r["out_of_place"]["bus_bw"] == pytest.approx(r["out_of_place"]["alg_bw"])
    assert doc.meta["bench"]["split"] == "AND 0x1" and "split AND 0x1: group 0 of 2" in proc.stdout


def test_split_colors():
    from nccl_bench.bench import split
    assert split.groups("MOD 2", 4) == {0: [0, 2], 1: [1, 3]}
    assert split.groups("/2", 4) == {0: [0, 1], 1: [2, 3]}
    assert split.groups("&0b10", 4) == {0: [0, 1], 2: [2, 3]}
    assert split.groups("or 1", 4) == {1: [0, 1], 3: [2, 3]}
    assert split.groups(None, 3) == {0: [0, 1, 2]}
    assert split.from_env({"NCCL_TESTS_SPLIT_MASK": "3", "NCCL_TESTS_SPLIT": "MOD 2"}) == "AND 0x3"
    assert split.from_env({"NCCL_TESTS_SPLIT": "DIV 0x4"}) == "DIV 0x4" and split.from_env({}) is None
    with pytest.raises(UsageError, match="NCCL_TESTS_SPLIT_MASK"):
        split.from_env({"NCCL_TESTS_SPLIT_MASK": "0xg"})


def test_views_move_with_the_iteration_as_in_nccl_tests():
    import torch
    from nccl_bench.measure import collectives
    from nccl_bench.measure.sweep import _views
    send_buf, recv_buf = torch.arange(64), torch.arange(100, 164)
    lay = collectives.get("all_gather").layout(64, 4, 2, 1)  # 8 elements per rank, rank 1
    send, recv = _views(send_buf, recv_buf, lay, in_place=False, shift=16)
    assert send.tolist() == list(range(16, 24)) and recv.tolist() == list(range(116, 132))
    send, recv = _views(send_buf, recv_buf, lay, in_place=True, shift=16)
    assert recv.tolist() == list(range(116, 132)) and send.tolist() == list(range(124, 132))  # rank 1's slot


def test_a_point_whose_cycles_differ_over_10_percent_is_flagged_unstable():
    from nccl_bench.bench.table import footer, table
    from nccl_bench.measure.sweep import with_spread
    rows = []
    for cycle, (t8, t16) in enumerate(((10.0, 20.0), (12.0, 20.5))):  # 8 B: 18 % apart; 16 B: 2.5 %
        for size, t in ((8, t8), (16, t16)):
            r = _row(0)
            r.update(size=size, cycle=cycle)
            r["out_of_place"] = {"time": t, "alg_bw": 1.0, "bus_bw": 2.0, "nwrong": 0}
            rows.append(benchfile.BenchRow.from_json(r))
    rows = with_spread(rows)
    by = {(r.size, r.cycle): r for r in rows}
    assert by[(8, 0)].unstable and by[(8, 1)].unstable and not by[(16, 0)].unstable
    assert round(by[(8, 0)].spread_pct["out_of_place"], 1) == 18.2 and by[(8, 0)].spread_pct["in_place"] == 0
    text = table(rows, "t")
    assert text.count("UNSTABLE") == 2 and "2.5%" in text
    assert "# Unstable points      : 1 " in footer(rows)
    (one8, _) = bench_layouts.median_over_cycles([r.to_json() for r in rows])
    assert one8["unstable"] and one8["spread_pct"]["out_of_place"] > 18


def test_a_table_printed_row_by_row_is_the_table_printed_at_once(capsys):
    """bench prints each row the moment it is measured (as nccl-tests does); the columns are fixed-width, so
    the lines are those of the whole table, and a wide value pushes only its own row."""
    from nccl_bench.bench.table import Streamed, table
    rows = []
    for size, t in ((8, 10.0), (1 << 30, 123456789.5)):
        r = _row(0 if size == 8 else None)
        r.update(size=size, count=size // 4)
        r["out_of_place"] = {"time": t, "alg_bw": 1.0, "bus_bw": 2.0, "nwrong": 0}
        rows.append(benchfile.BenchRow.from_json(r))
    printed = Streamed("all_reduce  algo default", 1, per_iter=False, stamped=False, cpu=False)
    for r in rows:
        printed.row(r)
    printed.close()
    streamed = capsys.readouterr().out.rstrip("\n")
    assert streamed == table(rows, "all_reduce  algo default")
    lines = streamed.splitlines()
    assert lines[2].startswith("#") and lines[2].index("size") == lines[3].index("8") - 3  # right-aligned
    assert "123456789.50" in lines[4] and len(lines[4]) > len(lines[3])


def test_a_communicator_forced_to_an_algorithm_leaves_the_next_one_the_users_choice(monkeypatch):
    """bench --algo ring,default: NCCL reads NCCL_ALGO at each init; the default communicator after a ring one
    gets what the user's environment said, not ring."""
    from nccl_bench.comm import plan as plans
    monkeypatch.setitem(plans._USERS, "NCCL_ALGO", None)
    monkeypatch.setitem(plans._USERS, "NCCL_PROTO", "Simple")
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    monkeypatch.delenv("NCCL_PROTO", raising=False)  # both restored after the test
    make = lambda algo, proto=None: plans.InitPlan(rank=0, nranks=1, mode="regular", ranks_per_root=1,  # noqa: E731
                                                   counter=0, store=None, algo=algo, proto=proto)
    plans.choose_algorithm(make("Ring", "LL"))
    assert os.environ["NCCL_ALGO"] == "Ring" and os.environ["NCCL_PROTO"] == "LL"
    plans.choose_algorithm(make(None))
    assert "NCCL_ALGO" not in os.environ and os.environ["NCCL_PROTO"] == "Simple"
