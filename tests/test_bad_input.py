"""Every promise under bad input, one table: an output that cannot be written, a setting out of range, a file
that is not what it claims. Each case is a real command; each must end with exit 2 (fleet: exit 1 naming the
node) and one line that names what is wrong, before any work (within seconds), leaving no process behind.
Cases that need read-only or full storage mount a tmpfs in a mount namespace of their own (unshare -m)."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO, one_line_error, run

FIX = REPO / "tests" / "fixtures"
ACCEPT = REPO / "results" / "h100x1" / "accept" / "accept_golden.json"  # a real accept file, written on an H100
LOCATE = REPO / "results" / "h200x2" / "locate" / "locate_healthy.json"  # a real locate file, 2 x H200
BENCH = ["-m", "nccl_bench", "bench", "-b", "8", "-e", "8", "-n", "1", "-w", "0"]


def can_mount() -> bool:
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True)
    return shutil.which("unshare") is not None and probe.returncode == 0


def mounted(tmp: Path, options: str, fill: int = 0) -> list[str]:
    """The argv prefix that runs a command with a tmpfs (`options`) over tmp/m, `fill` bytes already in it."""
    m = tmp / "m"
    m.mkdir(exist_ok=True)
    fill_cmd = f" && head -c {fill} /dev/zero > {m}/fill" if fill else ""
    return ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o {options} tmpfs {m}{fill_cmd} && exec "$0" "$@"',
            sys.executable]


def doc_with(path: Path, edit) -> str:
    doc = json.loads(Path(path).read_text())
    edit(doc)
    return json.dumps(doc)


def deep(n: int = 50_000) -> str:
    return "[" * n + "]" * n


def bench_rows(edit):
    return lambda d: [edit(r) for r in d["rows"]]


# (name, argv with {tmp} for the test's folder, files to write first {name: text}, env, what the line says)
CASES = [
    # outputs that cannot be written: said before any work
    ("bench -J under /proc", [*BENCH, "-J", "/proc/x.json"], {}, {}, "cannot write in /proc"),
    ("init --json under /sys", ["-m", "nccl_bench", "init", "--rounds", "1", "--json", "/sys/x.json"], {}, {},
     "cannot write in /sys"),
    ("stress --journal under /proc", ["-m", "stress", "--rounds", "1", "--journal", "/proc/j.jsonl"], {}, {},
     "cannot write in /proc"),
    ("stress --journal a folder", ["-m", "stress", "--rounds", "1", "--journal", "{tmp}"], {}, {},
     "a folder, where a file is expected"),
    ("report --out under /proc", ["-m", "nccl_bench", "report", str(FIX / "bench_gloo.json"), "--out", "/proc/r"],
     {}, {}, "cannot write in /proc"),
    ("fleet --out under /proc", ["-m", "nccl_bench", "fleet", str(ACCEPT), "--out", "/proc/f"], {}, {},
     "cannot write in /proc"),
    ("accept --json under /sys", ["-m", "nccl_bench", "accept", "--json", "/sys/a.json"], {}, {},
     "cannot write in /sys"),
    ("bench -J a folder", [*BENCH, "-J", "{tmp}"], {}, {}, "a folder, where a file is expected"),
    # settings
    ("MASTER_PORT not a port", ["-m", "nccl_bench", "smoke"], {}, {"RANK": "0", "WORLD_SIZE": "1",
                                                                   "MASTER_PORT": "notaport"}, "MASTER_PORT"),
    ("MASTER_PORT out of range", ["-m", "nccl_bench", "smoke"], {}, {"RANK": "0", "WORLD_SIZE": "1",
                                                                     "MASTER_PORT": "70000"}, "not a TCP port"),
    ("MASTER_ADDR no address", ["-m", "nccl_bench", "smoke", "--timeout", "2"], {},
     {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "256.1.1.1"}, "MASTER_ADDR='256.1.1.1'"),
    ("RANK beyond WORLD_SIZE", ["-m", "nccl_bench", "smoke"], {}, {"RANK": "5", "WORLD_SIZE": "2"},
     "rank 5 is outside a world of 2"),
    ("LOCAL_RANK not a number", ["-m", "stress", "--rounds", "1"], {}, {"RANK": "0", "WORLD_SIZE": "1",
                                                                        "LOCAL_RANK": "x"}, "LOCAL_RANK"),
    ("WORLD_SIZE beyond reason", ["-m", "stress", "--rounds", "3"], {},
     {"RANK": "0", "WORLD_SIZE": "99999999999999999999"}, "the world size is 99999999999999999999, not 1 to"),
    ("WORLD_SIZE past 2**32", ["-m", "nccl_bench", "smoke", "--timeout", "10"], {},
     {"RANK": "0", "WORLD_SIZE": "4294967297", "LOCAL_RANK": "0"}, "the world size is 4294967297"),
    ("NCCL_BENCH_START_MARKS unwritable", ["-m", "stress", "--rounds", "3"], {},
     {"NCCL_BENCH_START_MARKS": "/proc/nccl-bench-marks"},
     "NCCL_BENCH_START_MARKS=/proc/nccl-bench-marks: cannot append"),
    ("NCCL_BENCH_STORE_TIMEOUT negative", ["-m", "stress", "--rounds", "3"], {}, {"NCCL_BENCH_STORE_TIMEOUT": "-5"},
     "NCCL_BENCH_STORE_TIMEOUT must be above 0"),
    ("bench -b 0", ["-m", "nccl_bench", "bench", "-b", "0", "-e", "1K"], {}, {}, "at least 1 byte"),
    ("bench -e below one element", ["-m", "nccl_bench", "bench", "-b", "1", "-e", "2"], {}, {}, "4-byte element"),
    ("bench --timeout inf", [*BENCH, "--timeout", "inf"], {}, {}, "--timeout must be above 0 and at most"),
    ("bench -e beyond any GPU", ["-m", "nccl_bench", "bench", "-e", "99999999999999999999G"], {}, {},
     "more than any GPU holds"),
    ("bench -i 1 from 8 B to 256 MiB", ["-m", "nccl_bench", "bench", "-b", "8", "-e", "256M", "-i", "1"], {}, {},
     "more than 100000 sizes"),
    ("stress --rounds 10^12", ["-m", "stress", "--rounds", "1000000000000"], {}, {}, "--rounds must be <="),
    ("stress --skew-max inf", ["-m", "stress", "--skew-max", "inf"], {}, {}, "--skew-max must be 0 to 3600"),
    ("bench --nranks 100000", ["-m", "nccl_bench", "bench", "--nranks", "100000"], {}, {}, "host memory"),
    ("stress --nranks 100000", ["-m", "stress", "--nranks", "100000"], {}, {}, "host memory"),
    # words: whole option names only
    ("accept --init (abbreviation)", ["-m", "nccl_bench", "accept", "--init", "stock"], {}, {},
     "unrecognized arguments: --init stock"),
    ("bench --coll (abbreviation)", ["-m", "nccl_bench", "bench", "--coll", "all"], {}, {}, "unrecognized"),
    # files from elsewhere: one line naming the file and what is wrong
    ("report: a size of 'big'", ["-m", "nccl_bench", "report", "{tmp}/big.json"],
     {"big.json": lambda: doc_with(FIX / "bench_gloo.json", bench_rows(lambda r: r.update(size="big")))}, {},
     "big.json: row 0, 'size'"),
    ("report: a size of 10^400", ["-m", "nccl_bench", "report", "{tmp}/huge.json"],
     {"huge.json": lambda: doc_with(FIX / "bench_gloo.json", bench_rows(lambda r: r.update(size=10 ** 400)))}, {},
     "huge.json: row 0, 'size'"),
    ("report: a negative size", ["-m", "nccl_bench", "report", "{tmp}/neg.json"],
     {"neg.json": lambda: doc_with(FIX / "bench_gloo.json", bench_rows(lambda r: r.update(size=-8)))}, {},
     "neg.json: row 0, 'size'"),
    ("report: NaN busbw", ["-m", "nccl_bench", "report", "{tmp}/nan.json"],
     {"nan.json": lambda: doc_with(FIX / "bench_gloo.json", bench_rows(
         lambda r: r["out_of_place"].update(bus_bw=float("nan"))))}, {},
     "'out_of_place.bus_bw': nan is not a finite measurement"),
    ("report: out_of_place 'x'", ["-m", "nccl_bench", "report", "{tmp}/x.json"],
     {"x.json": lambda: doc_with(FIX / "bench_gloo.json", bench_rows(lambda r: r.update(out_of_place="x")))}, {},
     "x.json: row 0 of this bench result lacks 'out_of_place.time'"),
    ("report: nested 50,000 deep", ["-m", "nccl_bench", "report", "{tmp}/deep.json"], {"deep.json": deep}, {},
     "deep.json: nested deeper than any result is"),
    ("report: --compare with nothing in common", ["-m", "nccl_bench", "report", str(FIX / "nccltests_alltoall.json"),
                                                  "--compare", str(FIX / "nccltests_all_reduce_I1.json"),
                                                  "--fail-on-regression", "--out", "{tmp}/r"], {}, {},
     "nothing in common to compare: this run holds nccl on 1 x NVIDIA H200: alltoall [default, regular] 1K-1M; the "
     "compared run nccl on 1 x NVIDIA H200: all_reduce"),
    ("report: a locate pair of rank 10^9", ["-m", "nccl_bench", "report", "{tmp}/far.json", "--out", "{tmp}/r"],
     {"far.json": lambda: doc_with(LOCATE, lambda d: d["rows"][0].update(dst=10 ** 9))}, {},
     "far.json: this locate result holds what its section cannot read (ValueError: rank 1000000000 in its pairs"),
    ("report: a file where a folder of results was meant", ["-m", "nccl_bench", "report", "{tmp}/empty"],
     {"empty/.keep": lambda: ""}, {}, "a folder with no result files in it"),
    ("report: an accept file whose profile is a list", ["-m", "nccl_bench", "report", "{tmp}/a.json", "--out",
                                                         "{tmp}/r"],
     {"a.json": lambda: doc_with(ACCEPT, lambda d: d["meta"].update(profile_doc=[1, 2]))}, {},
     "a.json: this accept result holds what its section cannot read"),
    ("report: asv results with a cell that is no list", ["-m", "nccl_bench", "report", "{tmp}/asv.json"],
     {"asv.json": lambda: doc_with(FIX / "asv_cpu.json", lambda d: d["results"].update(
         {k: 5 for k in list(d["results"])[:1]}))}, {}, "asv.json: asv results whose cells are not asv's"),
    ("fleet: nested 50,000 deep", ["-m", "nccl_bench", "fleet", "{tmp}/deep.json", "--out", "{tmp}/f"],
     {"deep.json": deep}, {}, "deep.json: nested deeper"),
    ("fleet: a busbw key of 'big' bytes", ["-m", "nccl_bench", "fleet", "{tmp}/a.json", "--out", "{tmp}/f"],
     {"a.json": lambda: doc_with(ACCEPT, lambda d: d["meta"]["measurements"]["busbw"].update({"all_reduce:big": 1.0}))},
     {}, "a.json: its accept metrics are not numbers"),
    ("accept --profile not text", ["-m", "nccl_bench", "accept", "--profile", "{tmp}/bin.json"],
     {"bin.json": lambda: "\udcff"}, {}, "not text"),
    ("accept --profile 2^40 bytes", ["-m", "nccl_bench", "accept", "--profile", "{tmp}/p.json"],
     {"p.json": lambda: doc_with(REPO / "nccl_bench/records/profiles/gloo-cpu.json", lambda d: d.update(
         busbw_min_GBps=[{"collective": "all_reduce", "bytes": 1 << 40, "min": 0.01}]))}, {},
     "beyond the CPU (gloo) model"),
    ("accept --network busbw -5", ["-m", "nccl_bench", "accept", "--network", "{tmp}/n.json"],
     {"n.json": lambda: doc_with(FIX / "bench_gloo.json", bench_rows(lambda r: r["out_of_place"].update(bus_bw=-5)))},
     {}, "'out_of_place.bus_bw': -5"),
    ("accept --network nested deep", ["-m", "nccl_bench", "accept", "--network", "{tmp}/n.json"],
     {"n.json": deep}, {}, "n.json: nested deeper"),
    ("accept --steps not a step", ["-m", "nccl_bench", "accept", "--backend", "gloo", "--steps", "doctor,burn"],
     {}, {}, "--steps burn: not a step of accept (choose from doctor, bench, copies, init, stress, replay)"),
    ("accept --steps replay without a workload", ["-m", "nccl_bench", "accept", "--backend", "gloo", "--steps",
                                                  "replay"], {}, {}, "--steps replay: needs --workload"),
    ("accept --check-args: copies on gloo named", ["-m", "nccl_bench", "accept", "--check-args", "--backend", "gloo",
                                                   "--steps", "copies"], {}, {},
     "--steps copies: the GPUs' copies need GPUs (this run's backend is gloo)"),
    ("accept --record-baseline from some steps", ["-m", "nccl_bench", "accept", "--backend", "gloo", "--steps",
                                                  "doctor,bench", "--record-baseline", "{tmp}/g.json"], {}, {},
     "--record-baseline records a known-good node whole: --steps leaves out init, stress"),
    ("accept --workload not a trace", ["-m", "nccl_bench", "accept", "--workload", "{tmp}/w.json"],
     {"w.json": lambda: "{}"}, {}, "--workload: "),
    ("replay --list a dump of 200,001 entries", ["-m", "nccl_bench", "replay", "{tmp}/dump_rank0.json", "--list"],
     {"dump_rank0.json": lambda: json.dumps({"version": "2.10", "entries": [{}] * 200_001})}, {},
     "200001 entries, more than a Flight Recorder keeps"),
    ("stress --bytes 1T on gloo", ["-m", "stress", "--rounds", "1", "--bytes", "1T"], {}, {},
     "--bytes 1099511627776 is too large for the CPU (gloo) model; keep it <= 256M"),
    ("stress --bytes not a size", ["-m", "stress", "--rounds", "1", "--bytes", "4 KiB"], {}, {},
     "--bytes: '4 KiB' is not a size"),
    ("NCCL_BENCH_RANK_START not a start method", ["-m", "nccl_bench", "smoke"], {}, {"NCCL_BENCH_RANK_START": "fork"},
     "NCCL_BENCH_RANK_START=fork: choose forkserver (the default) or exec"),
    ("NCCL_TESTS_MIN_BW not a number", BENCH, {}, {"NCCL_TESTS_MIN_BW": "fast"},
     "NCCL_TESTS_MIN_BW: 'fast' is not a bandwidth in GB/s"),
    ("bench --min_bw -1", [*BENCH, "--min_bw", "-1"], {}, {}, "--min_bw (NCCL_TESTS_MIN_BW) must be a bandwidth"),
    ("locate --size 1T on gloo", ["-m", "nccl_bench", "locate", "--size", "1T"], {}, {},
     "--size 1099511627776 is too large for the CPU (gloo) model; keep it <= 256M"),
    ("replay of a 4-rank job on 2 ranks", ["-m", "nccl_bench", "replay", str(FIX / "zoo" / "ring" / "kineto"),
                                          "--nranks", "2", "--backend", "gloo"], {}, {},
     "every group of this job needs more than the 2 rank(s) here (the smallest, default_pg [0, 1, 2, 3], needs 4)"),
    ("report of a 5,000-digit integer", ["-m", "nccl_bench", "report", "{tmp}/big.json", "--out", "{tmp}/r"],
     {"big.json": lambda: (FIX / "bench_gloo.json").read_text().replace('"size": 8,', f'"size": {"9" * 5000},', 1)},
     {}, "holds an integer of 5000 digits"),
]


@pytest.mark.parametrize("name, argv, files, env, said", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2_before_any_work(tmp_path, name, argv, files, env, said):
    for rel, make in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(make(), errors="surrogateescape")
    t0 = time.monotonic()
    proc = run([a.replace("{tmp}", str(tmp_path)) for a in argv], timeout=60, env=env)
    took = time.monotonic() - t0
    err = one_line_error(proc)
    assert said in err, err
    assert took < 15, f"{took:.1f} s before the one line: work was done first"
    assert not err.startswith("error: error:"), err


def test_a_fleet_node_whose_metrics_are_not_numbers_is_flagged(tmp_path):
    for i in range(5):
        (tmp_path / f"n{i}.json").write_text(doc_with(ACCEPT, lambda d, i=i: (
            d["meta"].update(hosts=[f"node{i}"]),
            d["meta"]["measurements"].update(latency_us_8B=None if i == 3 else 30.0,
                                            init_ms_p50=None if i == 3 else 90.0,
                                            busbw={k: None if i == 3 else v for k, v in
                                                   d["meta"]["measurements"]["busbw"].items()}))))
    proc = run(["-m", "nccl_bench", "fleet", str(tmp_path), "--out", str(tmp_path / "f")], timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BAD node3" in proc.stdout and "not judged, so flagged" in proc.stdout, proc.stdout


def test_two_files_of_one_kind_from_one_host_are_said(tmp_path):
    for i in range(2):
        shutil.copy(ACCEPT, tmp_path / f"a{i}.json")
    proc = run(["-m", "nccl_bench", "fleet", str(tmp_path), "--out", str(tmp_path / "f")], timeout=60)
    assert "2 accept files from this host, each metric their median" in proc.stdout, proc.stdout


@pytest.mark.skipif(not can_mount(), reason="no mount namespace here (unshare -m)")
def test_read_only_storage_is_said_before_any_work(tmp_path):
    ro = mounted(tmp_path, "ro")
    m = tmp_path / "m"
    for argv in ([*BENCH[1:], "-J", f"{m}/a.json"], ["-m", "stress", "--rounds", "1", "--journal", f"{m}/j.jsonl"],
                 ["-m", "nccl_bench", "init", "--rounds", "1"]):
        if argv[-1] == "1":  # the default folder, results/runs/, is what is read-only here
            proc = subprocess.run(["unshare", "-m", "sh", "-c", f'mkdir -p {REPO}/results/runs && mount -t tmpfs -o ro '
                                   f'tmpfs {REPO}/results/runs && exec "$0" "$@"', sys.executable, *argv],
                                  cwd=REPO, capture_output=True, text=True, timeout=60)
        else:
            proc = subprocess.run([*ro, *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
        err = one_line_error(proc)
        assert "Read-only file system" in err, err


@pytest.mark.skipif(not can_mount(), reason="no mount namespace here (unshare -m)")
def test_a_disk_that_fills_up_at_the_end_keeps_the_result_and_says_where(tmp_path):
    full = mounted(tmp_path, "size=8k", fill=8192)  # room for the placeholder (no bytes), none for the result
    proc = subprocess.run([*full, *BENCH[1:], "-J", f"{tmp_path}/m/x.json"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("cannot write")]
    assert line and "No space left on device" in line[0], proc.stderr
    kept = Path(line[0].rsplit(" ", 1)[-1])
    from nccl_bench import records
    assert records.load(str(kept)).kind == "bench" and records.load(str(kept)).rows
    kept.unlink()


@pytest.mark.skipif(not can_mount(), reason="no mount namespace here (unshare -m)")
def test_every_writer_keeps_what_it_computed_when_the_disk_fills(tmp_path):
    """stress's journal goes on in the temporary folder with every round so far, and its summary beside it;
    a report and a fleet verdict are made there; each says where in one line (issue 69)."""
    from nccl_bench import records
    journal = REPO / "tests" / "fixtures" / "stress_gloo.jsonl"
    runs = {"stress": ["-m", "stress", "--backend", "gloo", "--rounds", "60", "--skew-max", "0", "--journal",
                       f"{tmp_path}/m/j.jsonl"],
            "report": ["-m", "nccl_bench", "report", str(journal), "--out", f"{tmp_path}/m/rep"],
            "fleet": ["-m", "nccl_bench", "fleet", str(REPO / "tests" / "fixtures" / "bench_gloo.json"), "--out",
                      f"{tmp_path}/m/fleet"]}
    for name, argv in runs.items():
        full = mounted(tmp_path, "size=40k", fill=24 * 1024)
        proc = subprocess.run([*full, *argv], cwd=REPO, capture_output=True, text=True, timeout=180)
        said = [x for x in proc.stderr.splitlines() if "No space left on device" in x]
        assert proc.returncode in (0, 1) and len(said) == 1, (name, proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and not list((tmp_path / "m").glob("*.lock")), proc.stderr
        kept = Path(said[0].rsplit(" ", 1)[-1].split(",")[0])
        assert kept.exists() and str(kept).startswith(tempfile.gettempdir()), said
        if name == "stress":
            assert proc.returncode == 0 and len(records.load(str(kept)).rows) == 60, proc.stderr
            summary = Path(next(x for x in proc.stdout.splitlines() if x.startswith("summary: ")).split(" ", 1)[1])
            assert summary.parent == kept.parent, proc.stdout
            summary.unlink()
        shutil.rmtree(kept) if kept.is_dir() else kept.unlink()


def test_resume_with_fewer_rounds_than_done_is_one_line(tmp_path):
    journal = tmp_path / "j.jsonl"
    first = run(["-m", "stress", "--rounds", "3", "--skew-max", "0", "--journal", str(journal)], timeout=120)
    assert first.returncode == 0, first.stderr
    err = one_line_error(run(["-m", "stress", "--rounds", "1", "--skew-max", "0", "--journal", str(journal),
                              "--resume"], timeout=60))
    assert "already holds 3 rounds of a mode, more than --rounds 1" in err, err


def test_resume_with_more_rounds_runs_each_modes_new_rounds_once(tmp_path):
    """--rounds raised on --resume: the plan's seqs move (a mode's rounds begin at its index x --rounds), so what
    is done is the journal's (mode, round), not its seqs: every mode's rounds run once, none twice (the third
    mode's ran again, and the others' new rounds never did)."""
    journal = tmp_path / "j.jsonl"
    args = ["-m", "stress", "--init", "regular,stock,scoped", "--skew-max", "0", "--journal", str(journal)]
    first = run([*args, "--rounds", "2"], timeout=120)
    assert first.returncode in (0, 1), first.stderr  # stock may read a stale ID
    again = run([*args, "--rounds", "3", "--resume"], timeout=120)
    assert again.returncode in (0, 1), again.stderr
    assert "(resuming: 6 rounds done, 3 to go)" in again.stdout, again.stdout
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    kept = sorted((r["mode"], r["round"]) for r in rows if r["type"] == "round")
    assert kept == sorted((m, k) for m in ("regular", "stock", "scoped") for k in range(3)), kept


def test_ctrl_c_is_honoured_when_the_parent_ignored_it(tmp_path):
    """A script's `cmd &` starts accept with SIGINT ignored: a Ctrl-C to its group still ends it (130), its
    jobs with it (their temporary folders removed: they run in sessions of their own, which the Ctrl-C is passed
    on to), and no PASS is printed."""
    import os
    import signal
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "nccl_bench", "accept", "--json", str(tmp_path / "a.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)},
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        time.sleep(4)  # into its steps
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and "PASS" not in out, (proc.returncode, out[-1000:], err[-1000:])
    assert not (tmp_path / "a.json").exists()
    assert not list(temp.iterdir()), list(temp.iterdir())


def test_a_result_saved_with_a_byte_order_mark_reads_as_json_readers_read_it(tmp_path):
    path = tmp_path / "bom.json"
    path.write_text((FIX / "bench_gloo.json").read_text(), encoding="utf-8-sig")
    proc = run(["-m", "nccl_bench", "report", str(path), "--out", str(tmp_path / "r")], timeout=120)
    assert proc.returncode == 0 and (tmp_path / "r" / "report.md").is_file(), proc.stderr



def test_a_bench_file_with_sizes_out_of_order_reads_in_order_and_says_so_a_repeated_one_is_refused(tmp_path):
    from nccl_bench import records
    doc = json.loads((FIX / "bench_gloo.json").read_text())
    key = "results" if "results" in doc else "rows"
    doc[key] = doc[key][::-1]
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    res = records.load(str(shuffled))
    series = {}
    for r in res.rows:
        series.setdefault((r["collective"], r.get("algo"), r.get("init"), r.get("cycle")), []).append(r["size"])
    assert all(s == sorted(s) for s in series.values()) and any("sizes out of order" in x for x in res.reading())
    proc = run(["-m", "nccl_bench", "report", str(shuffled), "--out", str(tmp_path / "r")], timeout=120)
    assert proc.returncode == 0 and "sizes out of order in all_reduce" in proc.stdout
    assert "read in size order" in proc.stdout
    doc[key] = doc[key] + doc[key][:1]
    repeated = tmp_path / "repeated.json"
    repeated.write_text(json.dumps(doc))
    err = one_line_error(run(["-m", "nccl_bench", "report", str(repeated), "--out", str(tmp_path / "r2")],
                             timeout=120))
    assert "appears 2 times in one sweep" in err and "repeated.json" in err, err


def test_a_row_a_reader_would_refuse_is_never_written_where_asked_and_never_lost(tmp_path, monkeypatch):
    """A writer's row is checked by its kind's row class before the file is written, as a reader checks it: a
    measurement that is no number (NaN, written as null) keeps the result out of the path asked for, in the
    temporary folder instead, and the error says which row and field, and where the result is."""
    import math
    from nccl_bench import records
    from nccl_bench.core.results import Refused
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where a result is kept aside
    rows = [{"gpu": 0, "device_GBps": 4000.0, "h2d_GBps": 55.0, "d2h_GBps": 55.0},
            {"gpu": 1, "device_GBps": math.nan, "h2d_GBps": 55.0, "d2h_GBps": 55.0}]
    with pytest.raises(Refused) as e:
        records.write("copies", rows, {}, tmp_path / "copies.json")
    assert "row 1, 'device_GBps': None is not a number" in str(e.value), e.value
    assert not (tmp_path / "copies.json").exists()
    kept = list((tmp_path / "tmp").glob("nccl-bench-copies-*.json"))
    assert len(kept) == 1 and str(kept[0]) in str(e.value)
    assert json.loads(kept[0].read_text())["rows"][0]["device_GBps"] == 4000.0
    ok = records.write("copies", rows[:1], {}, tmp_path / "copies.json")  # the same writer, a row a reader reads
    assert records.load(str(ok)).rows == rows[:1]
