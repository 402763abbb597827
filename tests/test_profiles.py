"""Hardware profiles (data) and the acceptance judge (one function)."""
import csv
import json
from pathlib import Path

import pytest

from helpers import REPO, one_line_error, run
from nccl_bench.records import profiles
from nccl_bench.accept import selection
from nccl_bench.accept import verdicts
from nccl_bench.core.errors import UsageError

ANCHORS = REPO / "nccl_bench" / "report" / "anchordata"
H200 = ["NVIDIA H200", "NVIDIA H200"]


def doc(**changes):
    d = json.loads((profiles.BUILTIN_DIR / "h200x2.json").read_text())
    for k, v in changes.items():
        if v is None:
            d.pop(k)
        else:
            d[k] = v
    return d


def test_builtins_load_and_are_chosen_by_hardware():
    assert {"h200x2", "gloo-cpu"} <= set(profiles.builtin_names())
    assert selection.choose(None, "nccl", H200).name == "h200x2"
    assert selection.choose(None, "torch", H200).name == "h200x2"
    assert selection.choose(None, "gloo", []).name == "gloo-cpu"
    assert selection.choose(None, "gloo", H200).name == "gloo-cpu"
    assert selection.choose("h200x2", "gloo", []).name == "h200x2"  # --profile wins
    assert profiles.load("h200x2").sizes("all_reduce") == [2**24, 2**27, 2**30]


def test_no_profile_and_no_facts_says_how_to_pass_one():
    said = r"no built-in profile .* 4 x NVIDIA H200 and no GPU facts.*--profile NAME\|PATH"
    with pytest.raises(UsageError, match=said):
        selection.choose(None, "nccl", ["NVIDIA H200"] * 4)
    assert selection.choose(None, "nccl", ["NVIDIA A100-SXM4-80GB"] * 8).name == "a100x8"


@pytest.mark.parametrize("changes,needle", [
    ({"init_max_ms": None}, "missing field 'init_max_ms'"),
    ({"init_max_ms": "fast"}, "field 'init_max_ms' must be a number"),
    ({"wrong_max": -1}, "field 'wrong_max'"),
    ({"wrong_max": True}, "field 'wrong_max'"),
    ({"match": {"gpu_count": 2}}, "missing field 'match.backends'"),
    ({"match": {"backends": ["mpi"]}}, "field 'match.backends[0]'"),
    ({"busbw_min_GBps": [{"collective": "all_reduce", "bytes": "1G", "min": 1}]}, "busbw_min_GBps[0].bytes"),
    ({"busbw_min_GBps": [{"collective": "allreduce", "bytes": 8, "min": 1}]}, "busbw_min_GBps[0].collective"),
    ({"busbw_min_GBps": [{"collective": "all_reduce", "bytes": 8}]}, "missing field 'busbw_min_GBps[0].min'"),
    ({"busbw_min_GBps": [7]}, "busbw_min_GBps[0]"),
    ({"counters_max_increase": {"nvlink_crc": 0, "bogus": 1}}, "counters_max_increase.bogus"),
    ({"latency_8B_max_us": 0}, "latency_8B_max_us"),
    ({"latency_max": 3}, "unknown field 'latency_max'"),
])
def test_malformed_profile_names_the_field(changes, needle):
    with pytest.raises(UsageError) as e:
        profiles.parse(doc(**changes), "test.json")
    assert needle in str(e.value) and "test.json" in str(e.value)


def test_unreadable_profile_files(tmp_path):
    (tmp_path / "p.json").write_text("{name: 1")
    with pytest.raises(UsageError, match="not valid JSON"):
        profiles.load(str(tmp_path / "p.json"))
    with pytest.raises(UsageError, match="cannot read"):
        profiles.load(str(tmp_path / "absent.json"))


def test_h200_floors_are_95_percent_of_the_anchors():
    anchor = {}
    for r in csv.DictReader(open(ANCHORS / "h200x2_collectives.csv")):
        anchor[(r["collective"], int(r["bytes"]))] = float(r["oop_busbw_GBps"])
    for r in csv.DictReader(open(ANCHORS / "h200x2_allreduce.csv")):
        anchor[("all_reduce", int(r["bytes"]))] = min(float(r["ring_oop_busbw_GBps"]), float(r["tree_oop_busbw_GBps"]))
    for f in profiles.load("h200x2").busbw:
        assert f.min_GBps == pytest.approx(0.95 * anchor[(f.collective, f.bytes)], abs=0.06), f


# --- the judge ---------------------------------------------------------------------------------------
def h200_measurements(scale=1.0, **over):
    p = profiles.load("h200x2")
    m = {"busbw": {(f.collective, f.bytes): f.min_GBps / 0.95 * scale for f in p.busbw},
         "latency_us_8B": 14.0, "init_ms_p50": 36.7, "wrong": 0, "stress_failures": 0,
         "counters_before": {"gpu0/nvlink_crc": 3, "gpu1/nvlink_crc": 0, "gpu0/ecc_uncorrected_volatile": 0},
         "counters_after": {"gpu0/nvlink_crc": 3, "gpu1/nvlink_crc": 0, "gpu0/ecc_uncorrected_volatile": 0}}
    m.update(over)
    return p, m


