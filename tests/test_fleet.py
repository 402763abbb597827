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
