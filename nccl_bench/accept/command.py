"""`accept`: is this node fit to join the fleet? doctor, bandwidth, per-GPU copies, init and a short
stress, each judged against a profile: a built-in one for a known machine type
(nccl_bench/records/profiles/*.json), else one derived from what the node reports (accept.derive),
or a golden node's (`--profile FILE` written by `--record-baseline FILE`); JSON and JUnit.

Each step is its own bounded job (accept.steps), so a hang in one step is recorded as that step's
failure and the others still run. Error counters are read before and after and judged on the difference.
"""
from __future__ import annotations

import sys

from nccl_bench import records
from nccl_bench.accept import derive, network, selection, topology, verdicts
from nccl_bench.accept import golden as golden_mod
from nccl_bench.accept.options import AcceptOptions
from nccl_bench.accept.steps import (check_profile_fits, check_workload, not_run, run_steps, step_locate,
                                    step_verdicts)
from nccl_bench.comm import gpu_count
from nccl_bench.core import junit, launch, sysinfo
from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.job.cli import Parser, add_launch_args, prog
from nccl_bench.records import profiles


def parser() -> Parser:
    p = Parser(prog=prog("accept"), description="doctor + bandwidth + init + short stress, judged by a profile")
    add_launch_args(p)
    p.add_argument("--profile", default=None,
                   help="profile name or JSON file (default: chosen from GPU model and count)")
    p.add_argument("--json", metavar="PATH", default=None, help="verdicts and measurements as JSON")
    p.add_argument("--junit", metavar="PATH", default=None, help="JUnit XML: one test case per check")
    p.add_argument("--init-rounds", type=int, default=10, help="init-latency rounds (default 10)")
    p.add_argument("--stress-rounds", type=int, default=20, help="short scoped stress rounds (default 20)")
    p.add_argument("--step-timeout", type=float, default=300.0, help="seconds allowed per step (default 300)")
    p.add_argument("--locate", action="store_true", help="when accept fails, run locate: which GPU, link or node")
    p.add_argument("--margin", type=float, default=0.85,
                   help="derived profile: floors are this x what the hardware should reach (default 0.85)")
    p.add_argument("--workload", nargs="+", metavar="FILE", default=None,
                   help="a job's Flight Recorder dumps, profiler trace or workload file: its replay's sequence time "
                        "judged against the job's own, or a golden node's replay (nccl-bench replay)")
    p.add_argument("--workload-max-slowdown", type=float, default=1.25, metavar="X",
                   help="the replay's sequence may take X times the job's own (default 1.25)")
    p.add_argument("--network", metavar="FILE", default=None,
                   help="a bench result run across the nodes (bench under torchrun or srun): its all_reduce busbw "
                        "judged against a floor from this node's InfiniBand/RoCE ports; over sockets, said")
    p.add_argument("--record-baseline", metavar="FILE", default=None,
                   help="this node is known good: write what it measured (with each point's spread over 3 "
                        "cycles) as a profile FILE, to judge other nodes with --profile FILE")
    p.add_argument("--steps", metavar="LIST", default=None, type=step_list,
                   help="only these steps, comma-separated, of: doctor, bench, copies (GPUs), init, stress, replay "
                        "(with --workload); the others' checks are SKIP (default: every step that applies)")
    p.add_argument("--check-args", action="store_true",
                   help="check these options and the files they name, run nothing, exit 0 (fleet run asks this "
                        "before it starts any node's accept)")
    return p


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    per_node_of(a)
    if launch.detect() is not None:
        raise UsageError("accept starts its own jobs on this node: run it without a launcher, or one task per node "
                         "under srun (srun --ntasks-per-node 1 ... accept --json 'accept-{node}.json')")
    o = options_of(a)
    if o.workload:  # read and checked now: bad input is one line before any step runs
        check_workload(o)
    across = network.verdict(o.network, o.margin) if o.network else None  # bad input: one line, nothing run
    if a.check_args:
        if o.profile:
            profiles.load(o.profile)  # a name it does not know, or a file it cannot read, is one line now
        return 0
    facts = topology.read() if o.backend != "gloo" else None
    names = selection.detected_gpu_names()
    profile = selection.choose(o.profile, o.backend, names, facts, o.margin)
    nranks = o.nranks or (gpu_count() if o.backend != "gloo" else 2)
    check_profile_fits(profile, o.backend, nranks)
    where = f"file {profile.path}" if profile.origin == "file" else profile.origin
    print(f"accept: profile {profile.name} ({where}), backend {o.backend}, {nranks} rank(s)", flush=True)
    if profile.origin == "derived":
        print(f"accept: no built-in profile for {len(names)} x {names[0] if names else '?'}; derived from the node: "
              f"{derive.assumed(facts)}; floors = expected x {o.margin:g}", flush=True)
    if nranks < 2:
        print("accept: pair checks skipped: one rank has no peer (busbw is 0 by nccl-tests' formula with one "
              "rank); judged instead: the GPU's copies, 8-byte latency, init and stress", flush=True)
    m, steps = run_steps(o, profile)
    judged = step_verdicts(steps) + verdicts.judge(profile, m) + ([across[0]] if across else [])
    if across:
        m["network_busbw"] = across[1]["busbw_GBps"]
    print(verdicts.table(judged))
    for v in judged:
        if v.status == "fail":
            print(v.message())
    ok = verdicts.all_passed(judged)
    if True:  # always kept: --json, else results/runs/
        rows = [v.as_dict() for v in judged]
        meas = {k: ({f"{c}:{b}": x for (c, b), x in v.items()} if k == "busbw" else v) for k, v in m.items()}
        meas.pop("busbw_spread_pct", None)
        meta = {**sysinfo.collect(o.backend), "profile": profile.name, "profile_origin": profile.origin,
                "profile_doc": profiles.to_doc(profile), "facts": facts.as_dict() if facts else None,
                "steps": steps, "measurements": meas, "verdict": "PASS" if ok else "FAIL",
                **({"network": across[1]} if across else {})}
        print(f"wrote {records.write('accept', rows, meta, o.json)}")
    if o.junit:
        doctor_rows = m.get("doctor", [])
        suites = ([junit.suite_from_checks("doctor", doctor_rows)] if doctor_rows else []) + [
            junit.suite_from_verdicts(f"accept.{profile.name}", judged)]
        print(f"wrote {junit.write(o.junit, *suites)}")
    skipped = f"; not run (--steps): {', '.join(not_run(steps))}" if not_run(steps) else ""
    print(f"accept {'PASS' if ok else 'FAIL'} against profile {profile.name} ({profile.origin}){skipped}")
    if o.record_baseline:
        write_baseline(o, m, names, facts)
    if not ok and o.locate:
        step_locate(o, profile)
    return 0 if ok else EXIT_FAILED


