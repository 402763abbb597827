"""`locate`: name the GPU, link or node that drags a collective down, not just "FAIL".

    python -m nccl_bench locate [--size 256M] [--fraction 0.8] [--json F] [--junit F]

1. Pair matrix: point-to-point busbw (and 8 B latency) of every ordered pair of ranks, in rounds of
   disjoint pairs (nccl_bench.locate.pairs), classed by what joins them; a pair is slow under
   `--fraction` x its class median.
2. Bisection (nccl_bench.locate.halves): the world's all_reduce; when it is wrong, under the
   profile's floor, or the pairs name a suspect, halves with communicators of their own, followed
   down to the rank or pair that makes it slow or wrong.
3. Per-GPU check of each suspect: device copy bandwidth, and the NVML error counters doctor reads,
   before and after the run.
4. Verdict: one line per suspect with its evidence; JSON (flat pair rows, one meta block), a heatmap
   PNG beside it, JUnit; exit 1 when there is a suspect, 0 when none, 2 for bad input.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from nccl_bench.comm import InitPlan
from nccl_bench.core import results, sysinfo
from nccl_bench import records
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.launch import launcher_node
from nccl_bench.core.errors import EXIT_FAILED, UsageError, at_least
from nccl_bench.measure import fits
from nccl_bench.measure.vocabulary import parse_size
from nccl_bench.locate import suspects as S
from nccl_bench.job.cli import Parser, add_job_args, job_options, prog
from nccl_bench.job.driver import run_job
from nccl_bench.job.runner import Job
from nccl_bench.job.spec import JobSpec, WorkerRef
from nccl_bench.job.options import JobOptions


@dataclass
class LocateOptions:
    job: JobOptions
    size: int | None = None  # bytes per pair and for the all_reduce; None: 256 MiB on GPUs, 1 MiB on gloo
    iters: int = 5
    fraction: float | None = None  # slow: under this x the class median (pairs) or the other half; None:
    # 0.8, or 0.1 on gloo: a process sharing loaded cores can be descheduled for a whole measurement
    profile: str | None = None  # all_reduce floor from this hardware profile (as accept chooses it)
    json: str | None = None
    junit: str | None = None
    picture: bool = True
    floor_GBps: float | None = field(default=None, init=False)

    def __post_init__(self):
        if self.size is not None and self.size < 1:
            raise UsageError(f"--size must be at least 1 byte, got {self.size}")
        at_least("--iters", self.iters, 1)
        if self.fraction is None:
            self.fraction = 0.1 if self.job.backend == "gloo" else 0.8
        if not 0 < self.fraction < 1:
            raise UsageError(f"--fraction must be between 0 and 1, got {self.fraction}")
        results.check_writable(self.json, kind="locate")
        results.check_writable(self.junit, "--junit")

    @property
    def nbytes(self) -> int:
        return self.size or ((1 << 20) if self.job.backend == "gloo" else (256 << 20))


def parser() -> Parser:
    p = Parser(prog=prog("locate"), description="name the GPU, link or node that drags collectives down")
    add_job_args(p, init_default="regular")
    p.add_argument("--size", default=None, help="bytes per pair and all_reduce (K/M/G; default 256M, gloo 1M)")
    p.add_argument("--iters", type=int, default=5, help="timed iterations per pair and group (the fastest counts)")
    p.add_argument("--fraction", type=float, default=None,
                   help="slow: under this x the class median, or the other half (0.8; gloo 0.1)")
    p.add_argument("--profile", default=None, help="hardware profile whose all_reduce floor the world must meet")
    p.add_argument("--json", default=None, help="result file (default results/runs/locate-<machine>-<time>.json)")
    p.add_argument("--junit", default=None, help="JUnit XML: one case per suspect (or one passing case)")
    p.add_argument("--no-picture", action="store_true", help="no heatmap PNG beside the JSON")
    return p


def options(argv: list[str]) -> LocateOptions:
    a = parser().parse_args(argv)
    return LocateOptions(job_options(a), size=parse_size(a.size, "--size") if a.size else None, iters=a.iters,
                         fraction=a.fraction, profile=a.profile, json=a.json, junit=a.junit, picture=not a.no_picture)


def main(argv: list[str]) -> int:
    o = options(argv)
    fits.require("--size", o.job.backend, ["all_reduce", "sendrecv"], o.nbytes, o.job.world_ranks())
    if o.profile:
        from nccl_bench.records import profiles
        prof = profiles.load(o.profile)
        floors = [f for f in prof.busbw if f.collective == "all_reduce"]
        if floors:
            o.floor_GBps = min(floors, key=lambda f: abs(f.bytes - o.nbytes)).min_GBps
    return run_job(JobSpec("locate", o.job, WorkerRef.of(worker, o), result=o.json))


def worker(o: LocateOptions):
    def run(job: Job) -> int:
        inject = S.injections()
        gpu = o.job.backend != "gloo"
        counters_before = _counters(job) if gpu else {}
        nodes, local = where(job)
        if job.nranks < 2:
            return single_rank(o, job, gpu, counters_before, nodes, local)
        rows = pair_rows(o, job, inject, nodes, local, _links() if gpu else {})
        found = S.from_pairs(rows, job.nranks, nodes, local)
        steps, group, why = bisection(o, job, inject, found)
        found = S.add_bisection(found, steps, group, why, nodes, local)
        checked = {}
        if gpu and any(job.rank in s["ranks"] for s in found):
            checked = {"gpu": S.gpu_check(job.ident.local_rank),
                       "counters": S.counter_changes(counters_before, _counters(job))}
        checks = job.store.all_gather_obj("locate/checks", checked, timeout=o.job.timeout + 60)
        if job.rank == 0:
            return report(o, job, rows, steps, found, checks, nodes, local, why)
        return EXIT_FAILED if found else 0
    return run


def where(job: Job) -> tuple[list[str], list[int]]:
    """Every rank's node (as NCCL tells nodes apart: hostname, and NCCL_HOSTID where set) and local rank,
    on every rank. Where the launcher groups the ranks otherwise (two torchrun agents on one machine
    without their own NCCL_HOSTID), NCCL's grouping stands, since it decides the transport: said once."""
    n = job.nranks
    real = job.store.all_gather_obj("locate/hosts", [job.ident.host, job.ident.local_rank, launcher_node()])
    nodes, local = S.node_names(n, [h for h, _, _ in real]), [lr for _, lr, _ in real]
    if S.FAKE_NODES_ENV in os.environ:
        local = [sum(1 for q in range(r) if nodes[q] == nodes[r]) for r in range(n)]
    said = {ln for _, _, ln in real if ln is not None}
    if job.rank == 0 and len(said) > len(set(nodes)):
        print(f"locate: the launcher says {len(said)} node(s) ({', '.join(sorted(said))}), NCCL sees "
              f"{len(set(nodes))} host(s) ({', '.join(sorted(set(nodes)))}): pairs are classed by NCCL's hosts; "
              f"set NCCL_HOSTID per node to make them apart")
    return nodes, local


