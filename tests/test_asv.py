"""The asv suite on gloo: a quick pass records every benchmark for HEAD, failures carry their reason.

asv runs for real (`python -m asv run`) with the project's asv.conf.json, moved to a
temporary folder (results, HTML, machine file) so that the checkout stays clean.
"""
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from helpers import REPO, TOKEN_VAR, assert_no_survivors, run
from nccl_bench import records
from nccl_bench.asv import suite as asvsuite
from nccl_bench.asv.plugin import asv_machine_name
from nccl_bench.job.jobs import JobFailed, run_result


def asv_config(tmp: Path) -> Path:
    from asv.util import load_json
    conf = load_json(str(REPO / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(REPO), benchmark_dir=str(REPO / "benchmarks"), results_dir=str(tmp / "results"),
                html_dir=str(tmp / "html"), env_dir=str(tmp / "env"))
    path = tmp / "asv.conf.json"
    path.write_text(json.dumps(conf))
    return path


def asv_run(tmp: Path, *args: str, env: dict | None = None, timeout: float = 240):
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return run(["-m", "asv", "run", "--config", str(asv_config(tmp)), *args], timeout=timeout,
               env={"HOME": str(home), **(env or {})})


def saved_results(tmp: Path) -> dict:
    files = [f for f in (tmp / "results" / asv_machine_name()).glob("*.json") if f.name != "machine.json"]
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def values(doc: dict, name: str) -> list:
    """A benchmark's values, one per parameter combination: number, None (failed) or NaN (skipped)."""
    cols = doc["result_columns"]
    return doc["results"][name][cols.index("result")]


def head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_quick_pass_on_gloo_records_every_benchmark_for_head(tmp_path):
    before = head()
    proc = asv_run(tmp_path, "--quick", "--show-stderr")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    doc = saved_results(tmp_path)
    assert doc["commit_hash"] in (before, head())  # the checked-out commit (someone may commit meanwhile)
    assert doc["params"]["machine"] == asv_machine_name() and asv_machine_name().startswith("cpu-")
    # the history goes on across commits that move code: every benchmark keeps its committed name and version
    ran = json.loads((tmp_path / "results" / "benchmarks.json").read_text())
    committed = json.loads((REPO / "results" / "asv" / "benchmarks.json").read_text())
    assert {k: v["version"] for k, v in ran.items() if k != "version"} == \
        {k: v["version"] for k, v in committed.items() if k != "version"}
    names = {"bandwidth.Bandwidth.track_time_per_op", "bandwidth.Bandwidth.track_busbw",
             "init.InitLatency.track_median", "stress.ScopedChurn.track_rounds_per_s",
             "stress.ScopedChurn.track_seconds_per_round"}
    assert names <= set(doc["results"])
    for name in names - {"bandwidth.Bandwidth.track_time_per_op", "bandwidth.Bandwidth.track_busbw"}:
        vals = values(doc, name)
        assert None not in vals, f"{name} failed: {out[-3000:]}"
        ran = [v for v in vals if v == v]  # NaN: skipped (this machine cannot run it, or not steadily)
        assert ran and all(v > 0 for v in ran), (name, vals)
        # asv's own statistics of the samples: the median's 99 % interval and the quartiles
        cols = doc["result_columns"]
        ci_a, q25 = (doc["results"][name][cols.index(c)] for c in ("stats_ci_99_a", "stats_q_25"))
        assert [a for a, v in zip(ci_a, vals) if v == v] and all(a <= v for a, v in zip(ci_a, vals) if v == v)
        assert all(q <= v for q, v in zip(q25, vals) if v == v), (name, q25, vals)
    # gloo's bandwidth cannot be steady on a CPU: every point skipped, none failed
    for name in ("bandwidth.Bandwidth.track_time_per_op", "bandwidth.Bandwidth.track_busbw"):
        assert all(v != v for v in values(doc, name)), (name, values(doc, name))
    # on gloo: init (the whole create call), destroy and lifetime per mode; the sub-millisecond phases inside
    # create are skipped
    init = dict(zip(params(doc, "init.InitLatency.track_median"), values(doc, "init.InitLatency.track_median")))
    ran = sorted(k[2].strip("'") for k, v in init.items() if v == v)
    assert set(ran) == {"init", "destroy", "lifetime"}, init
    assert len(ran) >= 3 * 3, init  # regular at 128, scoped at 1 and 128; stock too where an init worked


def params(doc: dict, name: str) -> list[tuple]:
    import itertools
    cols = doc["result_columns"]
    return list(itertools.product(*doc["results"][name][cols.index("params")]))


def test_failed_jobs_are_failed_benchmarks_with_their_reason(tmp_path):
    """Every job exits 2 on a bad setting; asv records each benchmark failed, says why, goes on."""
    proc = asv_run(tmp_path, "--quick", "-e", "-b", "InitLatency", "-b", "ScopedChurn",
                   env={"NCCL_BENCH_STORE_TIMEOUT": "soon"}, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]  # asv: some benchmark failed
    assert out.count("NCCL_BENCH_STORE_TIMEOUT must be a number of seconds") >= 2, out[-3000:]
    doc = saved_results(tmp_path)
    assert values(doc, "stress.ScopedChurn.track_rounds_per_s") in (None, [None])
    init = values(doc, "init.InitLatency.track_median")
    assert None in init and not [v for v in init if v is not None and v == v]


def test_machine_without_gpus_skips_nccl_instead_of_failing(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_BENCH_ASV_BACKEND", "nccl")
    cache = asvsuite.stress_cache()
    with pytest.raises(NotImplementedError, match="needs a GPU"):
        asvsuite.stress_rate(cache)
    monkeypatch.setenv("NCCL_BENCH_ASV_BACKEND", "gloo")
    monkeypatch.setenv("NCCL_BENCH_ASV_NRANKS", "1")
    with pytest.raises(NotImplementedError, match="2 or more ranks"):
        asvsuite.bandwidth_point(asvsuite.bandwidth_cache(), "all_reduce", "ring", "scoped", "small")


def test_more_ranks_than_gpus_and_tree_rules_are_skips():
    two = asvsuite.Machine("nccl", gpus=2, nranks=4)
    assert "4 GPUs" in asvsuite.bandwidth_skip(two, "all_reduce", "ring", "small")
    ok = asvsuite.Machine("nccl", gpus=2, nranks=2)
    assert asvsuite.bandwidth_skip(ok, "all_reduce", "tree", "1 GiB") is None
    assert "no tree" in asvsuite.bandwidth_skip(ok, "broadcast", "tree", "1 GiB")
    gloo = asvsuite.Machine("gloo", gpus=0, nranks=2)
    assert "swings 2-10 x" in asvsuite.bandwidth_skip(gloo, "all_reduce", "ring", "small")
    assert asvsuite.bandwidth_jobs(ok) == [(i, a) for i in asvsuite.MODES for a in ("ring", "tree")]
    assert asvsuite.bandwidth_jobs(gloo) == []  # nothing runs that no benchmark keeps
    assert "drifts" in asvsuite.init_skip(gloo, "scoped", 1, "create")
    assert asvsuite.init_skip(gloo, "scoped", 1, "lifetime") is None
    assert asvsuite.init_skip(gloo, "scoped", 1, "init") is None  # the whole create call, timed from outside
    assert asvsuite.init_skip(ok, "scoped", 1, "create") is None


def test_one_failed_job_spoils_only_its_own_points():
    m = asvsuite.Machine("nccl", gpus=2, nranks=2)
    point = {"time_s": [1e-3, 2e-3], "busbw_gbps": [300.0, 150.0], "bytes": 1 << 30}
    cache = {"machine": m.__dict__, "jobs": {
        ("regular", "ring"): {"value": {("all_reduce", "1 GiB"): point}},
        ("stock", "ring"): {"error": "nccl_bench bench ...: timed out after 100s"}}}
    got = asvsuite.bandwidth_point(cache, "all_reduce", "ring", "regular", "1 GiB")
    assert got == {"time_s": {"samples": [1e-3, 2e-3], "number": 1},  # asv's form: it computes the stats
                   "busbw_gbps": {"samples": [300.0, 150.0], "number": 1}}
    with pytest.raises(JobFailed, match="timed out after 100s"):
        asvsuite.bandwidth_point(cache, "all_reduce", "ring", "stock", "1 GiB")


def test_bench_rows_to_points_small_is_the_smallest_row_and_each_cycle_a_sample():
    def row(coll, size, us, bw, cycle=0):
        return {"collective": coll, "size": size, "cycle": cycle, "out_of_place": {"time": us, "bus_bw": bw}}
    rows = [row("all_gather", 1 << 20, 10.0, 1.0), row("all_gather", 32, 5.0, 0.1),
            row("all_reduce", 8, 12.0, 0.0), row("all_reduce", 1 << 30, 6000.0, 330.0),
            row("all_reduce", 8, 14.0, 0.0, cycle=1), row("all_reduce", 1 << 30, 6600.0, 300.0, cycle=1)]
    pts = asvsuite._bench_points(records.Result(Path("b.json"), "b.json", "bench", {}, rows, cycles=rows))
    assert pts[("all_gather", "small")]["bytes"] == 32
    assert pts[("all_reduce", "small")] == {"time_s": [12e-6, 14e-6], "busbw_gbps": [0.0, 0.0], "bytes": 8}
    assert pts[("all_reduce", "1 GiB")]["busbw_gbps"] == [330.0, 300.0]
    assert ("all_reduce", "64 MiB") not in pts


def result(rows, kind="init"):
    return records.Result(Path(f"{kind}.json"), f"{kind}.json", kind, {}, rows)


def test_init_samples_tolerate_stock_failures_only():
    def row(mode, outcome, init_s, warmup=False):
        return {"mode": mode, "warmup": warmup, "outcome": outcome, "failed_op": "init", "error": "stale",
                "exchange_s": 0.001, "create_s": init_s, "init_s": init_s, "first_collective_s": 0.1,
                "destroy_s": 0.5, "lifetime_s": init_s + 0.6}
    doc = result([row("stock", "ok", 0.03), row("stock", "hang", 5.0), row("stock", "ok", 0.05),
                    row("scoped", "ok", 0.02), row("scoped", "error", 0.9), row("regular", "ok", 9.0, warmup=True),
                    row("regular", "ok", 0.04)])
    got = asvsuite._init_samples(doc)
    assert got["stock"]["init"] == [0.03, 0.05]  # the inits that worked
    assert got["stock"]["lifetime"] == pytest.approx([0.63, 0.65])  # the whole life, timed from outside
    assert "1 of 2 inits failed" in got["scoped"]["error"]
    assert got["regular"]["init"] == [0.04]  # warm-up rounds are not measured
    none = asvsuite._init_samples(result([row("stock", "hang", 3.0), row("stock", "hang", 3.0)]))
    assert "none of 2 inits worked" in none["stock"]["skipped"]  # no number this run, not a failure


def test_run_result_reaps_a_job_that_outlives_its_timeout():
    token = uuid.uuid4().hex
    argv = ["nccl_bench", "init", "--backend", "gloo", "--init", "scoped", "--rounds", "1000"]
    with pytest.raises(JobFailed, match="timed out after 3s"):
        run_result(argv, 3, env={TOKEN_VAR: token})
    assert_no_survivors(token)


def test_a_killed_caller_takes_its_job_along():
    """asv kills a timed-out benchmark by its process group; the job's own session dies with it too."""
    import os
    import signal
    import sys
    import time
    from helpers import survivors
    token = uuid.uuid4().hex
    code = ("from nccl_bench.job.jobs import run_result; run_result(['nccl_bench', 'init', '--backend', 'gloo', "
            "'--init', 'scoped', '--rounds', '1000'], 120)")
    caller = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={**os.environ, TOKEN_VAR: token},
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(survivors(token)) < 4 and time.monotonic() < deadline:  # caller, launcher, 2 workers
            time.sleep(0.2)
        assert len(survivors(token)) >= 4
        os.killpg(caller.pid, signal.SIGKILL)  # what asv does on its timeout: its group only
        caller.wait()
        assert_no_survivors(token, grace=10)
    finally:
        if caller.poll() is None:
            os.killpg(caller.pid, signal.SIGKILL)
            caller.wait()
