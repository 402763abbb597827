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


def test_accept_unknown_profile_is_exit_2():
    assert "profile" in one_line_error(run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--profile", "nope"]))


def test_accept_bad_rounds_is_exit_2():
    assert "--stress-rounds" in one_line_error(run(["-m", "nccl_bench", "accept", "--backend", "gloo",
                                                    "--stress-rounds", "0"]))
