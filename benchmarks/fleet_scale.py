"""The fleet's verdict at a real fleet's size, timed as the user waits for it: `nccl-bench fleet` over N nodes' accept
files (each a copy of a real accept file with its host renamed) and the pair files of `fleet run`'s schedule (3
partners each; a real bench file with its hosts renamed, one pair planted slow), the whole call from outside, its
wall time and peak memory; and the pair schedule for N nodes, in process. Not an asv benchmark (it writes hundreds
of MB): a script.

    python benchmarks/fleet_scale.py --nodes 12500 --out results/cpu/fleet_scale

Targets (issue 71): the verdict under 10 s and 1 GB at 12,500 nodes; the schedule under 1 s.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nccl_bench.core.tournament import partners  # noqa: E402

ACCEPT = REPO / "results" / "h200x2" / "accept" / "accept_h200x2.json"  # a real accept file: every metric a node has
PAIR = REPO / "results" / "h200x4" / "scale" / "bench_x4.json"  # a bench file: its largest all_reduce row, as a pair's


def make_files(folder: Path, n: int) -> tuple[int, int]:
    accept, pair = json.loads(ACCEPT.read_text()), json.loads(PAIR.read_text())
    pair["rows"] = [max((r for r in pair["rows"] if r["collective"] == "all_reduce"), key=lambda r: r["size"])]
    for i in range(n):
        accept["meta"]["hosts"] = [f"node{i:05d}"]
        (folder / f"accept-node{i:05d}.json").write_text(json.dumps(accept))
    npairs = 0
    text = json.dumps(pair)
    for r in partners(n, 3):
        for a, b in r:
            doc = json.loads(text)
            doc["meta"]["hosts"] = [f"node{a:05d}", f"node{b:05d}"]
            if npairs == 0:  # one link planted slow: the verdict must name it, and nothing else
                doc["rows"][0]["out_of_place"]["bus_bw"] *= 0.3
            (folder / f"pair-{a:05d}-{b:05d}.json").write_text(json.dumps(doc))
            npairs += 1
    return n, npairs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=12500)
    p.add_argument("--out", default=None, help="folder for fleet_scale.json (default: print only)")
    a = p.parse_args()
    t = time.perf_counter()
    rounds = partners(a.nodes, 3)
    schedule_s = time.perf_counter() - t
    work = Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    try:
        files = work / "in"
        files.mkdir()
        n, npairs = make_files(files, a.nodes)
        size = sum(f.stat().st_size for f in files.iterdir())
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "nccl_bench", "fleet", str(files), "--out", str(work / "out")],
                           cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    finally:
        shutil.rmtree(work, ignore_errors=True)
    links = [x for x in r.stdout.splitlines() if x.startswith("BAD link")]
    result = {"nodes": n, "pairs": npairs, "rounds": len(rounds), "files_MB": round(size / 1e6, 1),
              "verdict_wall_s": round(wall, 2), "verdict_peak_MB": round(peak_mb), "schedule_s": round(schedule_s, 4),
              "exit": r.returncode, "links_named": links, "last_line": r.stdout.strip().splitlines()[-1][:200],
              "cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(), "machine": platform.node(),
              "when": time.strftime("%Y-%m-%d %H:%M")}
    print(json.dumps(result, indent=1))
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / f"fleet_scale_{n}.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if wall < 10 and peak_mb < 1024 and schedule_s < 1 and len(links) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
