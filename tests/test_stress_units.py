"""stress: the pure parts (schedule, verification table, diagnosis, journal, options)."""
import json

import pytest
import torch

from nccl_bench.core.errors import UsageError
from nccl_bench.job.options import JobOptions
from stress import journal, schedule
from stress.diagnose import History, judge
from stress.options import Injection, StressOptions
from stress.record import RankRecord
from stress.verify import ROOT, Verification


def test_schedule_is_seeded_and_printable():
    a = schedule.table(7, 5, 3, 0.2)
    assert a == schedule.table(7, 5, 3, 0.2)
    assert a != schedule.table(8, 5, 3, 0.2)
    assert all(0 <= s <= 0.2 for row in a for s in row)
    assert schedule.table(7, 2, 2, 0) == [[0.0, 0.0], [0.0, 0.0]]
    text = schedule.render(7, 5, 3, 0.2)
    assert "seed 7" in text and len(text.splitlines()) == 2 + 5


def _simulate(name, n, lays, sends):
    """Each collective's semantics applied to the ranks' inputs, as a reference."""
    total = sum(sends)
    chunks = [s.chunk(n) for s in sends]
    return {
        "all_reduce": lambda r: total,
        "all_gather": lambda r: torch.cat(sends),
        "reduce_scatter": lambda r: total.chunk(n)[r],
        "broadcast": lambda r: sends[ROOT],
        "reduce": lambda r: total if r == ROOT else None,
        "alltoall": lambda r: torch.cat([chunks[j][r] for j in range(n)]),
        "sendrecv": lambda r: sends[(r - 1) % n],
    }[name]


def test_option_names_the_verification_collectives():
    """--collective is checked without torch against this list; the measuring floor's table holds them."""
    from nccl_bench.measure import collectives
    from stress.options import COLLECTIVES
    assert set(COLLECTIVES) <= set(collectives.NAMES)


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall",
                                  "sendrecv"])
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("nbytes", [4, 4096])
def test_verification_finds_the_exact_result_and_the_rank_that_spoiled_it(name, n, nbytes):
    """The round's check is the measuring floor's: a result computed from the inputs' semantics has no wrong
    element, and one changed element is found and, where no reduction hides it, traced to its source."""
    ver = [Verification(name, nbytes, r, n) for r in range(n)]
    sends = [v.buffers("cpu")[0] for v in ver]
    ref = _simulate(name, n, [v.layout for v in ver], sends)
    for r, v in enumerate(ver):
        got = ref(r)
        if got is None:
            assert v.layout.recv and v.wrong(torch.full((v.layout.recv,), float("nan"))) == 0
            continue
        got = got.clone()
        assert got.numel() == v.layout.recv and v.wrong(got) == 0 and v.input_wrong(sends[r]) == 0
        got[-1] += 1
        assert v.wrong(got) == 1
        sources = v.sources(got)
        assert sources is None if name in ("all_reduce", "reduce_scatter", "reduce") else len(sources) == 1


def _rec(rank, fps, pub_root=-1, pub="", verdict="ok", error=None):
    ev = {"fingerprints": fps, "published_root": pub_root, "published": pub}
    return RankRecord(rank, verdict=verdict, error=error, evidence=ev)


def test_diagnosis_names_the_stale_root_and_its_round():
    h = History()
    ok = [_rec(0, ["a0", "b0"], 0, "a0"), _rec(1, ["a0", "b0"], 1, "b0")]
    assert judge("stock", 0, 2, ok, [], h)["verdict"] == "ok"
    hang = {"kind": "hang", "op": "init", "lib_error": "deadline", "detail": "", "rank": 0, "host": "h"}
    bad = [_rec(0, ["a1", "b0"], 0, "a1", "hang", hang), _rec(1, ["a1", "b1"], 1, "b1", "hang", hang)]
    row = judge("stock", 1, 2, bad, [], h)
    assert row["verdict"] == "hang"
    assert [(s["rank"], s["root"], s["from"]) for s in row["stale"]] == [(0, 1, "round 0")]
    assert row["diagnosis"].startswith("stale ID: rank 0 used root 1's ID from round 0")


def test_diagnosis_without_stale_ids_and_with_missing_ranks():
    h = History()
    err = {"kind": "error", "op": "init", "lib_error": "ncclSystemError", "detail": "boom", "rank": 1, "host": "h"}
    recs = [_rec(0, ["a"], 0, "a"), _rec(1, ["a"], -1, "", "error", err), None]
    row = judge("regular", 4, 3, recs, [(2, "hostx")], h)
    assert row["verdict"] == "error" and row["missing"] == [2]
    d = row["diagnosis"]
    assert "no stale ID" in d and "never arrived: rank 2 (hostx)" in d and "ncclSystemError: boom" in d


