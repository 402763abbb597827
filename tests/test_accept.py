"""accept end to end on the CPU model, and its bad-input contract."""
import json
import xml.etree.ElementTree as ET

from helpers import one_line_error, run


def test_accept_gloo_end_to_end(tmp_path):
    out, xml = tmp_path / "accept.json", tmp_path / "accept.xml"
    proc = run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--profile", "gloo-cpu", "--init-rounds", "3",
                "--stress-rounds", "4", "--json", str(out), "--junit", str(xml)], timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "accept PASS against profile gloo-cpu" in proc.stdout
    doc = json.loads(out.read_text())
    checks = {r["check"]: r for r in doc["rows"]}
    assert checks["busbw all_reduce 1 MiB"]["status"] == "pass"
    assert checks["wrong results"]["measured"] == 0 and checks["stress failures"]["measured"] == 0
    assert [s["status"] for s in doc["meta"]["steps"]] == ["ran"] * 4
    root = ET.parse(xml).getroot()
    assert root.tag == "testsuites"
    names = [c.get("name") for c in root.iter("testcase")]
    assert "busbw all_reduce 1 MiB" in names and int(root.get("failures", 0)) == 0


def test_accept_impossible_profile_names_check_measured_required(tmp_path):
    prof = json.loads(open("nccl_bench/profiles/gloo-cpu.json").read())
    prof["name"] = "impossible"
    prof["busbw_min_GBps"] = [{"collective": "all_reduce", "bytes": 1048576, "min": 1e9}]
    path = tmp_path / "impossible.json"
    path.write_text(json.dumps(prof))
    proc = run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--profile", str(path), "--init-rounds", "2",
                "--stress-rounds", "2"], timeout=400)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "FAIL busbw all_reduce 1 MiB: measured" in proc.stdout and "required >= 1e+09 GB/s" in proc.stdout


def test_accept_unknown_profile_is_exit_2():
    assert "profile" in one_line_error(run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--profile", "nope"]))


def test_accept_bad_rounds_is_exit_2():
    assert "--stress-rounds" in one_line_error(run(["-m", "nccl_bench", "accept", "--backend", "gloo",
                                                    "--stress-rounds", "0"]))