def pair_rows(o: LocateOptions, job: Job, inject: dict, nodes, local, links) -> list[dict]:
    """The pair matrix: every ordered pair's bandwidth at --size and its 8-byte time, classed and judged."""
    import torch
    from nccl_bench.comm.lifetime import communicator
    from nccl_bench.locate import pairs
    gpu = o.job.backend != "gloo"

    def direction_delay(src, dst):
        return inject["slow_send"].get(src, 0.0) + inject["slow_pair"].get(tuple(sorted((src, dst))), 0.0)

    plan = InitPlan(rank=job.rank, nranks=job.nranks, mode="regular", ranks_per_root=o.job.ranks_per_root,
                    counter=0, store=job.store, local_rank=job.ident.local_rank, blocking=True, namespace="locate")
    with communicator(o.job.backend, plan, Deadline(o.job.timeout)) as comm:
        stream = torch.cuda.Stream(comm.device) if comm.device.type == "cuda" else None
        cpu = dict(one_at_a_time=not gpu, repeats=1 if gpu else 3)  # a CPU model's pairs share its cores
        sides = pairs.measure(comm, job, o.nbytes, o.iters, o.job.timeout, stream, direction_delay, **cpu)
        # the 8-byte times are information, never judged: measured without the tests' injected delays, which
        # model a slow link's bandwidth (and there cost 3 x 10 launches a pair for nothing)
        lat = pairs.measure(comm, job, 8, max(o.iters, 10), o.job.timeout, stream, lambda src, dst: 0.0, **cpu)
    everyone = job.store.all_gather_obj("locate/sides", [sides, lat], timeout=o.job.timeout + 60)
    seconds = pairs.matrix([s for mine, _ in everyone for s in mine])
    lat_s = pairs.matrix([s for _, mine in everyone for s in mine])
    return S.pair_rows(seconds, lat_s, o.nbytes, nodes, local, links, o.fraction)


def bisection(o: LocateOptions, job: Job, inject: dict, found: list[dict]):
    """The world's all_reduce, then halves of the group that is slow or wrong: (steps, group, why)."""
    from nccl_bench.locate import halves
    me = job.rank

    def measure(groups, tag):
        mine = next((g for g in groups if me in g), None)
        res = None
        if mine is not None:
            res = halves.measure_group(o.job.backend, job, mine, tag, len(groups), o.nbytes, o.iters,
                                       o.job.timeout, inject["slow_send"].get(me, 0.0), me in inject["corrupt"])
        got = job.store.all_gather_obj(f"locate/{tag}/results", res, timeout=o.job.timeout + 60)
        return [next(r for r in got if r and r["members"] == g) for g in groups]

    def world_bad(world):
        why = []
        if world["wrong"]:
            why.append(f"world all_reduce: {world['wrong']} wrong values")
        if o.floor_GBps and world["busbw"] < o.floor_GBps:
            why.append(f"world all_reduce {world['busbw']:.3g} GB/s < profile floor {o.floor_GBps:g}")
        if found:
            why.append(f"the pair matrix names {len(found)} suspect(s)")
        return "; ".join(why)
    return halves.bisect(job, measure, o.fraction, world_bad)


