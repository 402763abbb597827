"""`report`: every plot rendered from saved result files (made by real gloo runs, tests/fixtures),
the markdown names every input, --compare finds no change against itself and the regression in
a doctored copy; bad input is one line naming the file, exit 2."""
import json
import math
import random
import re
from pathlib import Path

import pytest

from helpers import REPO, one_line_error, run
from nccl_bench import records
from nccl_bench.report import anchors, compare, plot
from nccl_bench.core.errors import UsageError

FIX = REPO / "tests" / "fixtures"
FIXTURES = ["bench_gloo.json", "init_gloo.json", "init_simulate.json", "stress_gloo.jsonl",
            "stress_gloo-summary.json", "asv_cpu.json"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def report(*args, timeout=120):
    return run(["-m", "nccl_bench", "report", *map(str, args)], timeout=timeout)


def doctored(src, dst, edit):
    """The file read through records, edited, written back as its kind (bench: schema 1, which still reads)."""
    res = records.load(str(src))
    edit(res)
    return records.write(res.kind, res.every_cycle(), res.meta, dst)


def as_h200(doc, graph=0):
    """The fixture's rows with a 2 x H200 metadata block: draws the link peak and nccl-tests' anchors."""
    doc.meta.update(machine="h200x2", backend="nccl", links=[{"gpus": [0, 1], "link": "NV18"}],
                    gpus=[{"index": i, "name": "NVIDIA H200", "memory_gib": 139.8} for i in range(2)])
    doc.meta["versions"].update(torch="2.11.0+cu130", nccl="2.28.9")
    doc.meta["bench"]["cudagraph"] = graph


def lower_busbw(doc, factor=0.9):
    for row in doc.rows:
        for place in ("out_of_place", "in_place"):
            row[place]["bus_bw"] *= factor


def test_every_plot_rendered_and_every_input_named(tmp_path):
    h200 = doctored(FIX / "bench_gloo.json", tmp_path / "bench_h200x2.json", as_h200)
    graph = doctored(FIX / "bench_gloo.json", tmp_path / "bench_h200x2_graph.json", lambda d: as_h200(d, graph=20))
    inputs = [FIX / f for f in FIXTURES] + [h200, graph]
    out = tmp_path / "rep"
    proc = report(*inputs, "--out", out)
    assert proc.returncode == 0, proc.stderr
    md = (out / "report.md").read_text()
    for path in inputs:
        assert str(path) in md, f"{path} not named in the report"
    pngs = {p.name for p in out.glob("*.png")}
    assert pngs == {"busbw-all_reduce.png", "busbw-all_gather.png", "latency.png", "init-phases.png",
                    "stress-timeline-stress_gloo.png", "history-cpu-init.InitLatency.track_median.png",
                    "history-cpu-stress.ScopedChurn.track_rounds_per_s.png",
                    "history-cpu-stress.ScopedChurn.track_seconds_per_round.png"}
    for name in pngs:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 20_000, name
        assert f"]({name})" in md, f"{name} not embedded"
    for text in ("## Inputs", "## Bandwidth (bench)", "## Communicator init (init)", "## Re-init churn",
                 "## History (asv)", "stress.ScopedChurn.track_rounds_per_s", "stale IDs proven",
                 "| h200x2 ", "nccl x2", "NCCL 2.28.9"):
        assert text in md, text
    # the churn table: stress's own columns, each row's cells under them (stock's 7 stale IDs proven, not its p50)
    lines = md.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("| mode ") and "stale proven" in x)
    cols = [c.strip() for c in lines[head].strip("|").split("|")]
    stock = next([c.strip() for c in x.strip("|").split("|")] for x in lines[head + 2:] if x.startswith("| stock"))
    assert len(stock) == len(cols) and dict(zip(cols, stock))["stale proven"] == "7", (cols, stock)


