"""accept end to end on the CPU model, and its bad-input contract."""
import json
import xml.etree.ElementTree as ET

import netns
from helpers import one_line_error, run
from nccl_bench import records

# accept's flags for an end-to-end run on the CPU model that records the node as a golden one
END_TO_END = ["--backend", "gloo", "--profile", "gloo-cpu", "--init-rounds", "3", "--stress-rounds", "4"]


# Where nodes can be made, tests/test_multinode.py runs this on node0, beside node1's; only elsewhere does it
# run here (defined there alone, so that a run with nodes shows no skip for it).
if netns.why_not() is not None:
    def test_accept_gloo_end_to_end(tmp_path):
        out, xml, golden = tmp_path / "accept.json", tmp_path / "accept.xml", tmp_path / "golden.json"
        proc = run(["-m", "nccl_bench", "accept", *END_TO_END, "--json", str(out), "--junit", str(xml),
                    "--record-baseline", str(golden)], timeout=400)
        check_end_to_end(proc.returncode, proc.stdout + proc.stderr, out, xml, golden)


def check_end_to_end(code: int, text: str, out, xml, golden):
    """... recording this node as a golden one: its profile judges its own measurements as PASS."""
    assert code == 0, text[-4000:]
    assert "accept PASS against profile gloo-cpu" in text
    doc = records.load(str(out))
    checks = {r["check"]: r for r in doc.rows}
    assert checks["busbw all_reduce 1 MiB"]["status"] == "pass"
    assert checks["wrong results"]["measured"] == 0 and checks["stress failures"]["measured"] == 0
    assert [s["status"] for s in doc.meta["steps"]] == ["ran"] * 4
    root = ET.parse(xml).getroot()
    assert root.tag == "testsuites"
    names = [c.get("name") for c in root.iter("testcase")]
    assert "busbw all_reduce 1 MiB" in names and int(root.get("failures", 0)) == 0
    base = json.loads(golden.read_text())
    assert base["origin"] == "baseline" and base["derivation"]["spread_pct"], base
    floors = {(f["collective"], f["bytes"]): f["min"] for f in base["busbw_min_GBps"]}
    got = doc.meta["measurements"]["busbw"]
    for (coll, size), floor in floors.items():  # floor = golden x (1 - 0.05 - spread), spread from 3 cycles
        tol = base["derivation"]["tolerance"][f"{coll}:{size}"]
        assert 0.05 <= tol <= 0.5 and abs(floor - got[f"{coll}:{size}"] * (1 - tol)) < 0.01
    meas = out.with_name("m.json")
    meas.write_text(json.dumps({k: doc.meta["measurements"][k] for k in ("busbw", "latency_us_8B", "init_ms_p50",
                                                                           "wrong", "stress_failures")}))
    judged = run(["-m", "nccl_bench.accept.verdicts", str(meas), "--profile", str(golden)])
    assert judged.returncode == 0 and "PASS against profile baseline-" in judged.stdout, judged.stdout


def test_accept_unknown_profile_is_exit_2():
    assert "profile" in one_line_error(run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--profile", "nope"]))


def test_accept_bad_rounds_is_exit_2():
    assert "--stress-rounds" in one_line_error(run(["-m", "nccl_bench", "accept", "--backend", "gloo",
                                                    "--stress-rounds", "0"]))


def test_steps_runs_only_those_and_the_others_checks_are_skips_said_in_the_verdict(tmp_path):
    # what an operator runs for a quick health gate (and fleet run's tests, with `-- --steps doctor`): one job
    out = tmp_path / "a.json"
    proc = run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--steps", "doctor,init", "--init-rounds", "2",
                "--json", str(out)], timeout=120)
    said = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, said
    assert "accept: not run (--steps): bench, stress" in proc.stdout, said
    assert proc.stdout.rstrip().endswith("accept PASS against profile gloo-cpu (built-in); not run (--steps): "
                                         "bench, stress"), said
    doc = records.load(str(out))
    status = {r["check"]: r["status"] for r in doc.rows}
    assert status["doctor"] == "pass" and status["init median"] == "pass", status
    assert {status[c] for c in ("busbw all_reduce 1 MiB", "latency all_reduce 8 B", "stress failures")} == {"skip"}
    assert {s["step"]: s["status"] for s in doc.meta["steps"]} == {"doctor": "ran", "init": "ran",
                                                                  "bench": "not run", "stress": "not run"}
    # fleet run's login node has no GPU: the steps a GPU node may run are the node's to judge there
    assert run(["-m", "nccl_bench", "accept", "--check-args", "--steps", "doctor,copies"]).returncode == 0
    doctor_only = out.with_name("d.json")  # no metric at all, as none was asked for: the fleet does not flag it
    doctor_only.write_text(json.dumps({**json.loads(out.read_text()), "meta": {
        **doc.meta, "measurements": {k: v for k, v in doc.meta["measurements"].items() if k != "init_ms_p50"}}}))
    fleet = run(["-m", "nccl_bench", "fleet", str(doctor_only), "--out", str(tmp_path / "f")], timeout=60)
    assert fleet.returncode == 0 and "no node(s) flagged of 1" in fleet.stdout, fleet.stdout + fleet.stderr


def test_one_rank_skips_the_busbw_floors_it_cannot_meet():
    """One rank has no peer: busbw is 0 by nccl-tests' formula, so a profile's floors are skips with that reason (the
    run said "pair checks skipped" and then failed them)."""
    from nccl_bench.accept import steps, verdicts
    from nccl_bench.accept.options import AcceptOptions
    from nccl_bench.records import profiles
    profile = profiles.load("gloo-cpu")
    m = steps.step_bench(AcceptOptions(backend="gloo", nranks=1), profile)
    assert "busbw" not in m and m["wrong"] == 0 and m["latency_us_8B"] > 0, m
    judged = [v for v in verdicts.judge(profile, m) if v.check.startswith("busbw")]
    assert judged and all(v.status == "skip" and "one rank" in v.detail for v in judged), judged