def single_rank(o: LocateOptions, job, gpu: bool, counters_before: dict, nodes, local) -> int:
    """One rank: no pair and no half to compare, so the GPU is checked on its own: its copies (device,
    host to device, device to host) and its error counters, numbers in the JSON."""
    print("locate: pairs and halves need two ranks or more; this run has one: checking its GPU on its own",
          flush=True)
    check = {"gpu": S.gpu_check(job.ident.local_rank) if gpu else {"copy_GBps": None, "why": "no GPU (gloo)"},
             "counters": S.counter_changes(counters_before, _counters(job)) if gpu else {}}
    g = check["gpu"]
    if g.get("copy_GBps"):
        print(f"GPU {job.ident.local_rank}: device copy {g['copy_GBps']:.0f} GB/s, host to device "
              f"{g['h2d_GBps']:.1f} GB/s, device to host {g['d2h_GBps']:.1f} GB/s; error counters grew: "
              + (", ".join(f"{k} +{v}" for k, v in check["counters"].items()) or "none"), flush=True)
    found = [{"what": "gpu", "ranks": [0], "who": S.where(0, nodes, local),
              "evidence": [f"{k} +{v:,} during the run" for k, v in check["counters"].items()]}] \
        if check["counters"] else []
    meta = {**sysinfo.collect(o.job.backend, sorted(set(nodes))), "nodes": nodes, "local_ranks": local,
            "bytes": o.nbytes, "fraction": o.fraction, "floor_GBps": o.floor_GBps, "bisection": [],
            "bisection_why": "one rank: nothing to bisect", "suspects": found, "checks": [check],
            "single_rank": True, "verdict": "SUSPECTS" if found else "HEALTHY"}
    path = records.write("locate", [], meta, o.json)
    for s in found:
        print(f"SUSPECT {s['who']}: " + "; ".join(s["evidence"]))
    print(f"locate: {'no suspect' if not found else f'{len(found)} suspect(s)'} (one rank); {path}")
    return EXIT_FAILED if found else 0


def _counters(job) -> dict:
    from nccl_bench.core.gpucounters import read_counters
    return read_counters([job.ident.local_rank])


def _links() -> dict:
    return {tuple(sorted(lk["gpus"])): lk["link"] for lk in sysinfo.gpus().get("links", [])}


def report(o: LocateOptions, job, rows, steps, found, checks, nodes, local, why) -> int:
    from nccl_bench.locate import pairtable
    for s in found:
        for r in s["ranks"]:
            c = checks[r] if r < len(checks) else {}
            if c.get("gpu", {}).get("copy_GBps"):
                s["evidence"].append(f"{S.where(r, nodes, local)} device copy {c['gpu']['copy_GBps']:.0f} GB/s")
            for k, v in (c.get("counters") or {}).items():
                s["evidence"].append(f"{S.where(r, nodes, local)} {k} +{v:,} during the run")
    n = job.nranks
    print(f"locate: {n} ranks on {len(set(nodes))} node(s), {o.nbytes} B per pair, {o.job.backend}; busbw GB/s"
          + (", rows send, columns receive" if n <= pairtable.MAX_MATRIX_RANKS else ""))
    print("\n".join(pairtable.lines(rows, n, o.picture)))
    for st in steps:
        print(f"bisection step {st['step']}: " + "; ".join(
            f"ranks {g['members']} {g['busbw']:.3g} GB/s" + (f", {g['wrong']} wrong" if g["wrong"] else "")
            for g in st["groups"]))
    meta = {**sysinfo.collect(o.job.backend, sorted(set(nodes))), "nodes": nodes, "local_ranks": local,
            "bytes": o.nbytes, "fraction": o.fraction, "floor_GBps": o.floor_GBps, "bisection": steps,
            "bisection_why": why, "suspects": found, "checks": checks,
            "verdict": "SUSPECTS" if found else "HEALTHY"}
    path = records.write("locate", rows, meta, o.json)
    if o.picture:
        from nccl_bench.core.figures import pair_heatmap
        cells = [(r["src"], r["dst"], r["ratio"], r["slow"]) for r in rows]
        pair_heatmap(cells, n, f"locate: busbw / class median, {o.nbytes} B", path.with_suffix(".png"))
    if o.junit:
        from nccl_bench.core import junit
        cases = [junit.Case(name=f"{s['what']} {s['who']}", classname="locate", status="fail",
                            message="; ".join(s["evidence"]), detail="; ".join(s["evidence"])) for s in found] or [
            junit.Case(name="every pair and half", classname="locate", status="pass", message="no suspect",
                       detail="")]
        junit.write(o.junit, junit.Suite("locate", cases), name="locate")
    for s in found:
        print(f"SUSPECT {s['who']}: " + "; ".join(s["evidence"]))
    print(f"locate: {'no suspect' if not found else f'{len(found)} suspect(s)'}; {path}")
    sys.stdout.flush()
    return EXIT_FAILED if found else 0


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
