"""Which algorithm NCCL used, from its own TUNING log.

NCCL reads NCCL_DEBUG once per process and, with NCCL_DEBUG_SUBSYS=TUNING, logs one line
per call, e.g. `AllReduce: 8 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}`.
Logging every call would disturb timing, so the bench confirms the algorithm in a
separate short probe job (one call per collective and size) run with `probe_env()`;
its rank 0 writes the list of calls it made, and `confirm()` pairs them with the log.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

LINE = re.compile(r"\b([A-Za-z]+): (\d+) Bytes -> Algo (\w+) proto (\w+)")
MANIFEST = "calls.json"
PROBE_MAX_BYTES = 1 << 30  # larger sizes are not probed (allocation would dominate the probe)


def probe_env(folder: str | Path) -> dict:
    return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING",
            "NCCL_DEBUG_FILE": str(Path(folder) / "nccl.%h.%p.log")}


def parse(text: str) -> list[tuple[str, int, str, str]]:
    """(NCCL collective name, bytes, ALGO, PROTO) per logged call, in order."""
    return [(m.group(1), int(m.group(2)), m.group(3).upper(), m.group(4).upper()) for m in LINE.finditer(text)]


def write_manifest(folder: str | Path, pid: int, calls: list[dict]) -> None:
    """calls: [{"algo", "collective", "nccl_name", "size"}] in the order rank 0 made them."""
    (Path(folder) / MANIFEST).write_text(json.dumps({"pid": pid, "calls": calls}))


def confirm(folder: str | Path) -> dict:
    """{"<algo>/<collective>/<size>": "RING" | ...} for every probed call NCCL reported."""
    folder = Path(folder)
    man = json.loads((folder / MANIFEST).read_text())
    logs = list(folder.glob(f"nccl.*.{man['pid']}.log"))
    lines = parse(logs[0].read_text(errors="replace")) if logs else []
    out, by_name = {}, {}
    for name, _, algo, _ in lines:
        by_name.setdefault(name, []).append(algo)
    seen: dict[str, int] = {}
    for call in man["calls"]:
        name = call["nccl_name"]
        if not name:
            continue
        k = seen.get(name, 0)
        seen[name] = k + 1
        reported = by_name.get(name, [])
        if k < len(reported):
            out[f"{call['algo']}/{call['collective']}/{call['size']}"] = reported[k]
    return out
