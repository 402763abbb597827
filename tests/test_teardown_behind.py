"""Destroys behind the rounds (issue 17): the reaper's outcomes, a failed destroy failing its own round,
and the serial path kept as it was."""
import json
import threading
import time
from types import SimpleNamespace

import pytest

from helpers import run
from nccl_bench.core.errors import CommError, UsageError
from nccl_bench.comm.lifetime import destroy_note
from nccl_bench.job.options import JobOptions
from nccl_bench.comm.reaper import Reaper
from stress.inflight import Behind
from stress.diagnose import History, judge
from stress.options import StressOptions
from stress.record import RankRecord


class Comm:
    """A communicator stand-in whose destroy takes `seconds`, or raises."""

    def __init__(self, seconds=0.0, fail=False):
        self.seconds, self.fail, self.calls = seconds, fail, []
        self.rank, self.host = 1, "h"

    def destroy(self):
        self.calls.append("destroy")
        time.sleep(self.seconds)
        if self.fail:
            raise CommError("destroy", "ncclInternalError", "proxy died", rank=1, host="h")

    def abort(self):
        self.calls.append("abort")


def test_the_reaper_reports_each_teardown_by_key_and_bounds_it():
    reaper = Reaper(deadline_s=0.3)
    ok, bad, stuck, failed = Comm(0.05), Comm(fail=True), Comm(5.0), Comm()
    t0 = time.monotonic()
    for key, comm, success in ((1, ok, True), (2, bad, True), (3, stuck, True), (4, failed, False)):
        reaper.submit(key, comm, success, round=key, rank=1)
    assert time.monotonic() - t0 < 0.2  # handed over, not waited for
    assert reaper.pending() == [1, 2, 3, 4]
    a = reaper.outcome(1)
    assert (a.op, a.ok, a.error) == ("destroy", True, None) and 0.05 <= a.seconds < 0.3
    b = reaper.outcome(2)  # destroy failed: aborted, as inline, and the library's error kept
    assert not b.ok and bad.calls == ["destroy", "abort"]
    assert (b.error["lib_error"], b.error["phase"], b.error["kind"]) == ("ncclInternalError", "destroy", "error")
    c = reaper.outcome(3)  # past its deadline: a hang, left running
    assert c.seconds is None and not c.ok and c.error["kind"] == "hang" and c.error["op"] == "destroy"
    assert time.monotonic() - t0 < 1.0
    d = reaper.outcome(4)
    assert d.op == "abort" and d.ok and failed.calls == ["abort"]
    assert reaper.outcome(5) is None and reaper.pending() == []
    assert any(t.name == "nccl_bench-teardown" for t in threading.enumerate())  # the stuck one, a daemon


def test_a_destroy_that_fails_behind_the_rounds_fails_its_own_round():
    history = History()
    phases = ["bootstrap", "init", "verify", "destroy"]
    records = [RankRecord(r, phases=list(phases), late_s=0.0) for r in (0, 1)]
    row = {"seq": 7, "mode": "scoped", "round": 7, **judge("scoped", 7, 2, records, [], history), "ranks": records}
    assert row["verdict"] == "ok"
    behind = Behind(SimpleNamespace(nranks=2, rank=0), depth=2, timeout=1.0, history=history)
    hang = {"kind": "hang", "op": "destroy", "lib_error": "destroy did not finish", "detail": "11s",
            "rank": 1, "host": "h", "phase": "destroy"}
    behind.complete(row, [], {"timeout": 1.0}, [{"op": "destroy", "seconds": 0.5, "ok": True, "error": None},
                                                {"op": "destroy", "seconds": None, "ok": False, "error": hang}])
    assert row["verdict"] == "hang" and row["ranks"][0].teardown_s == 0.5 and row["destroy_ms"] is None
    assert row["ranks"][1].teardown_error == hang
    assert "hang on rank 1 in destroy: destroy did not finish: 11s" in row["diagnosis"]
    assert "rank 0 never entered" not in row["diagnosis"]  # rank 0 was in destroy too


def test_options_default_and_refuse():
    assert StressOptions(JobOptions(backend="gloo")).destroys_in_flight == 8
    assert StressOptions(JobOptions(backend="gloo"), destroys_in_flight=0).destroys_in_flight == 0
    with pytest.raises(UsageError, match="--destroys-in-flight must be >= 0"):
        StressOptions(JobOptions(backend="gloo"), destroys_in_flight=-1)
    assert "nccl" not in destroy_note("gloo", [0.02]) and "500 ms" in destroy_note("nccl", [0.52])
    assert destroy_note("nccl", []) is None


def test_serial_destroy_stays_available_on_gloo(tmp_path):
    """--destroys-in-flight 0: the old path (every other stress test runs with destroys behind)."""
    path = tmp_path / "j.jsonl"
    proc = run(["-m", "stress", "--backend", "gloo", "--nranks", "2", "--skew-max", "0", "--timeout", "1",
                "--rounds", "4", "--destroys-in-flight", "0", "--journal", str(path),
                "--inject", "corrupt@1:1", "--inject", "skip-collective@2:1"], timeout=90)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    rows = [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "round"]
    assert [r["verdict"] for r in rows] == ["ok", "wrong", "hang", "ok"]
    assert "rank 1 never entered verify" in rows[2]["diagnosis"]
    assert all(r["destroy_ms"] is not None for r in rows if r["verdict"] == "ok")
    assert "serial destroy" in proc.stdout
    assert "destroy: median" in proc.stdout and "proxy" not in proc.stdout  # no NCCL claim on gloo
