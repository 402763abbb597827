"""Crash consistency, tested the way storage engines test it: the launcher of a gloo stress run is
killed with SIGKILL at many moments (at random times: during start-up, during rounds while
destroys run behind them; at failpoints: while a journal line is appended, while the summary is
written), and after each
kill `--resume` goes on; at the end every round is in the journal exactly once and the summary
agrees with it. One writer per journal: a second writer is refused and names the holder.

NCCL_BENCH_KILLPOINTS=200 runs the long version (default 20).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from helpers import REPO, TOKEN_VAR, assert_no_survivors, one_line_error, run
from nccl_bench import records

ROUNDS = 100
BASE = ["-m", "stress", "--backend", "gloo", "--nranks", "2", "--rounds", str(ROUNDS), "--skew-max", "0.02",
        "--destroys-in-flight", "2", "--timeout", "10"]


def start(journal, resume: bool, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    token = uuid.uuid4().hex
    args = [sys.executable, *BASE, "--journal", str(journal), *(["--resume"] if resume else [])]
    proc = subprocess.Popen(args, cwd=REPO, env={**os.environ, TOKEN_VAR: token, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    return proc, token


def kill_after(proc: subprocess.Popen, seconds: float, once=lambda: True) -> None:
    """SIGKILL the launcher `seconds` after `once()` holds, unless it ended first."""
    deadline = time.monotonic() + 60
    while not once() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)


def scratch_of(pid: int) -> list[str]:
    """The scratch folders a process of ours made (nccl_bench.core.scratch), by its pid."""
    return sorted(p.name for p in Path(tempfile.gettempdir()).glob(f"nccl_bench_*_*_{pid}_*"))


def journal_lines(journal) -> tuple[list[dict], int]:
    rows, cut = [], 0
    for line in journal.read_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            cut += 1
            continue
        if obj.get("type") == "round":
            rows.append(obj)
    return rows, cut


def assert_each_round_at_most_once(journal) -> list[dict]:
    rows, _ = journal_lines(journal)
    keys = [(r["mode"], r["round"]) for r in rows]
    assert len(keys) == len(set(keys)), f"rounds twice: {sorted(k for k in keys if keys.count(k) > 1)}"
    return rows


def test_every_round_exactly_once_after_kills_at_random_moments(tmp_path):
    # 5 kill points: rounds twice, an append, start-up, the summary (NCCL_BENCH_KILLPOINTS=100 for a
    # longer hunt)
    points = int(os.environ.get("NCCL_BENCH_KILLPOINTS", "5"))
    seed = int(os.environ.get("NCCL_BENCH_KILLSEED", "0"))
    rng = random.Random(seed)
    journal = tmp_path / "j.jsonl"
    # The kill classes in turn: at a random time during rounds (destroys running behind them), while a
    # journal line is appended, at a random time during start-up; last, with the summary half written.
    # A failpoint counts appends in its own process: 1 is the header or the resume line, then rounds.
    plan = (["round", "append", "round", "start"] * points)[:points - 1] + ["summary"]
    found: dict[str, list[str]] = {k: [] for k in ("round", "append", "start", "summary")}
    t0 = time.monotonic()
    for i, kind in enumerate(plan):
        env = {}
        if kind == "append":
            env["NCCL_BENCH_KILL_AT"] = f"append:{rng.randint(1, 6)}"
        elif kind == "summary":
            env["NCCL_BENCH_KILL_AT"] = "summary"
        before = len(assert_each_round_at_most_once(journal)) if journal.exists() else 0
        proc, token = start(journal, resume=journal.exists(), env=env)
        if kind == "start":
            kill_after(proc, rng.uniform(0.1, 1.0))
        elif kind == "round":  # once this run has journaled a round of its own, a moment later
            kill_after(proc, rng.uniform(0.0, 0.8), lambda: journal.exists() and
                       len(journal_lines(journal)[0]) > before)
        out, err = proc.communicate(timeout=120)
        assert_no_survivors(token)
        assert proc.returncode in (0, -signal.SIGKILL), \
            f"kill point {i} ({kind}): exit {proc.returncode}\n{err[-2000:]}"
        after = len(assert_each_round_at_most_once(journal)) if journal.exists() else 0
        found[kind].append(f"{before}->{after}" + ("" if proc.returncode else " (finished)"))
        if proc.returncode == 0 and kind != "summary":  # finished before the kill came: start again
            journal.unlink()
            for p in tmp_path.glob("j-summary*.json"):
                p.unlink()
    proc, token = start(journal, resume=True)
    out, err = proc.communicate(timeout=180)
    assert_no_survivors(token)
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    rows = assert_each_round_at_most_once(journal)
    assert sorted(r["round"] for r in rows) == list(range(ROUNDS))
    summaries = sorted(tmp_path.glob("j-summary*.json"))  # a kill after a run's summary: the resume adds one
    assert summaries
    for path in summaries:  # each whole (the cut one left no half file) and each agrees with the journal
        doc = records.load(str(path))
        assert doc.top["rounds"] == ROUNDS and doc.rows[0]["rounds"] == ROUNDS, path
        assert doc.top["failures"] == sum(r["verdict"] != "ok" for r in rows) == 0, path
    assert not list(tmp_path.glob(".*.tmp")) and not (tmp_path / "j.jsonl.lock").exists()
    print(f"{len(plan)} kill points in {time.monotonic() - t0:.0f} s (seed {seed}): rounds journaled before->after "
          + "; ".join(f"{k} {v}" for k, v in found.items()))


def test_a_second_writer_is_refused_and_names_the_holder(tmp_path):
    journal = tmp_path / "j.jsonl"
    first, token = start(journal, resume=False)
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and journal_lines(journal)[0]) and time.monotonic() < deadline:
            time.sleep(0.1)  # the first run is writing rounds
        for extra in ([], ["--resume"]):
            proc = run([*BASE, "--journal", str(journal), *extra], timeout=60)
            err = one_line_error(proc)
            assert proc.returncode == 2 and err.startswith(f"error: journal {journal} is being written by pid "
                                                           f"{first.pid} on "), err
            assert err.endswith("; wait for it or stop it"), err
    finally:
        out, err = first.communicate(timeout=120)
        assert_no_survivors(token)
    assert first.returncode == 0, err[-2000:]
    rows = assert_each_round_at_most_once(journal)
    assert len(rows) == ROUNDS


def test_a_dead_owners_journal_is_taken_over_by_resume(tmp_path):
    journal = tmp_path / "j.jsonl"
    proc, token = start(journal, resume=False, env={"NCCL_BENCH_KILL_AT": "append:3"})
    proc.communicate(timeout=120)
    assert_no_survivors(token)
    assert proc.returncode == -signal.SIGKILL and (tmp_path / "j.jsonl.lock").exists()
    stale = json.loads((tmp_path / "j.jsonl.lock").read_text())
    assert stale["pid"] == proc.pid  # the dead launcher's record, left behind by the kill
    # its scratch folders too (its job spec; its run folder with multiprocessing's sockets): the next run removes
    # them as it starts
    left = scratch_of(proc.pid)
    assert len(left) == 2, left
    resumed = run([*BASE, "--journal", str(journal), "--resume"], timeout=120)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert not scratch_of(proc.pid), scratch_of(proc.pid)
    assert len(assert_each_round_at_most_once(journal)) == ROUNDS
