"""`report` over asv results folders: history across commits, regressions only where a step stands out
of the series' own noise (nccl_bench.report.history).

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
    proc = report(str(tmp_path / "asv" / asvhistory.MACHINE), "--out", str(tmp_path / "r"), "--fail-on-regression",
                  "--no-plots")  # a CI gate: the verdict alone
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not regression_lines(proc.stdout) and not list((tmp_path / "r").glob("*.png"))
    assert "0 regression(s)" in proc.stdout
    assert "No regression." in (tmp_path / "r" / "report.md").read_text()


def test_asv_own_files_are_read_for_what_they_say(tmp_path):
    """`report results/asv/<machine>/*.json` (machine.json among them) and benchmarks.json: no error."""
    asvhistory.make(tmp_path / "asv", commits=2, only="init.InitLatency.track_median")
    files = sorted(str(p) for p in (tmp_path / "asv" / asvhistory.MACHINE).glob("*.json"))
    assert any(f.endswith("machine.json") for f in files)
    proc = report(*files, str(tmp_path / "asv" / "benchmarks.json"), "--out", str(tmp_path / "r"), "--no-plots")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "r" / "report.md").read_text()
    assert "asv-machine" in text and "asv-benchmarks" in text and "## History (asv)" in text


def test_versions_stamped_by_the_asv_plugin_are_shown(tmp_path):
    asvhistory.make(tmp_path / "asv", commits=2, only="init.InitLatency.track_median")
    for path in (tmp_path / "asv" / asvhistory.MACHINE).glob("*-existing-*.json"):
        doc = json.loads(path.read_text())
        doc["nccl_bench_versions"] = {"torch": "2.11.0+cu130", "nccl": "2.28.9", "driver": "580.159.04"}
        path.write_text(json.dumps(doc))
    proc = report(str(tmp_path / "asv"), "--out", str(tmp_path / "r"), "--no-plots")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch 2.11.0+cu130, nccl 2.28.9, driver 580.159.04" in (tmp_path / "r" / "report.md").read_text()


def test_a_folder_of_files_that_are_not_results_is_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.json").write_text("{}")
    err = one_line_error(report(str(tmp_path / "x"), "--out", str(tmp_path / "r")))
    assert "a.json: not a result of nccl-bench" in err and not (tmp_path / "r").exists()
    (tmp_path / "y").mkdir()
    err = one_line_error(report(str(tmp_path / "y"), "--out", str(tmp_path / "r")))
    assert "a folder with no result files in it" in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("unit,values,worse", [
    ("seconds", [1.0, 1.01, 0.99, 1.3, 1.31, 1.29], True),  # a time that rose
    ("GB/s", [100, 101, 99, 70, 71, 70], True),  # a rate that fell
    ("GB/s", [100, 101, 99, 130, 131, 129], False),  # a rate that rose: better
    ("seconds", [1.0, 1.02, 0.98, 1.01, 0.99, 1.0], False),  # noise only
])
def test_direction_of_worse_follows_the_unit(unit, values, worse):
    commits = [history.Commit(f"{i:040x}", i, {}) for i in range(len(values))]
    found, _ = history.judge(history.Series("m", "b", "", unit, values), commits)
    assert bool(found) == worse
    if found:
        assert (found[0].last_good.sha, found[0].first_bad.sha) == (commits[2].sha, commits[3].sha)


def judged(values, unit="seconds", intervals=None):
    commits = [history.Commit(f"{i:040x}", i, {}) for i in range(len(values))]
    s = history.Series("m", "b", "p", unit, values, intervals or [None] * len(values))
    found, noisy = history.judge(s, commits)
    return found, noisy, commits


def test_a_series_that_swings_between_runs_names_nothing_and_says_it_is_too_noisy():
    # gloo's bandwidth on a 2-core machine, identical code (issue 53): 2-10 x between runs
    values = [3.1e-5, 1.1e-4, 2.9e-5, 2.2e-4, 4.0e-5, 9.0e-5]
    found, noisy, _ = judged(values, intervals=[(0.95 * v, 1.05 * v) for v in values])  # asv's, with samples
    assert not found and noisy is not None and "within twice its runs' spread" in noisy.why, noisy
    found, noisy, _ = judged(values)  # results from before the samples: single values
    assert not found and "a single run either side without asv's interval" in noisy.why


def test_a_step_far_beyond_its_noise_is_named_and_one_within_it_is_not():
    # a sub-ms phase drifting +-25 % between runs, then a planted 30 ms sleep: named
    found, noisy, commits = judged([0.50e-3, 0.62e-3, 0.47e-3, 30.5e-3, 30.6e-3, 30.4e-3])
    assert [(r.last_good, r.first_bad) for r in found] == [(commits[2], commits[3])]
    assert noisy is not None and "+24% at" in noisy.why  # the wobble before it: said, not named
    # +12 % in a series whose neighbours differ by up to 15 %: too noisy to judge, not named
    found, noisy, _ = judged([1.0, 1.15, 1.0, 1.12, 1.27, 1.12])
    assert not found and noisy is not None


def test_before_and_after_are_the_levels_right_either_side_and_small_steps_are_not_named():
    found, _, commits = judged([1.0, 1.0, 1.0, 1.3, 1.3, 1.3, 1.7, 1.7, 1.7])
    assert sorted((round(r.before, 3), round(r.after, 3)) for r in found) == [(1.0, 1.3), (1.3, 1.7)]
    assert not judged([1.0, 1.001, 0.999, 1.025, 1.026, 1.024])[0]  # +2.5 %: under the 5 % threshold


def test_regressions_are_ranked_by_how_far_they_stand_out():
    from types import SimpleNamespace
    series = {"mild": [1.0, 1.04, 1.0, 1.2, 1.24, 1.2], "sharp": [1.0, 1.001, 1.0, 1.2, 1.201, 1.2]}
    results = [SimpleNamespace(machine="m", meta={"commit": f"{i:040x}", "date": i, "versions": {}},
                               rows=[{"benchmark": name, "params": "", "value": v[i]} for name, v in series.items()])
               for i in range(6)]
    h = history.build(results, {"mild": "seconds", "sharp": "seconds"})
    assert [r.benchmark for r in h.regressions] == ["sharp", "mild"]
    assert h.regressions[0].stands_out > h.regressions[1].stands_out


def test_two_commits_are_judged_by_their_intervals():
    found, noisy, _ = judged([1.0, 1.3], intervals=[(0.98, 1.02), (1.27, 1.33)])
    assert len(found) == 1 and found[0].spread is None and noisy is None
    found, noisy, _ = judged([1.0, 1.3], intervals=[(0.7, 1.4), (1.0, 1.6)])
    assert not found and "overlap" in noisy.why
    assert history.two_runs((1.3, (1.27, 1.33)), (1.0, (0.98, 1.02)), higher_is_better=False) == "regression"
    assert history.two_runs((1.3, (1.0, 1.6)), (1.0, (0.7, 1.4)), higher_is_better=False) == "within noise"
    assert history.two_runs((70.0, (69.0, 71.0)), (100.0, (99.0, 101.0)), higher_is_better=True) == "regression"
    assert history.two_runs((1.02, None), (1.0, None), higher_is_better=False) == "no change"


def test_labels_of_steps_at_one_commit_do_not_overlap():
    from nccl_bench.core.figures import figure
    from nccl_bench.report.historyplot import apart
    fig, axes = figure(1, 1, figsize=(4, 3), squeeze=False)
    ax = axes[0][0]
    ax.plot([0, 1, 2], [1.0, 1.0, 30.0])
    labels = [ax.annotate(f"+{k}000%", (2, 30.0 - k * 0.1), xytext=(3, 3), textcoords="offset points")
              for k in range(4)]
    fig.canvas.draw()
    apart(fig, labels)
    r = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(r) for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_a_long_history_names_a_readable_number_of_commits_and_always_the_steps():
    """200 commits once drew 200 overlapping labels (a black band, and 30 s of the report's time): about 16 are
    named, evenly spaced, and every step's first bad commit among them; a short history names every commit."""
    from nccl_bench.report.historyplot import LABELLED_COMMITS, labelled
    assert labelled(6, [3]) == list(range(6))
    for n, steps in [(200, [150]), (200, [7, 8, 120]), (1000, [5]), (17, [16]), (200, list(range(0, 200, 3)))]:
        named = labelled(n, steps)
        assert len(named) <= LABELLED_COMMITS + 1 and named == sorted(set(named)) and 0 <= named[0] <= named[-1] < n
        assert min(b - a for a, b in zip(named, named[1:])) >= 0.75 * (n - 1) / (LABELLED_COMMITS - 1)
        if len(steps) < 4:
            assert set(steps) - {8} <= set(named), (n, steps, named)  # 8: next to the step at 7


def test_the_levels_fit_keeps_its_distances_exact():
    """The fit's distance of every prefix from its median, kept incrementally, is the direct sum (ties and even
    lengths included)."""
    import random
    import statistics
    rng = random.Random(7)
    for _ in range(300):
        xs = [rng.choice([rng.random(), 1.0, 2.0]) for _ in range(rng.randint(1, 25))]
        direct = [sum(abs(v - statistics.median(xs[:k])) for v in xs[:k]) for k in range(1, len(xs) + 1)]
        assert history._distances_from_median(xs) == pytest.approx(direct, abs=1e-9)


def test_a_real_chain_of_commits_names_the_planted_slowdown_and_nothing_else(tmp_path):
    """Issue 53 in CI time: three real commits in a clone (a comment, a 30 ms sleep planted in the gloo
    create, a comment), `asv run` of the churn on each; the report names the churn at the planted commit
    and nothing else. (Nothing named between identical code: results/cpu/history, 6 commits.)"""
    import asvchain
    shas, results = asvchain.chain(tmp_path, ["comment", "plant", "comment"], ["ScopedChurn"])
    proc = asvchain.report(results, tmp_path / "r3")
    lines = regression_lines(proc.stdout)
    assert proc.returncode == 1 and lines, proc.stdout + proc.stderr
    assert all(f"between {shas[0][:8]} and {shas[1][:8]}" in line for line in lines), lines
    assert {line.split(" [")[0] for line in lines} == {"regression: stress.ScopedChurn.track_rounds_per_s",
                                                      "regression: stress.ScopedChurn.track_seconds_per_round"}
