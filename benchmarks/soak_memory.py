"""Memory of a long stress run, per process: the RSS slope per round of each rank (stress's own leak
watch) and of the launcher (sampled from outside), beside a bare init/destroy loop of the same
backend (`init --leak-check`), whose slope is the library's own. The difference is what the
harness keeps per round. Not an asv benchmark (it runs for minutes): a script.

    python benchmarks/soak_memory.py --rounds 100000        # gloo, 2 ranks, ~12 + ~12 minutes on 2 cores

Writes stress's journal and summary, the leak check's JSON and soak_memory.json under --out.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nccl_bench import records  # noqa: E402
from nccl_bench.core.streaming import Trend  # noqa: E402


def rss(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4096
    except (OSError, ValueError, IndexError):
        return None


def watched(cmd: list[str], log: Path, warmup_s: float) -> tuple[int, Trend]:
    """Run `cmd`; sample its own RSS every 2 s after `warmup_s`: (exit code, RSS against seconds)."""
    t, t0 = Trend(), time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                time.sleep(2)
                now, v = time.monotonic() - t0, rss(proc.pid)
                if v is not None and now > warmup_s:
                    t.add(now, v)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return proc.returncode, t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=100_000)
    p.add_argument("--every", type=int, default=100, help="rounds between the ranks' samples")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--out", default=str(REPO / "results" / "runs" / f"soak-memory-{time.strftime('%Y%m%d-%H%M%S')}"))
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=False)
    py = [sys.executable, "-m"]
    common = ["--backend", a.backend, "--nranks", str(a.nranks)]
    code, launcher = watched([*py, "stress", *common, "--rounds", str(a.rounds), "--skew-max", "0",
                              "--leak-every", str(a.every), "--journal", str(out / "stress.jsonl")],
                             out / "stress.log", warmup_s=30)
    stress = records.load(str(out / "stress-summary.json"))
    lc_code, _ = watched([*py, "nccl_bench", "init", *common, "--init", "scoped", "--leak-check", str(a.rounds),
                          "--leak-every", str(a.every), "--json", str(out / "leakcheck.json")],
                         out / "leakcheck.log", warmup_s=30)
    bare = records.load(str(out / "leakcheck.json")).rows
    per_round = stress.top["rounds"] / max(sum(r["rounds_per_s"] and r["rounds"] / r["rounds_per_s"] or 0
                                               for r in stress.rows), 1e-9)
    rows = []
    for f in stress.top["leaks"]:
        if f["resource"] != "rss_bytes":
            continue
        b = next((x for x in bare if x["rank"] == f["rank"] and x["resource"] == "rss_bytes"), None)
        rows.append({"process": f"rank {f['rank']}", "stress_B_per_round": f["per_init"],
                     "stress_interval_B": [v / 1000 for v in f["interval_per_1000"]],
                     "bare_loop_B_per_init": b["per_init"] if b else None,
                     "harness_B_per_round": f["per_init"] - b["per_init"] if b else None})
    slope = launcher.slope()
    rows.append({"process": "launcher", "stress_B_per_round": slope / per_round if slope is not None else None,
                 "stress_interval_B": [v / per_round for v in launcher.interval() or (0, 0)],
                 "bare_loop_B_per_init": None, "harness_B_per_round": slope / per_round if slope is not None else None})
    doc = {"rounds": a.rounds, "backend": a.backend, "nranks": a.nranks, "every": a.every,
           "stress_exit": code, "leakcheck_exit": lc_code, "rows": rows}
    (out / "soak_memory.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'process':10} {'stress B/round':>15} {'99% interval':>22} {'bare loop B/init':>17} "
          f"{'harness B/round':>16}")
    for r in rows:
        def f(v):
            return "-" if v is None else f"{v:.1f}"
        print(f"{r['process']:10} {f(r['stress_B_per_round']):>15} "
              f"{f(r['stress_interval_B'][0]) + ' .. ' + f(r['stress_interval_B'][1]):>22} "
              f"{f(r['bare_loop_B_per_init']):>17} {f(r['harness_B_per_round']):>16}")
    print(f"files: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
