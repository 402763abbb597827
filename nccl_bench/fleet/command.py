"""`fleet`: which nodes and links stand out? Reads accept, bench and locate files from many nodes (one or more
per node, or folders of them; 2-node bench files measure the link between their nodes), tabulates each metric per
node, and names every node that is far from the fleet by robust statistics (median and MAD) or that failed on its
own (its profile's verdicts, wrong values, locate's suspects), and every link that is slow where its nodes are
not: one line each, markdown, a node x metric heatmap, JUnit and JSON; exit 1 when anything is named.

    python -m nccl_bench fleet results/fleet/*.json [--out DIR] [--junit PATH] [--k 3.5] [--min-deviation 0.05]
    python -m nccl_bench fleet run --partition gpu ...     (fleet.run: accept a Slurm cluster, then judge it)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from nccl_bench.core import results
from nccl_bench.job.cli import Parser, prog
from nccl_bench.fleet import judging, outliers


def parser() -> Parser:
    p = Parser(prog=prog("fleet"), description="nodes and links that stand out in a fleet, from their result "
                                               "files (or: fleet run --help, to accept a Slurm cluster)")
    p.add_argument("files", nargs="+", help="accept, bench or locate JSON files, or folders of them")
    p.add_argument("--out", default=None, help="folder for fleet.md, fleet.png, fleet.json, fleet.xml "
                                               "(default results/runs/fleet-<time>)")
    judging.add_arguments(p)
    return p


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:  # a file named run is given as ./run
        from nccl_bench.fleet import run
        return run.main(argv[1:])
    a = parser().parse_args(argv)
    s = judging.settings(a)
    out = Path(a.out) if a.out else results.RUNS / f"fleet-{time.strftime('%Y%m%d-%H%M%S')}"
    if a.out:
        results.check_out_folder(out)
    else:
        results.check_folder(results.RUNS, "the default folder for fleet results", make=True)
    results.check_writable(a.junit, "--junit")
    return judging.judge(outliers.result_files(a.files), out, s)


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
