"""A chain of real commits in a clone of this repository, `asv run` on each, and the history report over
them: the test of issue 53's judge (tests/test_history.py runs a short chain) and its acceptance run.

    python tests/asvchain.py --out /tmp/chain                  # 6 commits: 2 comments, the plant, 3 comments
    python tests/asvchain.py --out /tmp/chain --no-plant       # the same six, the plant a comment too

A comment-only commit appends a comment to nccl_bench/__init__.py; the plant puts a 30 ms sleep at the top
of the gloo communicator's create (nccl_bench/comm/gloo.py), outside the timers of its exchange and create
phases: init and lifetime, timed around the whole call, must name it. Each
commit is measured by `asv run` with the clone's own code (ASV_PYTHONPATH), into one results folder; then
`nccl-bench report <results>/<this machine> --fail-on-regression`, twice. Prints each report's exit code and lines.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GLOO = Path("nccl_bench/comm/gloo.py")
# the top of the gloo create, before its own timers (exchange, create) start: only a timer around the whole
# call sees it
ANCHOR = "    def create(self, plan: InitPlan, deadline: Deadline) -> None:\n"
PLANT = "        time.sleep(0.03)  # planted: a 30 ms slower create\n"


def machine_dir(results: Path) -> Path:
    """The one machine's folder the chain's runs wrote (asv names it after the hardware)."""
    found = [d for d in results.iterdir() if (d / "machine.json").is_file()]
    assert len(found) == 1, found
    return found[0]


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True, text=True).stdout.strip()


def clone_of(src: Path, dst: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(src), str(dst)], check=True)
    git(dst, "config", "user.email", "chain@nccl-bench.invalid")
    git(dst, "config", "user.name", "asv chain")
    return dst


def commit(clone: Path, kind: str, n: int) -> str:
    """One real commit: 'comment' or 'plant'; returns its sha."""
    if kind == "plant":
        path = clone / GLOO
        text = path.read_text()
        if ANCHOR not in text:
            raise SystemExit(f"{GLOO}: no longer has the line the plant goes after")
        path.write_text(text.replace(ANCHOR, ANCHOR + PLANT, 1))
    else:
        with open(clone / "nccl_bench" / "__init__.py", "a") as f:
            f.write(f"# chain commit {n}: a comment only\n")
    git(clone, "commit", "--quiet", "-am", f"chain {n}: {kind}")
    return git(clone, "rev-parse", "HEAD")


def asv_run(clone: Path, results: Path, benches: list[str], log) -> int:
    """`asv run` at the clone's HEAD into `results` (the clone's config, its results folder moved)."""
    from asv.util import load_json
    conf = load_json(str(clone / "asv.conf.json"), js_comments=True)
    conf.update(results_dir=str(results), html_dir=str(results.parent / "html"), env_dir=str(results.parent / "env"))
    path = clone / ".asv-chain.conf.json"  # beside the clone's own: its plugin is found from there
    path.write_text(json.dumps(conf))
    home = results.parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "ASV_PYTHONPATH": str(clone)}  # asv drops PYTHONPATH
    args = [a for b in benches for a in ("-b", b)]
    proc = subprocess.run([sys.executable, "-m", "asv", "run", "--config", str(path), *args], cwd=clone, env=env,
                          stdout=log, stderr=subprocess.STDOUT, timeout=600)
    return proc.returncode


def report(results: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nccl_bench", "report", str(machine_dir(results)), "--out", str(out),
                           "--fail-on-regression", "--no-plots"], cwd=REPO, capture_output=True, text=True, timeout=300)


def spreads(results: Path) -> list[tuple[str, float, int]]:
    """(series, max / min - 1 over the commits, commits) for every series with a number at 2+ commits:
    between runs of identical code, the benchmark's own spread."""
    from itertools import product
    values: dict[str, list[float]] = {}
    for path in sorted(machine_dir(results).glob("*-*.json")):
        if path.name == "machine.json":
            continue
        doc = json.loads(path.read_text())
        col, par = doc["result_columns"].index("result"), doc["result_columns"].index("params")
        for bench, row in doc["results"].items():
            got = row[col] if isinstance(row[col], list) else [row[col]]
            combos = [", ".join(str(x).strip("'\"") for x in c) for c in product(*row[par])] if row[par] else [""]
            for combo, v in zip(combos, got):
                if isinstance(v, (int, float)) and v == v and v > 0:
                    values.setdefault(f"{bench} [{combo}]", []).append(v)
    return [(k, max(v) / min(v) - 1, len(v)) for k, v in sorted(values.items()) if len(v) > 1]


def chain(work: Path, kinds: list[str], benches: list[str]) -> tuple[list[str], Path]:
    """Clone, then commit and measure each of `kinds`; returns the shas and the results folder."""
    clone, results = clone_of(REPO, work / "clone"), work / "asv" / "results"
    results.mkdir(parents=True)
    shas = []
    with open(work / "asv.log", "a") as log:
        for n, kind in enumerate(kinds):
            shas.append(commit(clone, kind, n))
            if (code := asv_run(clone, results, benches, log)) != 0:
                raise RuntimeError(f"asv run exit {code} at commit {n} ({kind}): see {work / 'asv.log'}")
    return shas, results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="an empty folder for the clone, the results and the reports")
    p.add_argument("--no-plant", action="store_true", help="the third commit is a comment too")
    p.add_argument("-b", "--bench", action="append", default=[], help="asv's -b (default: every benchmark)")
    a = p.parse_args()
    work = Path(a.out)
    work.mkdir(parents=True, exist_ok=False)
    kinds = ["comment", "comment", "comment" if a.no_plant else "plant", "comment", "comment", "comment"]
    shas, results = chain(work, kinds, a.bench)
    print("commits: " + " ".join(f"{s[:8]} ({k})" for s, k in zip(shas, kinds)))
    print("spread between commits (max / min - 1): " + "; ".join(f"{k} {v:.1%}" for k, v, _ in spreads(results)))
    for attempt in (1, 2):
        proc = report(results, work / f"report{attempt}")
        print(f"report {attempt}: exit {proc.returncode}")
        print("\n".join(f"  {line}" for line in proc.stdout.splitlines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
