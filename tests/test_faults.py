"""Fault injection on gloo (issue 8): every kind detected, classified and explained from evidence;
the run goes on or ends with a clean verdict; the journal stays intact; no process left behind."""
import json

import pytest

from helpers import one_line_error, run
from nccl_bench.core.errors import UsageError
from stress.inject import Injection, resolve

GLOO = ["-m", "stress", "--backend", "gloo", "--nranks", "2", "--skew-max", "0", "--timeout", "1"]
T = 1.0  # the deadline above


def stress(tmp_path, *args, timeout=90):
    path = tmp_path / "j.jsonl"
    proc = run([*GLOO, "--journal", str(path), *args], timeout=timeout)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return proc, [x for x in lines if x["type"] == "round"], lines


def culprit(row):
    return [(c["rank"], c["phase"], c["cause"]) for c in row["culprits"]]


def test_hangs_and_corruption_are_explained_and_the_run_goes_on(tmp_path):
    proc, rows, _ = stress(tmp_path, "--rounds", "6", "--init", "scoped", "--collective", "all_gather",
                           "--inject", "corrupt@1:1", "--inject", "skip-collective@2:1",
                           "--inject", "missing-rank@3:1", "--inject", "slow-rank@4:0")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert [r["round"] for r in rows] == list(range(6))
    ok0, corrupt, skip, missing, slow, ok5 = rows
    assert ok0["verdict"] == ok5["verdict"] == "ok"  # before and after: --on-failure continue

    assert (corrupt["verdict"], corrupt["category"]) == ("wrong", "silent corruption")
    assert corrupt["injected"] == ["corrupt@1:1"] and culprit(corrupt) == [(1, "verify", "input corrupted")]
    assert "rank 1's input already differed" in corrupt["diagnosis"]
    assert "the wrong elements came from the data of rank 1" in corrupt["diagnosis"]

    assert (skip["verdict"], skip["category"]) == ("hang", "hang")
    assert culprit(skip) == [(1, "verify", "never entered")]
    assert "rank 1 never entered verify (all_gather" in skip["diagnosis"]
    assert "unbalanced control flow" in skip["diagnosis"]

    assert missing["verdict"] == "hang" and culprit(missing) == [(1, "bootstrap", "did not join")]
    assert "rank 1 never entered bootstrap: it did not join the round" in missing["diagnosis"]

    assert slow["verdict"] == "hang" and culprit(slow) == [(0, "skew", "slow")]
    assert "rank 0 started its init 2.0 s after rank 1, past the 1 s deadline" in slow["diagnosis"]

    # detected within the deadline plus a little, on every rank that waited
    for row, waited in ((skip, 0), (missing, 0), (slow, 1)):
        rec = row["ranks"][waited]
        assert rec["verdict"] == "hang" and rec["elapsed_s"] - row["skew_ms"][waited] / 1e3 < T + 1.5, rec
    assert proc.stdout.count("] HANG: ") == 3 and "] WRONG: " in proc.stdout


def test_stale_key_forces_the_stock_race(tmp_path):
    proc, rows, _ = stress(tmp_path, "--rounds", "3", "--init", "stock", "--inject", "stale-key@2:1")
    assert proc.returncode == 1, proc.stderr[-2000:]
    row = rows[2]
    assert row["verdict"] == "hang" and row["injected"] == ["stale-key@2:1"]
    assert [(s["rank"], s["root"], s["from"]) for s in row["stale"]] == [(0, 1, "round 1")]
    assert row["diagnosis"].startswith("stale ID: rank 0 used root 1's ID from round 1")


