"""`info`: versions, NCCL library, GPUs and links, launcher, and the stale-key verdict for torch."""
from __future__ import annotations

import json

from tabulate import tabulate

from nccl_bench import sysinfo
from nccl_bench.cli import Parser
from nccl_bench.launch import describe


def gather() -> dict:
    g = sysinfo.gpus()
    n = sysinfo.nccl_info()
    return {"torch": sysinfo.torch_version(), "nccl": n["version"], "nccl_path": n["path"],
            "nccl4py": n["nccl4py"], "driver": g["driver"], "gpus": g["devices"], "links": g["links"],
            "gpu_note": g.get("why"), "machine": sysinfo.machine_name(), "launcher": describe(),
            "scalable_init_keys": sysinfo.torch_reuses_unscoped_keys()}


def main(argv: list[str]) -> int:
    p = Parser(prog="nccl_bench info", description="what this machine has")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = p.parse_args(argv)
    info = gather()
    if a.json:
        print(json.dumps(info, indent=1))
        return 0
    keys = info["scalable_init_keys"]
    rows = [("torch", info["torch"]), ("NCCL", info["nccl"] or "not loaded"),
            ("NCCL library", info["nccl_path"] or "-"), ("nccl4py", info["nccl4py"] or "not installed"),
            ("driver", info["driver"] or "-"),
            ("GPUs", ", ".join(f"{d['index']}: {d['name']} {d['memory_gib']} GiB" for d in info["gpus"])
             or f"none ({info['gpu_note']})"),
            ("links", ", ".join(f"GPU{l['gpus'][0]}-GPU{l['gpus'][1]} {l['link']}" for l in info["links"]) or "-"),
            ("machine", info["machine"]), ("launcher", info["launcher"]),
            ("torch reuses unscoped scalable-init keys",
             {True: "yes", None: "unknown"}[keys["reuses_unscoped_keys"]] + f": {keys['why']}")]
    print(tabulate(rows, tablefmt="plain"))
    return 0
