"""`info --probe`: is the installed torch affected by pytorch#178473? Decided from evidence.

Runs the bug report's own scenario on PyTorch's ProcessGroupNCCL as a bounded stress job
(`python -m stress --scenario same-group --init stock`): one process group, a new
communicator per round on another GPU (`(rank + round) % world`), TORCH_NCCL_RANKS_PER_ROOT=1,
and in every round r >= 1 rank `r % world` sleeping 3 s first, so its root key is still
last round's when the others read. The verdict comes from what the ranks read through the
store: "affected" only when some rank used an ID its root did not publish in that round
(a hang alone proves nothing); "not affected" when every delayed round passed. The
journal and each rank's library log are kept under results/ as the evidence.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nccl_bench.job import jobs
from nccl_bench.core import results, sysinfo
from nccl_bench.comm import gpu_count
from nccl_bench.core.errors import UsageError, at_least

STRESS = "stress.__main__"  # `python -m stress` as a module path: the layer test sees the dependency in it

ISSUE = "pytorch#178473"
MAX_ROUNDS = 8


@dataclass
class ProbeOptions:
    backend: str = "torch"  # torch: the installed PyTorch; gloo: this project's CPU model (for CI)
    nranks: int | None = None  # default: every GPU (torch), 2 (gloo)
    delay: float = 3.0  # seconds the round's late root sleeps (the seed's 3 s)
    timeout: float = 8.0  # per-round deadline, above the delay so lateness alone never fails
    budget: float = 240.0  # the whole probe job, seconds
    journal: str | None = None  # the evidence; default results/runs/probe-<machine>-<time>.jsonl

    def __post_init__(self):
        if self.backend not in ("torch", "gloo"):
            raise UsageError(f"--probe: --backend must be torch or gloo, got '{self.backend}'")
        if self.backend == "torch" and gpu_count() < 2:
            raise UsageError(f"--probe runs {ISSUE}'s scenario on torch's ProcessGroupNCCL, which needs 2 GPUs "
                             f"or more (a new communicator per round on another GPU); this machine has "
                             f"{gpu_count()}")
        if self.journal is not None:
            from nccl_bench.core.results import check_writable
            check_writable(self.journal, "--journal")
        if self.nranks is None:
            self.nranks = gpu_count() if self.backend == "torch" else 2
        at_least("--nranks", self.nranks, 2, " for --probe")
        if not 0 < self.delay < self.timeout:
            raise UsageError(f"--probe: --delay ({self.delay:g} s) must be above 0 and below --timeout "
                             f"({self.timeout:g} s), so that a late rank alone never fails a round")

    @property
    def rounds(self) -> int:
        return min(max(2, self.nranks), MAX_ROUNDS)

    def stress_argv(self, journal: Path) -> list[str]:
        delays = [f"delay:{r}:{r % self.nranks}:{self.delay:g}" for r in range(1, self.rounds)]
        return [STRESS, "--backend", self.backend, "--nranks", str(self.nranks), "--scenario", "same-group",
                "--init", "stock", "--ranks-per-root", "1", "--rounds", str(self.rounds), "--skew-max", "0",
                "--timeout", f"{self.timeout:g}", "--journal", str(journal),
                *[a for d in delays for a in ("--inject", d)]]


def judge(rows: list[dict], backend: str, nranks: int, delay: float) -> dict:
    """The verdict from the journal's rounds: affected / not affected / inconclusive, with the evidence."""
    who = f"torch {sysinfo.torch_version()}" if backend == "torch" else "the gloo model"
    setting = (f"one process group, a new communicator per round, TORCH_NCCL_RANKS_PER_ROOT=1, "
               f"{nranks} ranks, one rank {delay:g} s late per round")
    stale = [r for r in rows if r.get("stale")]
    if stale:
        r = stale[0]
        s = r["stale"][0]
        line = (f"{ISSUE}: {who} is AFFECTED: in round {r['round']} rank {s['rank']} used root {s['root']}'s ID "
                f"from {s['from']} ({len(stale)} of {len(rows)} rounds read stale IDs; {setting}). "
                f"Workaround: TORCH_NCCL_RANKS_PER_ROOT >= world size")
        return {"verdict": "affected", "line": line, "rounds": len(rows), "stale_rounds": len(stale)}
    delayed = [r for r in rows if r["round"] >= 1]
    if delayed and all(r["verdict"] == "ok" for r in rows):
        line = (f"{ISSUE}: {who} is not affected: every rank read the ID its root published in all "
                f"{len(delayed)} delayed rounds ({setting})")
        return {"verdict": "not affected", "line": line, "rounds": len(rows), "stale_rounds": 0}
    bad = next((r for r in rows if r["verdict"] != "ok"), None)
    why = (f"round {bad['round']} {bad['verdict']} without a stale read: {bad['diagnosis']}" if bad
           else "no delayed round ran")
    return {"verdict": "inconclusive", "line": f"{ISSUE}: {who}: inconclusive ({why})", "rounds": len(rows),
            "stale_rounds": 0}


def run(opts: ProbeOptions) -> dict:
    """Run the probe job, bounded by opts.budget; its journal stays under results/runs/ as evidence."""
    if opts.journal:
        journal = Path(opts.journal)
    else:
        journal = results.default_path("probe", ".jsonl")
        journal.parent.mkdir(parents=True, exist_ok=True)
    try:
        jobs.run_result(opts.stress_argv(journal), opts.budget, json_flag="--summary-json", ok_codes=(0, 1))
    except jobs.JobFailed as e:
        if not _rounds(journal):
            return {"verdict": "inconclusive", "line": f"{ISSUE}: probe failed: {e.reason}", "journal": str(journal)}
    rows = _rounds(journal)
    return {**judge(rows, opts.backend, opts.nranks, opts.delay), "journal": str(journal)}


def _rounds(path: Path) -> list[dict]:
    import json
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if row.get("type") == "round":
            out.append(row)
    return out
