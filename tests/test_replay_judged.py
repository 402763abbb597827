"""A replay judged: accept's verdict on its sequence time (the job's own trace, or a golden node's replay
of the same workload), the golden profile's round trip, and the fleet reading replay files. Pure."""
from __future__ import annotations

import json
import random

from nccl_bench.core.results import SCHEMA_VERSION
from nccl_bench.accept import golden
from nccl_bench.records import profiles
from nccl_bench.accept import verdicts
from nccl_bench.fleet import outliers as fleet

M = {"replay_sequence_us": 1000.0, "replay_trace_us": 900.0, "replay_wrong": 0, "replay_workload": "abc",
     "replay_spread": 0.02, "replay_max_slowdown": 1.25}


def by_check(vs):
    return {v.check: v for v in vs}


def test_against_the_jobs_own_trace_then_a_golden_replay():
    p = profiles.load("gloo-cpu")
    v = by_check(verdicts.judge_replay(p, M))
    seq = v["replay sequence"]
    assert seq.status == "pass" and "the job's own trace 900.0 us x 1.25" in seq.detail
    v = by_check(verdicts.judge_replay(p, dict(M, replay_trace_us=700.0)))
    assert v["replay sequence"].status == "fail"  # 1000 > 700 x 1.25
    gold = golden.record({**M, "replay_sequence_us": 800.0}, {}, "gloo", [], "golden0", None)
    assert gold.replay == {"workload": "abc", "sequence_max_us": round(800 * 1.07, 1)}
    back = profiles.parse(profiles.to_doc(gold), "golden.json")
    assert back.replay == gold.replay
    v = by_check(verdicts.judge_replay(back, M))  # the golden replay wins over the trace: 1000 > 856
    assert v["replay sequence"].status == "fail" and "golden node's replay" in v["replay sequence"].detail
    v = by_check(verdicts.judge_replay(back, dict(M, replay_workload="other", replay_trace_us=None)))
    assert v["replay sequence"].status == "skip"  # another workload, and no durations
    assert by_check(verdicts.judge_replay(p, dict(M, replay_wrong=3)))["replay wrong results"].status == "fail"


def replay_doc(host: str, seq: float, ag: float, wrong: int = 0) -> dict:
    rows = [{"collective": "all_gather", "bytes": 64 << 20, "dtype": "bfloat16", "group_ranks": [0, 1], "calls": 4,
             "time_us": ag, "nwrong": wrong},
            {"collective": "all_reduce", "bytes": 4, "dtype": "float32", "group_ranks": [0, 1], "calls": 1,
             "time_us": 9.0, "nwrong": 0}]
    return {"kind": "replay", "schema": SCHEMA_VERSION, "rows": rows,
            "meta": {"hosts": [host], "sequence": {"here_median_us": seq}}}


def test_the_fleet_names_the_node_whose_replay_is_slow(tmp_path):
    rng = random.Random(3)
    for i in range(12):
        slow = 1.4 if i == 5 else 1.0
        doc = replay_doc(f"node{i:02d}", 1000 * slow * (1 + rng.uniform(-0.02, 0.02)), 250 * slow,
                         wrong=7 if i == 9 else 0)
        (tmp_path / f"replay-node{i:02d}.json").write_text(json.dumps(doc))
    nodes, _ = fleet.read([str(tmp_path)])
    assert nodes["node05"].value("replay sequence us") > 1300
    assert "replay all_gather 64 MiB bfloat16 [0,1] us" in nodes["node00"].values
    assert any("wrong values in the replay" in e for e in nodes["node09"].evidence)
    assert not fleet.higher_is_better("replay sequence us")
    found, _ = fleet.outliers(nodes)
    assert {f.node for f in found} == {"node05"}, [f.words for f in found]
