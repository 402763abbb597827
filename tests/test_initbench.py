"""`init`: per-phase init latency on real gloo jobs; failures counted, never dropped; bad input."""
import re

import pytest

from helpers import one_line_error, run
from nccl_bench.init import command as initbench
from nccl_bench.core import stats
from nccl_bench.core.errors import UsageError
from nccl_bench.records.init import PHASES
from nccl_bench.records.init import failures, stale_rounds, summarize
from nccl_bench import records

PHASE_KEYS = [key for _, key in PHASES]


def init_job(tmp_path, *args, timeout=120):
    out = tmp_path / "init.json"
    proc = run(["-m", "nccl_bench", "init", "--backend", "gloo", "--json", str(out), *args], timeout=timeout)
    doc = records.load(str(out)) if out.exists() else None
    return proc, doc


def test_all_modes_every_phase_table_and_json(tmp_path):
    proc, doc = init_job(tmp_path, "--nranks", "3", "--rounds", "2", "--warmup", "1", "--ranks-per-root", "1",
                         "--timeout", "5")
    rows = doc.rows
    # no skew and a fresh key per round: regular and scoped never fail; stock may (natural jitter)
    assert all(r["outcome"] == "ok" for r in rows if r["mode"] != "stock")
    stock_failed = any(r["outcome"] != "ok" for r in rows)
    assert proc.returncode == (1 if stock_failed else 0), proc.stderr[-2000:]
    for mode in ("regular", "stock", "scoped"):
        assert mode in proc.stdout
    for label, _ in PHASES:
        assert label in proc.stdout
    assert "median ms" in proc.stdout and "p99 ms" in proc.stdout
    assert doc.kind == "init"
    assert doc.meta["versions"]["torch"] and doc.meta["backend"] == "gloo"
    assert doc.meta["params"]["complete"] is True
    assert len(rows) == 3 * 3 * 3  # modes x (rounds + warm-up) x ranks
    assert {(r["mode"], r["round"], r["rank"]) for r in rows} == {
        (m, k, r) for m in ("regular", "stock", "scoped") for k in range(3) for r in range(3)}
    assert sum(r["warmup"] for r in rows) == 9
    for r in rows:
        if r["outcome"] == "ok":  # gloo exchanges IDs itself: every phase is measured
            assert all(r[k] is not None and r[k] >= 0 for k in PHASE_KEYS), r
            # init: the whole create call timed from outside; its parts and the rest add up to it
            assert r["init_s"] == pytest.approx(r["exchange_s"] + r["create_s"] + r["init_rest_s"])
            assert r["init_s"] >= r["exchange_s"] + r["create_s"]
            assert r["lifetime_s"] >= r["init_s"] + r["first_collective_s"] + r["destroy_s"]
            assert len(r["ids"]) == (1 if r["mode"] == "regular" else 3)  # an ID per root (1 rank each)


def test_skewed_stock_failures_are_counted_not_dropped(tmp_path):
    proc, doc = init_job(tmp_path, "--nranks", "3", "--rounds", "4", "--warmup", "0", "--init", "stock",
                         "--ranks-per-root", "1", "--skew-max", "0.2", "--seed", "3", "--timeout", "1")
    rows = doc.rows
    failed = [r for r in rows if r["outcome"] != "ok"]
    assert failed, "stock under 0.2 s skew with every rank a root should read stale IDs"
    assert proc.returncode == 1, proc.stderr[-2000:]  # ran, and inits failed
    assert len(rows) == 4 * 3  # failed inits are rows too
    for r in failed:  # kind, operation and time to failure (about the deadline) are kept
        assert r["outcome"] == "hang" and r["failed_op"] == "init" and r["error"]
        # the deadline is the whole init's, the ID exchange's time included: failed at about the deadline, and
        # create's share is what the exchange left of it (under load the exchange alone took 0.13 s)
        assert 0.9 < r["failed_after_s"] < 3.0 and 0 < r["create_s"] <= r["failed_after_s"]
        assert r["abort_s"] is not None and r["destroy_s"] is None
    assert f"stock: {len(failed)} of {len(rows)} inits failed (hang {len(failed)})" in proc.stdout
    assert "failed: time to failure" in proc.stdout
    assert stale_rounds(rows)["stock"], "fingerprints prove the stale read"


