"""`info`: versions, NCCL library, GPUs and links, launcher, and the stale-key verdict for torch.

`--probe` runs pytorch#178473's own scenario on the installed torch (nccl_bench.accept.staleprobe) and
says from evidence whether it is affected; without it the verdict is the version's.
"""
from __future__ import annotations

import json

from tabulate import tabulate

from nccl_bench.accept import staleprobe
from nccl_bench.comm import gpu_count
from nccl_bench.core import sysinfo
from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.job.cli import Parser, prog
from nccl_bench.core.launch import describe


def gather() -> dict:
    g = sysinfo.gpus()
    n = sysinfo.nccl_info()
    return {"torch": sysinfo.torch_version(), "nccl": n["version"], "nccl_path": n["path"],
            "nccl4py": n["nccl4py"], "driver": g["driver"], "gpus": g["devices"], "links": g["links"],
            "gpu_note": g.get("why"), "machine": sysinfo.machine_name(), "launcher": describe(),
            "scalable_init_keys": sysinfo.torch_reuses_unscoped_keys()}


def main(argv: list[str]) -> int:
    p = Parser(prog=prog("info"), description="what this machine has")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--probe", action="store_true",
                   help="run pytorch#178473's scenario on this torch (one process group, a new communicator per "
                        "round on another GPU, ranks per root 1, one rank 3 s late) and say whether it is affected")
    p.add_argument("--backend", default=None, help="--probe on: torch (default with 2 GPUs or more) or gloo (the "
                   "CPU model, the default without them)")
    p.add_argument("--nranks", type=int, default=None, help="--probe ranks (default: every GPU; 2 on gloo)")
    p.add_argument("--delay", type=float, default=3.0, help="--probe: the late rank's sleep, s (default 3)")
    p.add_argument("--timeout", type=float, default=8.0, help="--probe: per-round deadline, s (default 8)")
    p.add_argument("--journal", default=None, metavar="PATH",
                   help="--probe: keep the evidence here (default results/runs/probe-<machine>-<time>.jsonl)")
    a = p.parse_args(argv)
    given = [f for f, v, d in (("--backend", a.backend, None), ("--nranks", a.nranks, None), ("--delay", a.delay, 3.0),
                               ("--timeout", a.timeout, 8.0), ("--journal", a.journal, None)) if v != d]
    if given and not a.probe:
        raise UsageError(f"{given[0]} belongs to --probe")
    backend = a.backend or ("torch" if gpu_count() >= 2 else "gloo")  # every command runs without a GPU
    popts = staleprobe.ProbeOptions(backend, a.nranks, a.delay, a.timeout, journal=a.journal) if a.probe else None
    info = gather()
    if popts is not None:
        print(f"probe: {staleprobe.ISSUE}'s scenario on {popts.backend} x{popts.nranks}, {popts.rounds} rounds, "
              f"at most {popts.budget:g} s ...", flush=True)
        info["probe"] = staleprobe.run(popts)
    if a.json:
        print(json.dumps(info, indent=1))
        return _probe_code(info)
    keys = info["scalable_init_keys"]
    rows = [("torch", info["torch"]), ("NCCL", info["nccl"] or "not loaded"),
            ("NCCL library", info["nccl_path"] or "-"), ("nccl4py", info["nccl4py"] or "not installed"),
            ("driver", info["driver"] or "-"),
            ("GPUs", ", ".join(f"{d['index']}: {d['name']} {d['memory_gib']} GiB" for d in info["gpus"])
             or f"none ({info['gpu_note']})"),
            ("links", ", ".join(f"GPU{k['gpus'][0]}-GPU{k['gpus'][1]} {k['link']}" for k in info["links"]) or "-"),
            ("machine", info["machine"]), ("launcher", info["launcher"]),
            ("torch reuses unscoped scalable-init keys",
             {True: "yes", None: "unknown"}[keys["reuses_unscoped_keys"]] + f": {keys['why']}")]
    print(tabulate(rows, tablefmt="plain"))
    if "probe" in info:
        print(f"evidence: {info['probe']['journal']}")
        print(info["probe"]["line"])
    return _probe_code(info)


def _probe_code(info: dict) -> int:
    """0 unless a probe ran and found the bug or could not decide (exit 1: a check failed)."""
    return 0 if info.get("probe", {}).get("verdict", "not affected") == "not affected" else EXIT_FAILED