def test_compare_with_itself_reports_no_change(tmp_path):
    files = [FIX / f for f in ("bench_gloo.json", "init_gloo.json", "stress_gloo.jsonl", "asv_cpu.json")]
    out = tmp_path / "rep"
    proc = report(*files, "--compare", *files, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "0 regression(s), 0 improvement(s)" in proc.stdout
    md = (out / "report.md").read_text()
    assert not re.search(r"\|\s*(regression|improvement|mixed)\s*\|", md)
    for kind in ("bench", "init", "stress", "asv"):
        assert f"### {kind}\n" in md
    assert {"compare-bench-all_reduce.png", "compare-bench-all_gather.png", "compare-init.png",
            "compare-stress.png", "compare-asv.png"} <= {p.name for p in out.glob("*.png")}


def test_stress_compares_only_runs_of_one_backend_and_ranks(tmp_path):
    """A mode's churn on 3 ranks is no baseline for 2: --compare matches stress and init runs by backend and ranks,
    as bench's points by their series, and says so in one line where no run matches (it judged 3 ranks against 2)."""
    journal = (FIX / "stress_gloo.jsonl").read_text()
    three = tmp_path / "stress_x3.jsonl"
    three.write_text(journal.replace('"nranks":2', '"nranks":3', 1))
    err = one_line_error(report(three, "--compare", FIX / "stress_gloo.jsonl", "--out", tmp_path / "r", "--no-plots"))
    assert "nothing in common to compare: this run holds stress (gloo x3), the compared run stress (gloo x2)" in err
    both = report(three, FIX / "stress_gloo.jsonl", "--compare", FIX / "stress_gloo.jsonl", "--out", tmp_path / "r2",
                  "--no-plots")
    assert both.returncode == 0 and "0 regression(s), 0 improvement(s)" in both.stdout, both.stdout + both.stderr
    md = (tmp_path / "r2" / "report.md").read_text()
    assert "| stock (gloo x2) " not in md and "| stock " in md  # one setup in common: its modes as they are


def test_compare_with_busbw_lowered_10_percent_reports_the_regression(tmp_path):
    slower = doctored(FIX / "bench_gloo.json", tmp_path / "bench_slower.json", lower_busbw)
    out = tmp_path / "rep"
    proc = report(slower, "--compare", FIX / "bench_gloo.json", "--out", out, "--no-plots")  # the figures: above
    assert proc.returncode == 0, proc.stderr
    assert "(0 plot(s))" in proc.stdout and not list(out.glob("*.png")) and "![" not in (out / "report.md").read_text()
    # nor a caption or heading of a figure that is not there
    assert not {"Out-of-place solid", "Latency at small sizes"} & set(re.findall(
        r"Out-of-place solid|Latency at small sizes", (out / "report.md").read_text()))
    rows = compare.bench(records.load_all([str(slower)]), records.load_all([str(FIX / "bench_gloo.json")]))
    assert rows and all(r["verdict"] == "regression" and math.isclose(r["ratio"], 0.9) for r in rows)
    assert f"{len(rows)} regression(s), 0 improvement(s)" in proc.stdout
    md = (out / "report.md").read_text()
    assert not re.search(r"\|\s*no change\s*\|", md) and re.search(r"\|\s*regression\s*\|", md)
    assert str(slower) in md and str(FIX / "bench_gloo.json") in md
    # and the other way round: the original run is an improvement on the slower copy
    back = compare.bench(records.load_all([str(FIX / "bench_gloo.json")]), records.load_all([str(slower)]))
    assert all(r["verdict"] == "improvement" for r in back)
    # for CI: the same comparison exits 1 with --fail-on-regression, after writing its report
    strict = report(slower, "--compare", FIX / "bench_gloo.json", "--out", tmp_path / "strict",
                    "--fail-on-regression", "--no-plots")
    assert strict.returncode == 1 and (tmp_path / "strict" / "report.md").exists(), strict.stderr
    calm = report(FIX / "bench_gloo.json", "--compare", FIX / "bench_gloo.json", "--out", tmp_path / "calm",
                  "--fail-on-regression", "--no-plots")
    assert calm.returncode == 0, calm.stderr


def test_noise_widens_the_spread_and_a_step_is_still_found(tmp_path):
    """Multiplicative noise of ~5 % per size: no size flagged; a 25 % drop at the large sizes: those flagged."""
    rng = random.Random(1)

    def noisy(doc, step=1.0):
        for row in doc.rows:
            for place in ("out_of_place", "in_place"):
                f = math.exp(rng.gauss(0, 0.05)) * (step if row["size"] >= 1 << 17 else 1.0)
                row[place]["bus_bw"] *= f
                row[place]["time"] /= f
    base = records.load_all([str(FIX / "bench_gloo.json")])
    calm = compare.bench(records.load_all([str(doctored(FIX / "bench_gloo.json", tmp_path / "a.json", noisy))]),
                         base)
    assert sum(r["verdict"] != "no change" for r in calm) <= 2, [r for r in calm if r["verdict"] != "no change"]
    stepped = compare.bench(records.load_all([str(doctored(FIX / "bench_gloo.json", tmp_path / "b.json",
                                                           lambda d: noisy(d, 0.75)))]), base)
    big = [r for r in stepped if r["size"] >= 1 << 17]
    assert sum(r["verdict"] == "regression" for r in big) >= 0.8 * len(big)


def test_link_peak_only_where_the_link_is_known():
    meta = {"backend": "nccl", "gpus": [{"name": "NVIDIA H200"}] * 2, "links": [{"gpus": [0, 1], "link": "NV18"}]}
    gbps, label = anchors.link_peak(meta)
    assert math.isclose(gbps, 478.08) and "NV18" in label
    assert anchors.link_peak({**meta, "backend": "gloo"}) is None
    assert anchors.link_peak({**meta, "links": [{"gpus": [0, 1], "link": "SYS"}]}) is None
    assert anchors.link_peak({**meta, "gpus": [{"name": "NVIDIA A10"}]}) is None
    assert [plot.size_label(n) for n in (8, 1024, 3 << 19, 8 << 30)] == ["8", "1K", "1.5M", "8G"]


# --- bad input -------------------------------------------------------------------------------
def bad_files(tmp):
    bench = json.loads((FIX / "bench_gloo.json").read_text())
    journal = (FIX / "stress_gloo.jsonl").read_text().splitlines()
    head = json.loads(journal[0])
    asv = json.loads((FIX / "asv_cpu.json").read_text())
    files = {
        "empty.json": "",
        "blank.json": "\n \n",
        "foreign.json": json.dumps({"name": "something else", "values": [1, 2]}),
        "text.txt": "size time busbw\n8 11.3 0.001\n",
        "list.json": "[1, 2, 3]",
        "schema99.json": json.dumps({**bench, "schema": 99}),
        "kind.json": json.dumps({**bench, "kind": "weather"}),
        "norows.json": json.dumps({**bench, "rows": []}),
        "badrow.json": json.dumps({**bench, "rows": [{"size": 8}]}),
        "journal2.jsonl": "\n".join([json.dumps({**head, "schema": "nccl_bench.stress.journal/2"}), *journal[1:]]),
        "journal_empty.jsonl": journal[0],
        "asv1.json": json.dumps({**asv, "version": 1}),
    }
    for name, text in files.items():
        (tmp / name).write_text(text)
    return {name: tmp / name for name in files}


def test_bad_files_are_usage_errors_naming_the_file(tmp_path):
    for name, path in bad_files(tmp_path).items():
        with pytest.raises(UsageError) as e:
            records.load(str(path), need_rows=True)  # as the report reads
        assert str(path) in str(e.value) and "\n" not in str(e.value), (name, e.value)
    with pytest.raises(UsageError, match="schema version 99"):
        records.load(str(tmp_path / "schema99.json"))
    with pytest.raises(UsageError, match="no such file"):
        records.load(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("name", ["empty.json", "foreign.json", "schema99.json"])
def test_bad_file_one_line_exit_2_and_nothing_written(tmp_path, name):
    path = bad_files(tmp_path)[name]
    out = tmp_path / "rep"
    err = one_line_error(report(FIX / "bench_gloo.json", "--compare", path, "--out", out))
    assert str(path) in err
    assert not out.exists()


def test_out_folder_with_files_is_refused(tmp_path):
    (tmp_path / "old.md").write_text("keep me")
    err = one_line_error(report(FIX / "bench_gloo.json", "--out", tmp_path))
    assert "not empty" in err and (tmp_path / "old.md").read_text() == "keep me"


def test_fail_on_regression_without_compare_is_refused(tmp_path):
    err = one_line_error(report(FIX / "bench_gloo.json", "--out", tmp_path / "r", "--fail-on-regression"))
    assert "--fail-on-regression needs --compare" in err and not (tmp_path / "r").exists()


def test_rows_of_other_types_ops_roots_and_groups_stay_apart():
    """-d/-o/-r all and --split give several rows per (collective, size): each is its own series."""
    from pathlib import Path
    place = {"time": 1.0, "alg_bw": 1.0, "bus_bw": 1.0, "nwrong": 0}
    base = {"collective": "reduce", "size": 64, "count": 16, "algo": "default", "init": "regular",
            "out_of_place": place, "in_place": place}
    rows = [{**base, "type": t, "redop": op, "root": root, **({"group": g} if g is not None else {})}
            for t, op, root, g in [("float", "sum", 0, None), ("half", "sum", 0, None), ("float", "max", 0, None),
                                   ("float", "sum", 1, None), ("float", "sum", 0, 1)]]
    res = records.Result(Path("x.json"), "x.json", "bench", {}, rows)
    series = {k[1] for k in compare._bench_points([res]) if k[2] == "out_of_place"}
    assert series == {"default, regular", "default, regular, half", "default, regular, max",
                      "default, regular, root 1", "default, regular, group 1"}


def test_a_line_cut_by_a_kill_is_named_and_the_rounds_read_counted(tmp_path):
    lines = (FIX / "stress_gloo.jsonl").read_text().splitlines()
    rounds = [i for i, line in enumerate(lines) if '"type":"round"' in line.replace(" ", "")]
    cut = rounds[2]
    lines[cut] = lines[cut][: len(lines[cut]) // 2]  # a write the kill interrupted
    journal = tmp_path / "cut.jsonl"
    journal.write_text("\n".join(lines) + "\n")
    proc = report(journal, "--compare", FIX / "stress_gloo.jsonl", "--out", tmp_path / "rep")
    assert proc.returncode == 0, proc.stderr
    assert f"report: {journal} line {cut + 1}: cut short (a write interrupted), skipped" in proc.stdout
    assert f"report: {journal}: {len(rounds) - 1} round(s) read" in proc.stdout
    assert f"{FIX / 'stress_gloo.jsonl'}: {len(rounds)} round(s) read" in proc.stdout
    assert f"skipped: {cut + 1}" in (tmp_path / "rep" / "report.md").read_text()


def test_a_soaks_journal_is_read_line_by_line_past_a_result_files_size_each_ok_round_slim(tmp_path, monkeypatch):
    """A soak's journal of days (a few GB: 1.5 KB a round on 2 ranks, 5 KB on 8) is read line by line, not held
    whole, and past the 1 GiB a result file holds; a round that went well keeps what the report reads of it (its
    ranks' records took 2.2 KB of memory a round), a failed one all but its ranks' records, the leak watch's
    samples stay; a line with no end in sight is a damaged line, never read whole."""
    from nccl_bench.records import reading, stress_journal
    lines = (FIX / "stress_gloo.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if '"type":"round"' in line.replace(" ", "")]
    failed = dict(rows[0], verdict="hang", diagnosis="rank 1 never arrived", seq=len(rows), round=len(rows))
    sampled = dict(rows[1], seq=len(rows) + 1, round=len(rows) + 1,
                   ranks=[dict(rec, sample={"rss_bytes": 1 << 20, "fds": 9}) for rec in rows[1]["ranks"]])
    journal = tmp_path / "soak.jsonl"
    journal.write_text("\n".join([lines[0], *lines[1:-1], json.dumps(failed), json.dumps(sampled), "{" + "x" * 5000,
                                  lines[-1]]) + "\n")
    monkeypatch.setattr(reading, "MAX_BYTES", 1 << 10)  # a result file holds far less than this journal
    monkeypatch.setattr(stress_journal, "MAX_LINE", 4096)
    res = records.load(str(journal))
    assert res.kind == "stress" and len(res.rows) == len(rows) + 2
    ok = [r for r in res.rows if r["verdict"] == "ok"]
    assert ok and all(set(r) <= {*stress_journal.OK_FIELDS, "stale", "samples"} for r in ok), ok[0]
    assert res.rows[-2]["diagnosis"] == "rank 1 never arrived" and "ranks" not in res.rows[-2]
    assert res.rows[-1]["samples"] == {rec["rank"]: {"rss_bytes": 1 << 20, "fds": 9} for rec in rows[1]["ranks"]}
    assert res.damaged == [len(lines) + 2]  # the endless line, numbered in the file
    monkeypatch.setattr(stress_journal, "MAX_DAMAGED", 0)  # a file of lines that do not read: refused, not listed
    with pytest.raises(UsageError, match=f"more than 0 lines that do not read \\(from line {len(lines) + 2}\\)"):
        records.load(str(journal))
    monkeypatch.setattr(stress_journal, "MAX_DAMAGED", 1000)
    notes = sum(1 for line in lines[1:] if '"type":"round"' not in line.replace(" ", ""))  # held whole: bounded
    monkeypatch.setattr(stress_journal, "MAX_NOTES", notes - 1)
    with pytest.raises(UsageError, match="lines that are not rounds, or more than 64 MiB of them"):
        records.load(str(journal))
    monkeypatch.setattr(stress_journal, "MAX_NOTES", notes)
    monkeypatch.setattr(stress_journal, "MAX_NOTE_BYTES", 100)
    with pytest.raises(UsageError, match="lines that are not rounds, or more than 0 MiB of them"):
        records.load(str(journal))
    monkeypatch.setattr(stress_journal, "MAX_BYTES", 1 << 10)
    with pytest.raises(UsageError, match="more than a stress journal holds"):
        records.load(str(journal))


def test_a_long_journal_says_how_many_rounds_it_has_read(tmp_path, monkeypatch, capsys):
    """A day's soak is a million rounds, 45 s to read: the report says how far it is every 5 s meanwhile."""
    from nccl_bench.records import reading, stress_journal
    from nccl_bench.report import command
    lines = (FIX / "stress_gloo.jsonl").read_text().splitlines()
    rounds = [line for line in lines if '"type":"round"' in line.replace(" ", "")]
    journal = tmp_path / "soak.jsonl"
    journal.write_text("\n".join([lines[0], *rounds * 5]) + "\n")
    monkeypatch.setattr(stress_journal, "ROUNDS_BETWEEN_CALLS", len(rounds))  # called 5 times
    monkeypatch.setattr(command, "SAY_EVERY_S", 0.0)
    got = []
    res = reading.load_all([str(journal)], rounds=lambda given, n: got.append((given, n)))[0]
    assert got == [(str(journal), len(rounds) * k) for k in range(1, 6)] and len(res.rows) == 5 * len(rounds)
    clock = iter([0.0, 2.0, 6.0, 7.0, 7.0])  # each call of monotonic()
    monkeypatch.setattr(command.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(command, "SAY_EVERY_S", 5.0)
    said = command.Reading()  # at 0 s
    for n in (10_000, 20_000, 30_000):  # at 2, 6 and 7 s
        said.rounds("soak.jsonl", n)
    said.done(1)  # at 7 s: one file
    assert capsys.readouterr().out.splitlines() == ["report: soak.jsonl: read 20,000 rounds (6 s)",
                                                    "report: read 1 file in 7 s; writing the report"]


def test_the_files_of_one_report_are_bounded_together_said_at_the_file_that_passes(monkeypatch):
    """Each file is bounded (1 GiB, 5 million rows); so are all of a report's together, before any is drawn: a
    folder of thousands of runs would otherwise be held whole. A journal counts by its rounds, not its bytes."""
    from nccl_bench.records import reading
    bench, journal = FIX / "bench_gloo.json", FIX / "stress_gloo.jsonl"
    monkeypatch.setattr(reading, "MAX_BYTES_ALL", bench.stat().st_size)
    assert len(reading.load_all([str(journal), str(bench)])) == 2  # the journal's bytes do not count
    with pytest.raises(UsageError, match=f"^{bench}: with the files before it, {2 * bench.stat().st_size:,} bytes"):
        reading.load_all([str(bench), str(bench)])
    rows = len(records.load(str(journal)).rows)
    monkeypatch.setattr(reading, "MAX_ROWS_ALL", 2 * rows - 1)
    with pytest.raises(UsageError, match=f"with the files before it, {2 * rows:,} rows: more than one report reads"):
        reading.load_all([str(journal), str(journal)])


def test_a_difference_within_a_points_own_spread_is_noise_not_a_regression(tmp_path):
    def with_spread(pct):
        def edit(doc):
            for row in doc.rows:
                row["spread_pct"] = {"out_of_place": pct, "in_place": pct}
        return edit
    base = FIX / "bench_gloo.json"
    noisy = doctored(base, tmp_path / "noisy.json", lambda d: (lower_busbw(d), with_spread(15.0)(d)))
    steady = doctored(base, tmp_path / "steady.json", lambda d: (lower_busbw(d), with_spread(1.0)(d)))
    rows = compare.bench(records.load_all([str(noisy)]), records.load_all([str(base)]))
    assert rows and all(r["verdict"] == "no change" and r["spread_pct"] == 15.0 for r in rows)
    rows = compare.bench(records.load_all([str(steady)]), records.load_all([str(base)]))
    assert rows and all(r["verdict"] == "regression" for r in rows)


# one file of every kind: NCCL's where a GPU run wrote one (results/), the rest this suite's gloo fixtures
EVERY_KIND = {
    "bench": "results/h200x2/asv/bench_direct.json", "init": "results/h200x1/onegpu/init.json",
    "init-simulate": "results/h200x2/init/init_sim4096.json", "stress": "tests/fixtures/stress_gloo.jsonl",
    "stress-summary": "results/h200x2/nvtx/nvtx-summary.json", "doctor": "results/h200x2/accept/doctor_nccl.json",
    "accept": "results/h100x1/accept/accept_golden.json", "locate": "results/h100x1/accept/locate.json",
    "fleet": "results/h100x1/accept/fleet.json", "replay": "results/h100x2/replay/replay_kineto_torch_1.json",
    "leakcheck": "results/h100x1/soak/bisect/bisect_ours.json", "asv": "tests/fixtures/asv_cpu.json",
}


def test_a_folder_of_every_kind_gets_a_section_each(tmp_path):
    import shutil
    folder = tmp_path / "all"
    folder.mkdir()
    for kind, path in EVERY_KIND.items():
        shutil.copy(REPO / path, folder / f"{kind}{Path(path).suffix}")
    records.write("copies", [{"gpu": 0, "device_GBps": 2963.0, "h2d_GBps": 55.2, "d2h_GBps": 55.2}],
                  {"bytes": 512 << 20}, folder / "copies.json")
    assert {r.kind for r in records.load_all([str(folder)])} == {*records.KINDS, "asv"}
    proc = report(folder, "--out", tmp_path / "rep")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "rep" / "report.md").read_text()
    for kind in records.KINDS:
        assert f"## {records.KINDS[kind].title}" in text or kind == "asv", kind
    assert "Sequence per pass:" in text and "| call " in text  # replay: its rows, the ratio, the sequence


def test_a_run_that_failed_before_its_first_row_is_reported_as_failed_not_a_reason_to_refuse(tmp_path):
    """A bench that timed out leaves a result with no rows in results/runs/; the folder is still reported, that
    run said as failed on the terminal and in the document (issue 69)."""
    import shutil
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "bench_gloo.json", runs)
    proc = run(["-m", "nccl_bench", "bench", "--backend", "gloo", "-b", "8", "-e", "1M", "--timeout", "0.001",
                "-J", str(runs / "bench-timedout.json")], timeout=120)
    assert proc.returncode == 1 and (runs / "bench-timedout.json").exists(), proc.stderr
    proc = run(["-m", "nccl_bench", "report", str(runs), "--out", str(tmp_path / "r")], timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stdout.splitlines() if "failed before its first row" in line]
    assert len(said) == 1 and "bench-timedout.json" in said[0], proc.stdout
    assert "## Runs that failed" in (tmp_path / "r" / "report.md").read_text()


def test_many_runs_draw_one_readable_figure_and_library_warnings_go_to_the_log(tmp_path):
    # past plot.MAX_LINES files a series is drawn once, as the median of the runs with their range; a report
    # over thousands of runs drew a legend line per file (54 s for 2,000) and matplotlib warned on the terminal
    files = [tmp_path / f"bench-{i}.json" for i in range(plot.MAX_LINES + 2)]
    for path in files:
        doctored(FIX / "bench_gloo.json", path, lambda d: None)
    results = [records.load(str(p)) for p in files]
    lines, runs = plot._bench_lines(results, "all_reduce")
    assert runs == len(files) and not any("[" in label for label in lines)
    assert all(len(rows) == len(files) for _, pts in lines.items() for _, rows in pts)
    lines, runs = plot._bench_lines(results[:2], "all_reduce")
    assert runs == 1 and all("[bench-" in label for label in lines)  # few files: a line each, named
    proc = report(*files, "--out", tmp_path / "rep")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stdout + proc.stderr, proc.stderr
    assert (tmp_path / "rep" / "busbw-all_reduce.png").read_bytes()[:8] == PNG_MAGIC


def test_a_long_read_says_where_it_stands(capsys, monkeypatch):
    from nccl_bench.report import command
    clock = iter([0.0, 1.0, 6.0, 7.0, 12.5, 13.0])  # each call of monotonic()
    monkeypatch.setattr(command.time, "monotonic", lambda: next(clock))
    reading = command.Reading()  # at 0 s
    for done in (1, 2, 3):  # read at 1, 6 and 7 s
        reading(done, 4)
    reading(4, 4)  # the last file: no line, done() says it
    reading.done(4)
    out = capsys.readouterr().out.splitlines()
    assert out == ["report: read 2 of 4 files (6 s)", "report: read 4 files in 13 s; writing the report"], out


def test_a_locate_files_lists_are_shown_bounded_whatever_their_length(tmp_path):
    """A locate file of 300,000 suspects and per-rank checks (its word, unchecked by any job) made a 27 MB
    report.md: at most 100 suspects are listed, the rest counted, and a check per rank up to 4,096 ranks."""
    doc = json.loads((REPO / "results" / "h200x2" / "locate" / "locate_healthy.json").read_text())
    doc["meta"].update(checks=[{"gpu": {"copy_GBps": 1.0}}] * 300_000,
                       suspects=[{"who": "rank 1", "evidence": ["slow"]}] * 300_000)
    (tmp_path / "many.json").write_text(json.dumps(doc))
    proc = run(["-m", "nccl_bench", "report", str(tmp_path / "many.json"), "--out", str(tmp_path / "r")], timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "r" / "report.md").read_text()
    assert text.count("- SUSPECT rank 1: slow") == 100 and "- and 299900 more suspect(s) in the file" in text
    assert len(text) < 1_000_000, len(text)
    assert "(1 plot(s))" in proc.stdout, proc.stdout  # the pair heatmap, counted


def test_the_stress_timeline_places_rounds_by_mode_and_round_not_seq():
    """A journal resumed with more --rounds holds two plans' seqs, and a mode its --duration ended leaves seqs unrun:
    the timeline places each round by its mode and round, the modes in turn, each as long as its rounds."""
    from nccl_bench.report.timeline import _in_plan_order
    first = [{"mode": m, "round": k, "seq": i * 6 + k} for i, m in enumerate(("regular", "stock")) for k in range(6)]
    resumed = [{"mode": m, "round": k, "seq": i * 8 + k} for i, m in enumerate(("regular", "stock")) for k in (6, 7)]
    placed = _in_plan_order(first + resumed)
    assert [(r["mode"], r["round"], x) for x, r in placed] == [
        *(("regular", k, k) for k in range(8)), *(("stock", k, 8 + k) for k in range(8))]
    ended = [{"mode": "regular", "round": k, "seq": k} for k in range(3)] + [
        {"mode": "scoped", "round": k, "seq": 1500 + k} for k in range(2)]
    assert [x for x, _ in _in_plan_order(ended)] == [0, 1, 2, 3, 4]