def test_a_crash_in_init_ends_the_run_with_a_verdict(tmp_path):
    proc, rows, lines = stress(tmp_path, "--rounds", "4", "--init", "scoped", "--inject", "crash@1:1")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert [r["round"] for r in rows] == [0, 1]  # round 1 journaled by the survivor, then the end
    row = rows[1]
    assert (row["verdict"], row["category"]) == ("error", "error")
    assert culprit(row) == [(1, "init", "died")]
    assert "rank 1 died during init (process " in row["diagnosis"]
    assert "launcher: rank 1 (pid " in proc.stdout and "killed by SIGKILL" in proc.stdout
    assert [x["type"] for x in lines[-3:]] == ["stopped", "end", "launcher"]
    assert {f["rank"]: f for f in lines[-1]["failures"]}[1]["signal"] == "SIGKILL"
    # rank 0 waited in init for the deadline only
    assert row["ranks"][0]["elapsed_s"] < T + 1.5


def test_a_crash_in_the_collective_restarts_and_resumes_under_max_restarts(tmp_path):
    proc, rows, lines = stress(tmp_path, "--rounds", "4", "--init", "scoped", "--max-restarts", "1",
                               "--inject", "crash-collective@1:1")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert [r["round"] for r in rows] == [0, 1, 2, 3]  # nothing lost, nothing repeated
    assert [r["verdict"] for r in rows] == ["ok", "error", "ok", "ok"]  # the crash fired once
    assert culprit(rows[1]) == [(1, "verify", "died")]
    types = [x["type"] for x in lines]
    assert types.count("header") == 1 and types.count("end") == 1
    resume = next(x for x in lines if x["type"] == "resume")
    assert resume["restart"] == 1 and resume["after_rounds"] == 2
    assert "launcher restarts the worker group" in proc.stdout
    assert "restarts: 1 (worker group restarted by the launcher after 2 rounds; resumed from the journal, " \
           "no completed round lost or repeated)" in proc.stdout
    summary = json.loads((tmp_path / "j-summary.json").read_text())
    assert summary["restarts"] == 1 and summary["rounds"] == 4


def test_store_loss_is_an_error_and_the_journal_survives(tmp_path):
    proc, rows, lines = stress(tmp_path, "--rounds", "3", "--init", "scoped", "--inject", "store-loss@1")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert [r["round"] for r in rows] == [0, 1] and rows[0]["verdict"] == "ok"
    row = rows[1]
    assert (row["verdict"], row["category"]) == ("error", "error")
    assert row["diagnosis"].startswith("job store lost: its host (rank 0) went away")
    assert lines[-1]["type"] == "end" and (tmp_path / "j-summary.json").exists()


@pytest.mark.parametrize("args,needle", [
    (["--inject", "meltdown@1:1"], "unknown fault 'meltdown@1:1'"),
    (["--rounds", "3", "--inject", "crash@3:1"], "round 3 is beyond --rounds 3"),
    (["--inject", "corrupt@1:2"], "rank 2 is beyond the world size 2"),
    (["--init", "scoped", "--inject", "stale-key@1:1"], "needs --init stock"),
])
def test_bad_injections_are_one_line_exit_2(args, needle):
    assert needle in one_line_error(run([*GLOO, *args]))


def test_resolve_fills_defaults_and_refuses_what_the_run_cannot_do():
    def res(text, rounds=4, n=2, backend="gloo", modes=("scoped",), rpr=1, coll="all_reduce"):
        return [str(i) for i in resolve([Injection.parse(text)], rounds, n, backend, list(modes), rpr, coll)]
    assert res("crash") == ["crash@1:1"] and res("store-loss") == ["store-loss@1:0"]
    assert res("corrupt", rounds=1) == ["corrupt@0:1"] and res("wrong:2:0") == ["wrong:2:0"]
    for text, kw, needle in [
        ("crash@1:0", {}, "rank 0 hosts the job store"),
        ("store-loss@1:1", {}, "hosted by rank 0"),
        ("crash", {"backend": "torch"}, "inside PyTorch"),
        ("stale-key@0:1", {"modes": ("stock",)}, "round 0 has no previous ID"),
        ("stale-key@1:1", {"modes": ("stock",), "rpr": 2}, "not a root"),
        ("corrupt@1:1", {"coll": "broadcast"}, "only the root's"),
        ("skip-collective@1:0", {"n": 1}, "at least 2 ranks"),
    ]:
        with pytest.raises(UsageError, match=needle):
            res(text, **kw)
