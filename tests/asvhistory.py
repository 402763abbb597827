"""An asv results folder of several commits made from one real result file (results/asv/h200x2),
with a little noise, and optionally a step planted at one commit in one benchmark."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "results" / "asv"
MACHINE = "h200x2"


def make(out: Path, commits: int = 6, step_at: int | None = None, step_bench: str = "",
         factor: float = 1.3, noise: float = 0.01, seed: int = 7, only: str | None = None) -> list[str]:
    """out/<machine>/... and out/benchmarks.json; returns the commit hashes, oldest first. `only`: the one
    benchmark kept, for a test about files rather than series (each series is a line of a report's plots)."""
    rng = random.Random(seed)
    src = next(p for p in (REAL / MACHINE).glob("*.json") if p.name != "machine.json")
    doc = json.loads(src.read_text())
    (out / MACHINE).mkdir(parents=True)
    shutil.copy(REAL / MACHINE / "machine.json", out / MACHINE / "machine.json")
    shutil.copy(REAL / "benchmarks.json", out / "benchmarks.json")
    col = doc["result_columns"].index("result")
    shas = [f"{i:02d}" + "%038x" % rng.getrandbits(152) for i in range(commits)]
    for i, sha in enumerate(shas):
        d = json.loads(json.dumps(doc))
        d["commit_hash"], d["date"] = sha, doc["date"] + i * 3_600_000
        if only is not None:
            d["results"] = {only: d["results"][only]}
        for bench, values in d["results"].items():
            res = values[col]
            if res is None:
                continue
            step = factor if step_at is not None and i >= step_at and bench == step_bench else 1.0
            scale = lambda v: None if v is None else v * step * (1 + rng.uniform(-noise, noise))  # noqa: E731
            values[col] = [scale(v) for v in res] if isinstance(res, list) else scale(res)
        (out / MACHINE / f"{sha[:8]}-{d['env_name']}.json").write_text(json.dumps(d))
    return shas