def options_of(a) -> AcceptOptions:
    """The options, checked by name. --check-args runs where the nodes' GPUs are not (fleet run's login node): the
    backend is the node's to check there, unless it is named gloo."""
    return AcceptOptions(backend="gloo" if a.check_args else a.backend, nranks=a.nranks, profile=a.profile,
                         json=a.json, junit=a.junit, init_rounds=a.init_rounds, stress_rounds=a.stress_rounds,
                         step_timeout=a.step_timeout, locate=a.locate, margin=a.margin,
                         record_baseline=a.record_baseline, workload=a.workload,
                         workload_max_slowdown=a.workload_max_slowdown, network=a.network, steps=a.steps,
                         on_the_node=not a.check_args or a.backend == "gloo")


def step_list(text: str) -> tuple[str, ...]:
    """--steps doctor,bench: the names, checked by AcceptOptions."""
    return tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))


def per_node_of(a) -> None:
    """Under srun with one task per node, each task is its node's accept: it leaves the step (its jobs launch on
    its node, with the GPUs Slurm gave it), and `{node}` in an output's name becomes its node's name. Several nodes
    writing one path would lose all results but one: that is one line before anything runs."""
    nodes = launch.slurm_task_per_node()
    if nodes is None:
        return
    host = launch.node_name()
    for flag in ("json", "junit", "record_baseline"):
        path = getattr(a, flag)
        if path and nodes > 1 and "{node}" not in path:
            raise UsageError(f"--{flag.replace('_', '-')} {path}: the step's {nodes} nodes would each write it; put "
                             "{node} in its name")
        if path:
            setattr(a, flag, path.replace("{node}", host))
    launch.leave_launcher()


def write_baseline(o: AcceptOptions, m: dict, names: list[str], facts) -> None:
    """This run as a golden node's profile (accept.golden), written whole, never over a file."""
    import json
    import socket
    spreads = {k: v for k, v in (m.get("busbw_spread_pct") or {}).items() if v is not None}
    golden = golden_mod.record(m, spreads, o.backend, names if o.backend != "gloo" else [], socket.gethostname(),
                               facts.nvls if facts else None)
    with open(o.record_baseline, "x") as f:
        json.dump(profiles.to_doc(golden), f, indent=1)
        f.write("\n")
    print(f"accept: baseline profile {golden.name} written to {o.record_baseline} ({len(golden.busbw)} busbw floors"
          f"{', copies' if golden.copy_min_GBps else ''}); judge other nodes with --profile {o.record_baseline}")


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