def test_summaries_keep_failures_apart():
    def row(mode, rnd, rank, outcome="ok", t=0.01, warmup=False):
        return {"mode": mode, "round": rnd, "rank": rank, "warmup": warmup, "outcome": outcome,
                "failed_after_s": None if outcome == "ok" else 2.0, "exchange_s": t, "create_s": t,
                "init_s": 2 * t, "first_collective_s": t, "destroy_s": t, "ids": None, "published_root": -1,
                "published": None}
    rows = [row("stock", 0, 0, warmup=True, outcome="hang")] + [row("stock", k, r) for k in (1, 2) for r in (0, 1)]
    rows += [row("stock", 3, 0, "hang"), row("stock", 3, 1, "error")]
    s = {(e["mode"], e["key"]): e for e in summarize(rows)}
    assert s[("stock", "create_s")]["n"] == 4 and s[("stock", "create_s")]["median"] == 0.01
    assert s[("stock", "failed_after_s")]["n"] == 2 and s[("stock", "failed_after_s")]["max"] == 2.0
    assert failures(rows)["stock"] == {"inits": 6, "failed": 2, "kinds": {"hang": 1, "error": 1}}


def test_stale_rounds_from_fingerprints():
    base = {"mode": "stock", "warmup": False}
    rows = [{**base, "round": 1, "rank": 0, "ids": ["a1", "b0"], "published_root": 0, "published": "a1"},
            {**base, "round": 1, "rank": 1, "ids": ["a1", "b1"], "published_root": 1, "published": "b1"},
            {**base, "round": 2, "rank": 0, "ids": ["a2", "b2"], "published_root": 0, "published": "a2"},
            {**base, "round": 2, "rank": 1, "ids": ["a2", "b2"], "published_root": 1, "published": "b2"}]
    assert stale_rounds(rows) == {"stock": [1]}


def test_stats():
    assert stats.percentile([], 0.5) is None
    assert stats.percentile([3.0], 0.99) == 3.0
    assert stats.percentile([1, 2, 3, 4], 0.5) == 2.5
    assert stats.percentile(range(101), 0.9) == 90
    s = stats.summary([5, 1, None, 3])
    assert (s["n"], s["median"], s["max"]) == (3, 3, 5)
    assert s["p99"] == pytest.approx(4.96)
    assert stats.summary([])["median"] is None
    assert stats.within(0.0305, 0.030, 0.02, 0.001) and not stats.within(0.040, 0.030, 0.02, 0.001)
    assert stats.within(1.019, 1.0, 0.02, 0.001) and not stats.within(1.03, 1.0, 0.02, 0.001)


@pytest.mark.parametrize("args,needle", [
    (["--backend", "gloo", "--rounds", "0"], "--rounds must be >= 1"),
    (["--backend", "gloo", "--init", "regular,bogus"], "unknown init mode 'bogus'"),
    (["--backend", "gloo", "--ranks-per-root", "0"], "--ranks-per-root must be >= 1"),
    (["--simulate-ranks", "0"], "--simulate-ranks must be >= 1"),
    (["--simulate-ranks", "1000000000000"], "GiB"),  # refused before anything starts
])
def test_bad_input_one_line_exit_2(args, needle):
    err = one_line_error(run(["-m", "nccl_bench", "init", *args], timeout=60))
    assert needle in err


@pytest.mark.parametrize("args,needle", [
    (["--backend", "gloo", "--skew-max", "-1"], "--skew-max"),
    (["--backend", "gloo", "--warmup", "-1"], "--warmup"),
    (["--backend", "gloo", "--read-budget", "10"], "--simulate-ranks"),
    (["--backend", "gloo", "--timeout", "0"], "--timeout"),
    (["--simulate-ranks", "64", "--rounds", "0"], "--rounds must be >= 1"),
    (["--simulate-ranks", "64", "--ranks-per-root", "0"], "--ranks-per-root must be >= 1"),
    (["--simulate-ranks", "64", "--init", "bogus"], "unknown init mode"),
    (["--simulate-ranks", "64", "--skew-max", "-0.5"], "--skew-max"),
    (["--simulate-ranks", "64", "--read-budget", "0"], "--read-budget"),
    (["--simulate-ranks", "64", "--nranks", "2"], "no meaning with --simulate-ranks"),
    (["--simulate-ranks", "64", "--backend", "gloo"], "no meaning with --simulate-ranks"),
])
def test_bad_options_refused_before_anything_runs(args, needle):
    """The same checks, in this process: they raise before a job or a store starts."""
    with pytest.raises(UsageError, match=re.escape(needle)):
        initbench.main(args)


def test_existing_json_is_refused_before_running(tmp_path):
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    err = one_line_error(run(["-m", "nccl_bench", "init", "--backend", "gloo", "--json", str(taken)], timeout=60))
    assert "already exists" in err and taken.read_text() == "{}"
