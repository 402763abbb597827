"""`doctor`: preflight health on every rank, gathered and judged at rank 0.

Every rank checks its GPU (NVML), its environment and (one rank per node) the node's
kernel log and /dev/shm, then reports through the job store. A rank that does not
report within --timeout is named with its host. Exit 0 when nothing failed, 1 otherwise.
"""
from __future__ import annotations

import json
import sys

from tabulate import tabulate

from nccl_bench.core import junit
from nccl_bench.core import results, sysinfo
from nccl_bench import records
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job.driver import run_job
from nccl_bench.job.runner import Job
from nccl_bench.job.spec import JobSpec, WorkerRef
from nccl_bench.comm import gpu_count
from nccl_bench.core.errors import EXIT_FAILED, BarrierTimeout, UsageError
from nccl_bench.accept.check import Check
from nccl_bench.accept.rankchecks import rank_checks
from nccl_bench.accept.gpuchecks import GPU_CHECK_NAMES


def parser() -> Parser:
    p = Parser(prog=prog("doctor"), description="preflight health checks on every rank, judged at rank 0")
    add_job_args(p, timeout=60.0)
    p.add_argument("--json", metavar="PATH", default=None, help="also write the checks as JSON (never overwritten)")
    p.add_argument("--junit", metavar="PATH", default=None, help="also write JUnit XML, one test case per check")
    p.add_argument("--xid-window", type=float, default=1.0, help="seconds to listen for XID events (default 1)")
    return p


def _key(rank: int) -> str:
    return f"doctor/report/{rank}"


def gather(job: Job, mine: list[dict], timeout: float) -> tuple[list[dict], Check]:
    """Every rank's checks (rank 0 gets them all) and the verdict on who reported in time."""
    store = job.store
    store.raw.set(_key(job.rank), json.dumps(mine))
    try:
        store.barrier("doctor/reported", timeout)
        missing = []
    except BarrierTimeout as e:
        missing = e.missing
    if job.rank != 0:
        return mine, None
    arrived = [r for r in range(job.nranks) if r not in {m for m, _ in missing}]
    rows = [c for r in arrived for c in json.loads(store.raw.get(_key(r)))]
    hosts = sorted({c["host"] for c in rows})
    if missing:
        who = ", ".join(f"rank {r} ({h or 'host unknown'})" for r, h in missing)
        alive = Check("ranks_alive", "fail", f"{len(arrived)} of {job.nranks} ranks reported within {timeout:g}s; "
                      f"missing: {who}", "check that every rank launched and can reach the master address "
                      "(nc -zv MASTER_ADDR MASTER_PORT)", data={"missing": [list(m) for m in missing]})
    else:
        alive = Check("ranks_alive", "pass", f"all {job.nranks} ranks reported through the store on "
                      f"{len(hosts)} host(s) within {timeout:g}s")
    return rows, alive


def env_consistency(rows: list[dict]) -> Check:
    """Ranks that disagree on NCCL/TORCH_NCCL variables behave differently (and can hang)."""
    seen = {}
    for c in rows:
        if c["name"] == "env":
            seen.setdefault(json.dumps(c["data"].get("knobs", {}), sort_keys=True), []).append(c["rank"])
    if len(seen) <= 1:
        return Check("env_consistent", "pass", f"{sum(map(len, seen.values()))} rank(s) agree on NCCL/TORCH_NCCL_*")
    ev = " vs ".join(f"ranks {ranks}: {knobs}" for knobs, ranks in seen.items())
    return Check("env_consistent", "warn", ev, "set the same NCCL/TORCH_NCCL variables on every rank")


def skipped_gpu_note(rows: list[dict]) -> str:
    """One line naming the GPU checks that were skipped and why."""
    why = {}
    for c in rows:
        if c["name"] in GPU_CHECK_NAMES and c["status"] == "skip":
            why.setdefault(c["evidence"], set()).add(c["name"])
    return "; ".join(f"skipped {', '.join(sorted(names))}: {reason}" for reason, names in why.items())


def table(rows: list[dict]) -> str:
    """One line per distinct outcome: ranks that saw the same thing share a line."""
    merged: dict[tuple, list] = {}
    for c in rows:
        key = (c["host"], c["name"], c["status"], c["evidence"], c["action"])
        merged.setdefault(key, []).append("all" if c["rank"] is None else str(c["rank"]))
    body = [(",".join(ranks), host, name, status.upper(), evidence, action)
            for (host, name, status, evidence, action), ranks in merged.items()]
    return tabulate(body, headers=("ranks", "host", "check", "status", "evidence", "action"), tablefmt="simple",
                    maxcolwidths=[None, None, None, None, 70, 50])


def summary(rows: list[dict]) -> dict:
    counts = {s: sum(c["status"] == s for c in rows) for s in ("pass", "warn", "fail", "skip")}
    return {**counts, "failed": sorted({c["name"] for c in rows if c["status"] == "fail"})}


def worker(a, opts):
    def run(job: Job) -> int:
        mine = [c.as_dict() for c in rank_checks(job.rank, job.ident.local_rank, job.nranks, a.xid_window)]
        rows, alive = gather(job, mine, opts.timeout)
        if job.rank != 0:
            return 0  # rank 0 judges and sets the exit code
        rows = rows + [c.as_dict() for c in (alive, env_consistency(rows))]
        s = summary(rows)
        print(table(rows), flush=True)
        note = skipped_gpu_note(rows)
        if note:
            print(note, flush=True)
        verdict = "FAIL (" + ", ".join(s["failed"]) + ")" if s["failed"] else "PASS"
        print(f"doctor {verdict}: {s['pass']} pass, {s['warn']} warn, {s['fail']} fail, {s['skip']} skip "
              f"on {job.nranks} rank(s)", flush=True)
        if a.json:
            hosts = sorted({c["host"] for c in rows if c["host"]})
            meta = {**sysinfo.collect(opts.backend, hosts), "summary": s, "gpu_skips": note}
            print(f"wrote {records.write('doctor', rows, meta, a.json)}", flush=True)
        if a.junit:
            print(f"wrote {junit.write(a.junit, junit.suite_from_checks('doctor', rows))}", flush=True)
        return EXIT_FAILED if s["failed"] else 0
    return run


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if not a.xid_window >= 0:
        raise UsageError(f"--xid-window must be >= 0 seconds, got {a.xid_window:g}")
    if a.backend is None and gpu_count():
        a.backend = "torch"  # doctor opens no communicator: one rank per GPU, nccl4py not needed
    opts = job_options(a)
    results.check_writable(a.json)
    junit.check_writable(a.junit)
    # no meeting first: a rank that never comes is what doctor's ranks_alive check names, in its table
    return run_job(JobSpec("doctor", opts, WorkerRef.of(worker, a, opts), result=a.json, meeting=False))


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
