"""The fleet verdict over many nodes' files: a planted slow node and a planted node with wrong values are
named, and no other; two nodes are judged against their profiles only; 1,000 files in under 10 s."""
from __future__ import annotations

import json
import random
import time

import pytest

from helpers import one_line_error, run
from nccl_bench.core.results import SCHEMA_VERSION
from nccl_bench.fleet import outliers as fleet
from nccl_bench import records

G = 1 << 30
BASE = {"all_reduce:17179869184": 470.0, "all_gather:1073741824": 360.0, "reduce_scatter:1073741824": 362.0,
        "alltoall:1073741824": 340.0}


def accept_doc(host: str, rng: random.Random, slow: float = 1.0, wrong: int = 0) -> dict:
    def jitter(v):  # +-2 %, bounded: a healthy fleet
        return v * (1 + rng.uniform(-0.02, 0.02))
    busbw = {k: jitter(v) * (slow if k.startswith("all_reduce") else 1.0) for k, v in BASE.items()}
    m = {"busbw": busbw, "latency_us_8B": jitter(21.0), "init_ms_p50": jitter(160.0), "wrong": wrong,
         "stress_failures": 0, "copy_GBps": {"device_GBps": jitter(2950.0), "device_gpu": 0,
                                             "h2d_GBps": jitter(53.0), "h2d_gpu": 0, "d2h_GBps": jitter(53.0),
                                             "d2h_gpu": 0}}
    rows = [{"check": "busbw all_reduce 16 GiB", "status": "pass", "measured": busbw["all_reduce:17179869184"],
             "required": ">= 350 GB/s", "detail": ""},
            {"check": "wrong results", "status": "fail" if wrong else "pass", "measured": wrong, "required": "<= 0",
             "detail": ""}]
    return {"kind": "accept", "schema": SCHEMA_VERSION, "rows": rows,
            "meta": {"hosts": [host], "profile": "h100x8", "verdict": "FAIL" if wrong else "PASS", "measurements": m}}


def fleet_of(tmp_path, n: int, slow_node: int | None = 7, wrong_node: int | None = 23, seed: int = 1):
    rng = random.Random(seed)
    for i in range(n):
        doc = accept_doc(f"node{i:04d}", rng, slow=0.8 if i == slow_node else 1.0, wrong=12 if i == wrong_node else 0)
        (tmp_path / f"accept-node{i:04d}.json").write_text(json.dumps(doc))
    return tmp_path


def test_a_slow_node_and_a_wrong_node_are_named_and_no_other(tmp_path):
    (tmp_path / "in").mkdir()
    files = fleet_of(tmp_path / "in", 40)
    proc = run(["-m", "nccl_bench", "fleet", str(files), "--out", str(tmp_path / "out")])
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    bad = [line for line in proc.stdout.splitlines() if line.startswith("BAD ")]
    assert [line.split(":")[0] for line in bad] == ["BAD node0007", "BAD node0023"], proc.stdout
    assert "busbw all_reduce 16 GiB" in bad[0] and "below" in bad[0] and "fleet median" in bad[0]
    assert "12 wrong values" in bad[1]
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == {"fleet.md", "fleet.png", "fleet.json", "fleet.xml"}
    doc = records.load(str((out / "fleet.json")))
    assert sum(r["flagged"] for r in doc.rows) == 2 and doc.meta["nodes"] == 40
    assert 'failures="2"' in (out / "fleet.xml").read_text()


def test_two_nodes_are_judged_against_their_profiles_only(tmp_path):
    (tmp_path / "in").mkdir()
    fleet_of(tmp_path / "in", 2, slow_node=0, wrong_node=None)  # 20 % apart, but no fleet to compare with
    proc = run(["-m", "nccl_bench", "fleet", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--no-picture"])
    assert proc.returncode == 0 and "judged against their profiles only" in proc.stdout, proc.stdout


def test_a_thousand_files_in_under_ten_seconds(tmp_path):
    fleet_of(tmp_path, 1000, slow_node=500, wrong_node=900)
    t0 = time.perf_counter()
    nodes, _ = fleet.read([str(tmp_path)])
    bad, _ = fleet.verdict(nodes)
    took = time.perf_counter() - t0
    assert sorted(bad) == ["node0500", "node0900"] and took < 10, (sorted(bad)[:5], took)


def test_one_node_many_files_takes_each_metric_median(tmp_path):
    rng = random.Random(3)
    for k, slow in enumerate((1.0, 0.5, 1.0)):
        (tmp_path / f"a{k}.json").write_text(json.dumps(accept_doc("nodeA", rng, slow=slow)))
    nodes, _ = fleet.read([str(tmp_path)])
    assert list(nodes) == ["nodeA"] and len(nodes["nodeA"].files) == 3
    assert nodes["nodeA"].value("busbw all_reduce 16 GiB") > 450  # the median of three, not the slow one


@pytest.mark.parametrize("args, needle", [
    (["/nonexistent.json"], "no such file or folder"),
    (["--k", "0", "x"], "--k must be above 0"),
])
def test_bad_input_is_one_line(args, needle):
    assert needle in one_line_error(run(["-m", "nccl_bench", "fleet", *args]))


def test_a_file_of_another_kind_is_refused(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"kind": "init", "schema": SCHEMA_VERSION, "rows": [], "meta": {}}))
    assert "not one the fleet reads" in one_line_error(run(["-m", "nccl_bench", "fleet", str(tmp_path / "x.json")]))


