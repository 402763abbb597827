"""Round 0 on every GPU of this machine (issue 68): where a rank's start falls, beside the commit before the fix.

    python3 tests/gpu/round0.py [BEFORE_TREE]

`stress --rounds 3 --skew-max 0` at the default deadline and at ROUND0_TIMEOUTS (seconds, comma-separated;
default "3,1": on two GPUs a rank's start fits in 3 s, so 1 s shows there what 3 s showed on four), ours then
the tree before's (a checkout of d120bea: nccl_bench and stress), alternated ROUND0_REPS times (default 3).
Each run's round verdicts, its start line and its exit code go to $OUT/round0.json; a table last, with the
verdict line `ROUND 0: PASS` when every run of ours passed every round.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/out"))
REPS = int(os.environ.get("ROUND0_REPS", 3))
TIMEOUTS = [t for t in os.environ.get("ROUND0_TIMEOUTS", "3,1").split(",") if t]


def one(tree: str | None, timeout: str, tag: str) -> dict:
    journal = OUT / f"round0_{tag}.jsonl"
    journal.unlink(missing_ok=True)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "stress", "--rounds", "3", "--skew-max", "0", "--timeout", timeout,
                           "--journal", str(journal)], cwd=tree, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - t0
    (OUT / f"round0_{tag}.log").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    lines = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
    rounds = [r for r in lines if r.get("type") == "round"]
    start = next((n["ranks"] for n in lines if n.get("type") == "start"), None)
    return {"tree": "ours" if tree is None else "before", "timeout": timeout, "exit": proc.returncode,
            "seconds": round(took, 2), "verdicts": [r["verdict"] for r in rounds],
            "round0": (rounds[0].get("diagnosis") or "") if rounds else "no round",
            "start_s": [s["seconds"] for s in start] if start else None,
            "said": next((line for line in proc.stdout.splitlines() if line.startswith("start:")), None)}


def main() -> int:
    before = sys.argv[1] if len(sys.argv) > 1 else None
    OUT.mkdir(parents=True, exist_ok=True)
    runs = []
    for timeout in TIMEOUTS:
        for rep in range(REPS):
            for tree in (None, before) if before else (None,):
                r = one(tree, timeout, f"{'ours' if tree is None else 'before'}_{timeout}_{rep}")
                runs.append(r)
                print(f"{r['tree']:6s} --timeout {timeout}: exit {r['exit']}, {r['verdicts']}, {r['seconds']} s; "
                      f"start {r['start_s']}; round 0: {r['round0'][:160]}", flush=True)
    (OUT / "round0.json").write_text(json.dumps(runs, indent=1))
    print(f"\n{'tree':6s} {'timeout':>7s} {'runs':>4s} {'round 0 failed':>14s} {'later failed':>12s} "
          f"{'start s (max over ranks)':>24s}")
    for tree in ("ours", "before"):
        for timeout in TIMEOUTS:
            mine = [r for r in runs if r["tree"] == tree and r["timeout"] == timeout]
            if not mine:
                continue
            first = sum(1 for r in mine if not r["verdicts"] or r["verdicts"][0] != "ok")
            later = sum(1 for r in mine if any(v != "ok" for v in r["verdicts"][1:]))
            starts = [max(r["start_s"]) for r in mine if r["start_s"]]
            span = f"{min(starts):.2f}-{max(starts):.2f}" if starts else "-"
            print(f"{tree:6s} {timeout:>7s} {len(mine):4d} {first:14d} {later:12d} {span:>24s}")
    ours = [r for r in runs if r["tree"] == "ours"]
    bad = [r for r in ours if r["exit"] != 0 or r["verdicts"] != ["ok"] * 3]
    print(f"ROUND 0: {'PASS' if not bad else 'FAIL'} ({len(ours) - len(bad)} of {len(ours)} runs of ours passed every "
          f"round)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