def test_judge_passes_anchor_level_numbers():
    p, m = h200_measurements()
    judged = verdicts.judge(p, m)
    assert verdicts.all_passed(judged), verdicts.table(judged)
    names = [v.check for v in judged]
    assert "busbw all_reduce 1 GiB" in names and "counter nvlink_crc" in names and "latency all_reduce 8 B" in names
    # counters the machine never reported are skipped, not passed silently as "0"
    assert next(v for v in judged if v.check == "counter nvlink_replay").status == "skip"


def test_judge_fails_naming_check_measured_and_required():
    p, m = h200_measurements(scale=0.5, wrong=3)
    m["counters_after"] = {**m["counters_after"], "gpu1/nvlink_crc": 2}
    failed = {v.check: v for v in verdicts.judge(p, m) if v.status == "fail"}
    msg = failed["busbw all_reduce 1 GiB"].message()
    assert "measured 164.263" in msg and "required >= 312.1 GB/s" in msg
    assert failed["wrong results"].measured == 3
    assert failed["counter nvlink_crc"].measured == 2 and "gpu1/nvlink_crc +2" in failed["counter nvlink_crc"].detail


def test_judge_missing_size_fails_missing_category_skips():
    p, m = h200_measurements()
    del m["busbw"][("sendrecv", 2**30)]
    del m["init_ms_p50"]
    v = {x.check: x for x in verdicts.judge(p, m)}
    assert v["busbw sendrecv 1 GiB"].status == "fail" and v["init median"].status == "skip"
    m["counters_after"] = {"gpu0/nvlink_crc": 1}  # gpu1 was read before but not after
    v = {x.check: x for x in verdicts.judge(p, m)}
    assert v["counter nvlink_crc"].status == "fail" and "not read" in v["counter nvlink_crc"].detail


def test_judge_counter_that_went_down_fails():
    out = verdicts.judge_counters({"gpu0/nvlink_replay": 5}, {"gpu0/nvlink_replay": 0}, {"nvlink_replay": 10})
    assert out[0].status == "fail" and "went down" in out[0].detail


# --- the CLI path: bad profiles are one line, exit 2 ----------------------------------------------
def write_json(path: Path, obj) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


def test_cli_judges_and_writes_junit(tmp_path):
    meas = write_json(tmp_path / "m.json", {"busbw": [{"collective": "all_reduce", "bytes": 1048576, "busbw": 0.5},
                                                      {"collective": "all_gather", "bytes": 1048576, "busbw": 0.4}],
                                            "latency_us_8B": 80.0, "init_ms_p50": 20.0, "wrong": 0,
                                            "stress_failures": 0})
    proc = run(["-m", "nccl_bench.accept.verdicts", meas, "--profile", "gloo-cpu", "--junit", str(tmp_path / "a.xml")],
               timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "accept PASS against profile gloo-cpu" in proc.stdout and (tmp_path / "a.xml").exists()
    impossible = {**json.loads((profiles.BUILTIN_DIR / "gloo-cpu.json").read_text()),
                  "busbw_min_GBps": [{"collective": "all_reduce", "bytes": 1048576, "min": 1e6}]}
    proc = run(["-m", "nccl_bench.accept.verdicts", meas, "--profile", write_json(tmp_path / "imp.json", impossible)],
               timeout=60)
    assert proc.returncode == 1
    assert "FAIL busbw all_reduce 1 MiB: measured 0.5, required >= 1e+06 GB/s" in proc.stdout


@pytest.mark.parametrize("profile,needle", [
    ("no-such-profile", "unknown profile 'no-such-profile'"),
    ("missing", "missing field 'wrong_max'"),
])
def test_cli_bad_profile_one_line_exit_2(tmp_path, profile, needle):
    meas = write_json(tmp_path / "m.json", {})
    base = json.loads((profiles.BUILTIN_DIR / "gloo-cpu.json").read_text())
    if profile == "missing":
        base.pop("wrong_max")
        profile = write_json(tmp_path / "p.json", base)
    err = one_line_error(run(["-m", "nccl_bench.accept.verdicts", meas, "--profile", profile], timeout=60))
    assert needle in err


def test_a_golden_node_of_several_gpus_records_copy_floors_it_can_load_again(tmp_path):
    # accept's copies name the slowest GPU beside each figure (`d2h_gpu`: 1); only the figures are floors
    from nccl_bench.accept import golden
    m = {"busbw": {("all_reduce", 1 << 30): 330.0}, "latency_us_8B": 12.0, "init_ms_p50": 45.0,
         "copy_GBps": {"device_GBps": 2860.0, "device_gpu": 1, "h2d_GBps": 53.5, "h2d_gpu": 0,
                       "d2h_GBps": 54.6, "d2h_gpu": 1}}
    p = golden.record(m, {}, "nccl", ["NVIDIA H100 80GB HBM3"] * 2, "node7", nvls=False)
    assert set(p.copy_min_GBps) == {"device", "h2d", "d2h"}
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(profiles.to_doc(p)))
    assert profiles.load(str(path)).copy_min_GBps == p.copy_min_GBps
