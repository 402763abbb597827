"""`report` over asv results folders: history across commits, regressions by asv's step detection.

The folders are made from the committed asv result of a real 2 x H200 run, one copy per commit with
1 % noise, and a 30 % step planted at one commit in one benchmark (tests/asvhistory.py).
"""
from __future__ import annotations

import json
import re

import pytest

import asvhistory
from helpers import one_line_error, run
from nccl_bench.report import history

STEPPED = "init.InitLatency.track_median"


def report(*args: str):
    return run(["-m", "nccl_bench", "report", *args], timeout=120)


def regression_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("regression: ") and " on " in line]


def test_a_planted_step_is_named_with_its_commit_and_benchmark_and_nothing_else(tmp_path):
    shas = asvhistory.make(tmp_path / "asv", commits=6, step_at=3, step_bench=STEPPED)
    out = tmp_path / "report"
    proc = report(str(tmp_path / "asv"), "--out", str(out), "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # found, and asked to fail: the report is written first
    text = (out / "report.md").read_text()
    table = [line for line in text.splitlines() if line.startswith(f"| {STEPPED}")]
    other = [line for line in text.splitlines() if re.match(r"\| \w+\.\w+\.\w+ +\|", line) and STEPPED not in line]
    assert table and not other, text[:3000]
    for line in table:  # last good: the commit before the step; first bad: the commit that made it
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2:4] == [shas[2][:8], shas[3][:8]], line
        assert 0.25 < float(cells[6].rstrip("%")) / 100 < 0.35, line
    lines = regression_lines(proc.stdout)
    assert lines and all(STEPPED in line and f"between {shas[2][:8]} and {shas[3][:8]}" in line for line in lines)
    assert "6 commit(s)" in proc.stdout

    pngs = sorted(out.glob("history-*.png"))
    assert len(pngs) == 5  # one per benchmark
    import matplotlib.image
    for png in pngs:
        h, w, _ = matplotlib.image.imread(str(png)).shape
        assert h > 300 and w > 500, (png, h, w)



def test_without_the_step_nothing_is_named_and_the_gate_passes(tmp_path):
    asvhistory.make(tmp_path / "asv", commits=6)
    proc = report(str(tmp_path / "asv" / asvhistory.MACHINE), "--out", str(tmp_path / "r"), "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not regression_lines(proc.stdout)
    assert "0 regression(s)" in proc.stdout
    assert "No regression." in (tmp_path / "r" / "report.md").read_text()


def test_asv_own_files_are_read_for_what_they_say(tmp_path):
    """`report results/asv/<machine>/*.json` (machine.json among them) and benchmarks.json: no error."""
    asvhistory.make(tmp_path / "asv", commits=2)
    files = sorted(str(p) for p in (tmp_path / "asv" / asvhistory.MACHINE).glob("*.json"))
    assert any(f.endswith("machine.json") for f in files)
    proc = report(*files, str(tmp_path / "asv" / "benchmarks.json"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "r" / "report.md").read_text()
    assert "asv-machine" in text and "asv-benchmarks" in text and "## History (asv)" in text


def test_versions_stamped_by_the_asv_plugin_are_shown(tmp_path):
    asvhistory.make(tmp_path / "asv", commits=2)
    for path in (tmp_path / "asv" / asvhistory.MACHINE).glob("*-existing-*.json"):
        doc = json.loads(path.read_text())
        doc["nccl_bench_versions"] = {"torch": "2.11.0+cu130", "nccl": "2.28.9", "driver": "580.159.04"}
        path.write_text(json.dumps(doc))
    proc = report(str(tmp_path / "asv"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch 2.11.0+cu130, nccl 2.28.9, driver 580.159.04" in (tmp_path / "r" / "report.md").read_text()


def test_a_folder_that_is_not_asv_results_is_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.json").write_text("{}")
    err = one_line_error(report(str(tmp_path / "x"), "--out", str(tmp_path / "r")))
    assert "not asv results" in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("unit,values,worse", [
    ("seconds", [1.0, 1.01, 0.99, 1.3, 1.31, 1.29], True),  # a time that rose
    ("GB/s", [100, 101, 99, 70, 71, 70], True),  # a rate that fell
    ("GB/s", [100, 101, 99, 130, 131, 129], False),  # a rate that rose: better
    ("seconds", [1.0, 1.02, 0.98, 1.01, 0.99, 1.0], False),  # noise only
])
def test_direction_of_worse_follows_the_unit(unit, values, worse):
    commits = [history.Commit(f"{i:040x}", i, {}) for i in range(len(values))]
    found = history.regressions(history.Series("m", "b", "", unit, values), commits)
    assert bool(found) == worse
    if found:
        assert (found[0].last_good.sha, found[0].first_bad.sha) == (commits[2].sha, commits[3].sha)