def test_diagnosis_names_the_first_failure_in_time_and_what_followed():
    """Four GPUs, round 0 (issue 68): three ranks passed their deadline in init, then the fourth's all_reduce
    failed on a peer that had aborted. The deadline came first, so it is the cause; the error its consequence."""
    def failed(rank, kind, op, lib, at, phase):
        return {"kind": kind, "op": op, "lib_error": lib, "detail": "", "rank": rank, "host": "h", "at_s": at,
                "phase_s": at - 0.6, "last_phase": phase}
    recs = [_rec(0, ["a"], 0, "a", "hang", failed(0, "hang", "init", "deadline exceeded", 3.011, "init")),
            _rec(1, ["a"], -1, "", "error", failed(1, "error", "all_reduce", "ncclSystemError", 3.043, "verify")),
            _rec(2, ["a"], -1, "", "hang", failed(2, "hang", "init", "deadline exceeded", 3.004, "init")),
            _rec(3, ["a"], -1, "", "hang", failed(3, "hang", "init", "deadline exceeded", 3.008, "init"))]
    row = judge("scoped", 0, 4, recs, [], History())
    assert row["verdict"] == "hang" and row["error"]["rank"] == 2, row
    d = row["diagnosis"]
    first = d.index("first: hang on rank 2 in init: deadline exceeded (3.00 s into the round, 2.40 s into init)")
    then = d.index("then: error on rank 1 in all_reduce: ncclSystemError (3.04 s into the round")
    assert first < then and "deadline passed on ranks 0, 2, 3" in d, d
    recs[1].error["at_s"] = 0.5  # an error first: the hangs that follow are its consequence
    row = judge("scoped", 1, 4, recs, [], History())
    assert row["verdict"] == "error" and "first: error on rank 1 in all_reduce" in row["diagnosis"], row


def test_diagnosis_of_wrong_results_and_caught_stale_ids():
    h = History()
    h.add("stock", 2, [_rec(1, ["x", "old"], 1, "old")])
    w = _rec(0, ["a"], 0, "a", "wrong")
    w.wrong = 3
    row = judge("scoped", 0, 1, [w], [], h)
    assert row["verdict"] == "wrong" and row["wrong"] == 3 and "3 wrong elements" in row["diagnosis"]
    caught = [_rec(0, ["n0", "old"], 0, "n0", "stale"), _rec(1, ["n0", "n1"], 1, "n1", "stale")]
    row = judge("stock", 3, 2, caught, [], h)
    assert row["verdict"] == "stale"
    assert row["diagnosis"].startswith("stale ID caught before init: rank 0 held root 1's ID from round 2")


def test_a_rank_record_keeps_its_json_form_and_reads_back_from_the_journal(tmp_path):
    rec = RankRecord(1, verdict="wrong", wrong=2, phases=["bootstrap", "init", "verify"], wrong_from=[0])
    assert "sample" not in rec.to_json() and RankRecord.from_json(rec.to_json()) == rec
    assert RankRecord.from_json({**rec.to_json(), "added_later": 1}) == rec  # a newer journal's extra key
    w = journal.Writer(tmp_path / "j.jsonl", {"options": {}})
    w.round({"mode": "scoped", "round": 0, "verdict": "wrong", "ranks": [None, rec]})
    w.close()
    line = json.loads((tmp_path / "j.jsonl").read_text().splitlines()[1])
    assert line["ranks"] == [None, rec.to_json()]
    assert journal.read(tmp_path / "j.jsonl").rounds[0]["ranks"] == [None, rec]


def test_journal_reads_torn_lines_and_rejects_foreign_files(tmp_path):
    p = tmp_path / "j.jsonl"
    w = journal.Writer(p, {"options": {"seed": 1}})
    w.round({"mode": "stock", "round": 0, "verdict": "ok"})
    w.close()
    with open(p, "a") as f:
        f.write('{"type":"round","mode":"stock","rou')  # a kill in the middle of a line
    c = journal.read(p)
    assert [r["round"] for r in c.rounds] == [0] and c.torn == 1 and c.rounds[0]["ranks"] == []
    w = journal.Writer(p)  # resume appends after a clean newline
    w.round({"mode": "stock", "round": 1, "verdict": "ok"})
    w.close()
    assert [r["round"] for r in journal.read(p).rounds] == [0, 1]
    with pytest.raises(UsageError):
        journal.Writer(p, {"options": {}})  # a fresh journal never clobbers
    foreign = tmp_path / "f.json"
    foreign.write_text(json.dumps({"kind": "bench"}) + "\n")
    for bad in (foreign, tmp_path / "missing.jsonl"):
        with pytest.raises(UsageError, match="--resume"):
            journal.read(bad)


def test_a_journal_of_more_notes_than_runs_write_is_refused(tmp_path, monkeypatch):
    """The lines that are not rounds are held whole: a few a run, bounded (records.stress_journal.MAX_NOTES)."""
    p = tmp_path / "j.jsonl"
    w = journal.Writer(p, {"options": {"seed": 1}})
    for k in range(3):
        w.note({"type": "resume", "after_rounds": k})
    w.close()
    assert len(journal.read(p).notes) == 3
    monkeypatch.setattr(journal, "MAX_NOTES", 2)
    with pytest.raises(UsageError, match="holds more than 2 lines that are not rounds"):
        journal.read(p)


@pytest.mark.parametrize("kw,needle", [
    ({"rounds": 0}, "--rounds"), ({"skew_max": -0.1}, "--skew-max"), ({"collective": "gossip"}, "--collective"),
    ({"on_failure": "panic"}, "--on-failure"), ({"bytes": 2}, "--bytes"), ({"resume": True}, "--resume"),
    ({"baseline": -1}, "--baseline"),
])
def test_options_reject_bad_values_by_name(kw, needle):
    with pytest.raises(UsageError, match=needle):
        StressOptions(JobOptions(backend="gloo"), **kw)


def test_injection_parsing():
    assert str(Injection.parse("delay:2:1:0.5")) == "delay:2:1:0.5"
    assert Injection.parse("wrong:1:0").kind == "wrong"
    for bad in ("wrong:1", "melt:1:0", "wrong:1:0:3", "delay:x:1:2"):
        with pytest.raises(UsageError, match="--inject"):
            Injection.parse(bad)