def pairs_of(bw: dict[tuple[str, str], float]) -> list:
    from nccl_bench.fleet.links import Pair
    return [Pair(a, b, v, "busbw all_reduce 256 MiB", f"{a}-{b}.json") for (a, b), v in bw.items()]


def test_a_node_slow_with_every_partner_is_the_node_and_a_pair_slow_alone_is_the_link():
    from nccl_bench.fleet import links
    bw = {("n0", "n1"): 10.0, ("n0", "n2"): 10.0, ("n0", "n3"): 10.0, ("n1", "n2"): 47.0, ("n1", "n3"): 48.0,
          ("n2", "n3"): 20.0, ("n4", "n5"): 47.5, ("n4", "n1"): 48.0, ("n5", "n2"): 46.0}
    got = links.judge(pairs_of(bw))
    assert list(got.nodes) == ["n0"] and "3 of 3 pairs" in got.nodes["n0"]
    assert list(got.links) == ["n2-n3"] and "n2 with its other partners" in got.links["n2-n3"]
    assert got.reference == 48.0  # the median of the best quarter (2 of 9: 48, 48)


def test_one_partner_each_cannot_tell_the_node_from_the_link_and_says_so():
    from nccl_bench.fleet import links
    got = links.judge(pairs_of({("a", "b"): 10.0, ("c", "d"): 50.0}), floor=48.0)
    assert not got.nodes and "neither node measured with another partner" in got.links["a-b"]
    assert got.source == "the --link-floor given"


def test_a_link_is_named_only_where_every_measurement_of_it_was_slow():
    # fleet run measures a link's pair again before naming it: its fastest measurement counts, as a bench's fastest
    # iteration does; a node slow with every partner was measured in rounds of their own and is not asked again
    from nccl_bench.fleet import links
    bw = {("n0", "n1"): 10.0, ("n0", "n2"): 10.0, ("n0", "n3"): 10.0, ("n1", "n2"): 47.0, ("n1", "n3"): 48.0,
          ("n2", "n3"): 20.0, ("n4", "n5"): 47.5, ("n4", "n1"): 48.0, ("n5", "n2"): 5.0}
    first = links.judge(pairs_of(bw))
    assert [p.name for p in links.to_confirm(first, 2)] == ["n2-n3", "n5-n2"]  # not n0's: its node explains them
    again = pairs_of({("n2", "n3"): 19.0, ("n5", "n2"): 46.0})  # n5-n2 was noise, n2-n3 is slow again
    got = links.judge(pairs_of(bw) + again)
    assert list(got.links) == ["n2-n3"] and list(got.nodes) == ["n0"] and not links.to_confirm(got, 2)
    assert "20 GB/s between them (the fastest of 2 measurements: 20, 19)" in got.links["n2-n3"]
    assert len(got.pairs) == 9 and not links.to_confirm(got, 2)
    wrong = links.Pair("n2", "n3", 48.0, "busbw", "n2-n3.again-1.json", ("3 wrong values",))
    assert "3 wrong values" in links.judge(pairs_of(bw) + [wrong]).links["n2-n3"]  # fast, and still named


def test_pairs_measured_again_go_in_rounds_where_no_node_is_twice():
    from nccl_bench.fleet.run import disjoint_rounds
    got = disjoint_rounds([("a", "b"), ("a", "c"), ("c", "d"), ("b", "d"), ("e", "f")])
    assert got == [[("a", "b"), ("c", "d"), ("e", "f")], [("a", "c"), ("b", "d")]]


@pytest.mark.parametrize("n", [2, 3, 4, 7, 12, 13])
def test_the_pair_schedule_gives_each_node_k_partners_in_disjoint_rounds(n):
    from nccl_bench.core.tournament import partners
    for k in range(1, n):
        met: dict[int, set] = {i: set() for i in range(n)}
        for pairs in partners(n, k):
            flat = [x for p in pairs for x in p]
            assert len(flat) == len(set(flat))  # a node in one pair a round
            for a, b in pairs:
                met[a].add(b)
                met[b].add(a)
        assert all(len(v) >= k for v in met.values()), (n, k)


def test_steps_past_their_deadline_are_stopped_together_not_one_after_another(tmp_path):
    """Three silent steps of one wave, each taking 3 s to die after SIGTERM: all three are told at their deadline,
    the others are not held while one dies (a wave of silent nodes costs one grace, not one each)."""
    from nccl_bench.fleet import waves
    script = "trap 'date +%s.%N > {}; sleep 3; exit 1' TERM; sleep 100 & wait"
    steps = [waves.Step(f"s{i}", ["bash", "-c", script.format(tmp_path / f"term{i}")], 1.0, tmp_path / f"s{i}.log")
             for i in range(3)]
    out = waves.run_all(steps, 3, lambda o: None)
    told = sorted(float((tmp_path / f"term{i}").read_text()) for i in range(3))
    assert [o.code for o in out] == [None] * 3
    assert told[-1] - told[0] < 2.5, told  # one after another would be 3 s apart at least
