"""`fleet run`: accept a Slurm cluster with one command. Every node's accept at once (one step per node, at most
--max-steps at a time), then the network between the nodes that answered, in rounds of disjoint node pairs (each
node meets --partners others; core.tournament), each pair a 2-node bench; then the fleet's verdict over the
folder (fleet.judging): which nodes, which links. Nodes Slurm has out of service, and steps that fail or pass
their deadline, are named and never hold the run. Resumable (--resume: what has a result is kept); Ctrl-C
cancels every step of the run.

    python -m nccl_bench fleet run --partition gpu --ntasks-per-node 8 --srun-args '--gpus-per-node=8' \\
        --out results/fleet-run-1 [-- accept options: --profile h100x8 ...]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from nccl_bench.core import results
from nccl_bench.core.errors import UsageError
from nccl_bench.core.optionfields import add_arguments, given, recorded
from nccl_bench.core.tournament import partners
from nccl_bench.fleet import judging, outliers, slurmnodes, waves
from nccl_bench.fleet import links as links_mod
from nccl_bench.fleet.links import Pair
from nccl_bench.fleet.runoptions import FleetRunOptions
from nccl_bench.job.cli import Parser, prog

PLAN = "plan.json"  # what the run was asked: a resume must ask the same
# what a resumed run may change: how it runs, not what it measures (a slow link's pair measured again or not: the
# pairs are measured the same; a run begun before --remeasure existed resumes)
FREE_ON_RESUME = ("resume", "out", "max_steps", "accept_timeout", "pair_timeout", "remeasure")
JOURNAL = "steps.jsonl"  # one line per finished step (its time, its exit): the run's own record


def parser() -> Parser:
    p = Parser(prog=prog("fleet run"), description="accept a Slurm cluster: every node's accept, then pairs of "
                                                   "nodes over the network, then the fleet's verdict")
    add_arguments(p, FleetRunOptions)
    judging.add_arguments(p)
    return p


@dataclass
class Plan:
    o: FleetRunOptions
    out: Path
    nodes: list[slurmnodes.SlurmNode]  # every node asked for, usable or not
    how: str
    job_name: str

    @property
    def usable(self) -> list[slurmnodes.SlurmNode]:
        return [n for n in self.nodes if n.usable]


def main(argv: list[str]) -> int:
    ours, accept_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    a = parser().parse_args(ours)
    o = FleetRunOptions(**given(a, FleetRunOptions), accept_args=accept_args)
    s = judging.settings(a)
    slurmnodes.check_here()
    nodes, how = slurmnodes.select(o.partition, o.nodelist)
    check_accept_args(o)
    results.check_writable(s.junit, "--junit")
    plan = make_plan(o, nodes, how)
    down = [n for n in plan.nodes if not n.usable]
    print(f"fleet run: {len(plan.nodes)} node(s) from {how}; {len(down)} out of service"
          + (f" ({', '.join(f'{n.said()}: {n.state}' for n in down[:5])}{' ...' if len(down) > 5 else ''})"
             if down else "") + f"; at most {o.max_steps} step(s) at once; {plan.out}", flush=True)
    try:
        accepted = accept_nodes(plan)
        failed_pairs = measure_pairs(plan, accepted)
        confirm_slow_pairs(plan, accepted, s, failed_pairs)
    except BaseException:
        left = slurmnodes.cancel(plan.job_name)  # whatever Slurm still runs of ours: Ctrl-C leaves nothing
        print("fleet run: stopped; every step of it cancelled" + (f" ({left} still ending in Slurm)" if left else "")
              + f"; `--resume --out {plan.out}` continues", flush=True)
        raise
    known = judging.Known(nodes={n.host: [f"out of service in Slurm: {n.state}" + (f" ({n.reason})" if n.reason
                                                                                   else "")] for n in down})
    for node, why in accepted.failures.items():
        known.nodes.setdefault(node.host, []).append(why)
    known.pairs = failed_pairs
    files = sorted(str(f) for f in (plan.out / "accept").glob("*.json")) + sorted(
        str(f) for f in (plan.out / "pairs").glob("*.json"))
    return judging.judge(files, _new_folder(plan.out, "verdict"), s, known, say="fleet run")


def make_plan(o: FleetRunOptions, nodes: list[slurmnodes.SlurmNode], how: str) -> Plan:
    """The folder, new or (--resume) the one this run was started in with the same nodes and options."""
    out = Path(o.out) if o.out else results.RUNS / f"fleet-run-{time.strftime('%Y%m%d-%H%M%S')}"
    asked = {"nodes": [n.name for n in nodes], "options": recorded(o), "accept_args": o.accept_args}
    if o.resume:
        if not o.out:
            raise UsageError("--resume needs --out: the folder of the run to continue")
        try:
            before = json.loads((out / PLAN).read_text())
        except (OSError, ValueError):
            raise UsageError(f"--resume: {out / PLAN} cannot be read: not a fleet run's folder") from None
        mine = {k: v for k, v in asked["options"].items() if k not in FREE_ON_RESUME}
        theirs = {k: v for k, v in before.get("options", {}).items() if k not in FREE_ON_RESUME}
        if before.get("nodes") != asked["nodes"] or mine != theirs or before.get("accept_args") != o.accept_args:
            raise UsageError(f"--resume: {out} was a run of other nodes or options; give the same, or a new --out")
        job_name = before["job_name"]
    else:
        if o.out:
            results.check_out_folder(out)
        else:
            results.check_folder(results.RUNS, "the default folder for fleet runs", make=True)
        job_name = f"nccl-bench-fleet-{uuid.uuid4().hex[:8]}"
        out.mkdir(parents=True, exist_ok=True)
        (out / PLAN).write_text(json.dumps({**asked, "job_name": job_name, "how": how}, indent=1) + "\n")
    return Plan(o, out, nodes, how, job_name)


def check_accept_args(o: FleetRunOptions) -> None:
    """Each node's accept options, checked here by accept itself before any step: bad ones are one line now, not
    a failure on every node."""
    p = subprocess.run([sys.executable, "-m", "nccl_bench", "accept", "--backend", o.backend, *o.accept_args,
                        "--check-args"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        said = (p.stderr.strip() or p.stdout.strip()).splitlines()
        line = said[-1].removeprefix("error: ") if said else f"exit {p.returncode}"
        raise UsageError(f"accept options after --: {line}")


@dataclass
class Accepted:
    nodes: list[slurmnodes.SlurmNode]  # with an accept file: they go on to the pairs
    failures: dict[slurmnodes.SlurmNode, str]


def accept_nodes(plan: Plan) -> Accepted:
    o, folder = plan.o, plan.out / "accept"
    folder.mkdir(exist_ok=True)
    todo = [n for n in plan.usable if not (folder / f"{n.name}.json").is_file()]
    if len(todo) < len(plan.usable):
        print(f"fleet run: {len(plan.usable) - len(todo)} node(s) accepted before (--resume): kept", flush=True)
    run = [waves.Step(f"accept {n.name}", [*slurmnodes.srun([n], 1, plan.job_name, o.partition, o.srun_extra,
                                                             _minutes(o.accept_timeout)),
                                           sys.executable, "-m", "nccl_bench", "accept", "--backend", o.backend,
                                           "--json", str(folder / f"{n.name}.json"),
                                           "--junit", str(folder / f"{n.name}.xml"), *o.accept_args],
                      o.accept_timeout, plan.out / "logs" / f"accept-{n.name}.log") for n in todo]
    by_key = {f"accept {n.name}": n for n in todo}
    failures: dict[slurmnodes.SlurmNode, str] = {}

    def done(x: waves.Outcome) -> None:
        node = by_key[x.step.key]
        _journal(plan.out, x)
        if (folder / f"{node.name}.json").is_file():
            return
        failures[node] = (f"silent: no accept within {o.accept_timeout:g} s (step stopped; {x.step.log})"
                          if x.code is None else f"its accept step failed (exit {x.code}): {x.last_line()} "
                                                 f"({x.step.log})")
        print(f"fleet run: {node.said()}: {failures[node]}", flush=True)
    if run:
        t0 = time.monotonic()
        print(f"fleet run: accept on {len(run)} node(s)", flush=True)
        waves.run_all(run, o.max_steps, done, cwd=os.getcwd())
        print(f"fleet run: accept done in {time.monotonic() - t0:.0f} s, {len(failures)} without a result",
              flush=True)
    return Accepted([n for n in plan.usable if n not in failures], failures)


def measure_pairs(plan: Plan, accepted: Accepted) -> list[Pair]:
    """Rounds of disjoint pairs among the accepted nodes; the pairs whose step gave no result, as failed pairs. A
    node Slurm takes out of service meanwhile (drained, its slurmd silent) leaves the rounds, named as the node, and
    a pair that failed beside such a node is the node's failure, not the link's."""
    o, folder = plan.o, plan.out / "pairs"
    folder.mkdir(exist_ok=True)
    nodes = accepted.nodes
    rounds = [[(nodes[i], nodes[j]) for i, j in r] for r in partners(len(nodes), o.partners)]
    failed: list[Pair] = []
    if not rounds:
        print(f"fleet run: no pairs: {len(nodes)} node(s) accepted", flush=True)
        return failed
    print(f"fleet run: {sum(map(len, rounds))} pair(s) in {len(rounds)} round(s), "
          f"{min(o.partners, len(nodes) - 1)} partner(s) each", flush=True)
    for k, pairs in enumerate(rounds):
        todo = [(a, b, folder / f"{a.name}-{b.name}.json") for a, b in pairs]
        for a, b, why, log in _pair_round(plan, accepted, todo):
            failed.append(Pair(*sorted((a.host, b.host)), None, "busbw", log, (why,)))
            print(f"fleet run: pair {a.said()} - {b.said()}: {why}", flush=True)
        print(f"fleet run: pair round {k + 1} of {len(rounds)} done", flush=True)
    return failed


def confirm_slow_pairs(plan: Plan, accepted: Accepted, s: judging.Settings, failed: list[Pair]) -> None:
    """Each pair its link would be named for on bandwidth alone, measured again (--remeasure times at most, in
    rounds of disjoint pairs), each time into a file of its own beside the first: the verdict counts a pair's
    fastest measurement (fleet.links.fold), so a link is named only where it was slow every time. A step that
    fails here leaves the pair its measurements so far."""
    folder = plan.out / "pairs"
    by_host = {n.host: n for n in accepted.nodes}
    for t in range(1, plan.o.remeasure + 1):
        files = sorted(str(f) for f in folder.glob("*.json"))
        if not files:
            return
        net = links_mod.judge(outliers.read(files)[1] + failed, s.link_margin, s.link_floor)
        slow = [p for p in links_mod.to_confirm(net, t + 1) if p.a in by_host and p.b in by_host]
        if not slow:
            return
        print(f"fleet run: {len(slow)} slow pair(s) measured again ({t} of {plan.o.remeasure}): "
              + ", ".join(p.name for p in slow[:8]) + (" ..." if len(slow) > 8 else ""), flush=True)
        for pairs in disjoint_rounds([(by_host[p.a], by_host[p.b]) for p in slow]):
            todo = [(a, b, folder / f"{a.name}-{b.name}.again-{t}.json") for a, b in pairs]
            for a, b, why, _ in _pair_round(plan, accepted, todo):
                print(f"fleet run: pair {a.said()} - {b.said()} again: {why}; its first measurement stands",
                      flush=True)


def _pair_round(plan: Plan, accepted: Accepted, pairs: list[tuple[slurmnodes.SlurmNode, slurmnodes.SlurmNode, Path]]
                ) -> list[tuple[slurmnodes.SlurmNode, slurmnodes.SlurmNode, str, str]]:
    """One round of disjoint pairs, each a bench into its file (one that is there is kept: --resume); the pairs
    whose step gave no file, with why and its log, but not those beside a node lost meanwhile (named as the
    node)."""
    o = plan.o
    _leave_out_unwell(plan, accepted, {n for a, b, _ in pairs for n in (a, b)})
    todo = [(a, b, f) for a, b, f in pairs if not f.is_file()
            and a not in accepted.failures and b not in accepted.failures]
    by_key = {f"pair {f.stem}": (a, b, f) for a, b, f in todo}
    lost: list[tuple[slurmnodes.SlurmNode, slurmnodes.SlurmNode, str, str]] = []

    def done(x: waves.Outcome) -> None:
        a, b, f = by_key[x.step.key]
        _journal(plan.out, x)
        if not f.is_file():
            lost.append((a, b, (f"no result within {o.pair_timeout:g} s" if x.code is None else
                                f"its bench step failed (exit {x.code}): {x.last_line()}") + f" ({x.step.log})",
                         str(x.step.log)))
    waves.run_all([_pair_step(plan, a, b, f) for a, b, f in todo], o.max_steps, done, cwd=os.getcwd())
    if lost:
        _leave_out_unwell(plan, accepted, {n for a, b, _, _ in lost for n in (a, b)})
    return [x for x in lost if x[0] not in accepted.failures and x[1] not in accepted.failures]


def disjoint_rounds(pairs: list[tuple]) -> list[list[tuple]]:
    """Pairs in rounds where no node is in two pairs at once, each pair in the first round it fits (greedy)."""
    rounds: list[list[tuple]] = []
    for pair in pairs:
        fits = next((r for r in rounds if not {n for q in r for n in q} & set(pair)), None)
        if fits is None:
            rounds.append([pair])
        else:
            fits.append(pair)
    return rounds


def _leave_out_unwell(plan: Plan, accepted: Accepted, nodes: set[slurmnodes.SlurmNode]) -> None:
    """Nodes Slurm no longer has in service: named as failed nodes, and no more steps for them."""
    said = slurmnodes.now([n for n in nodes if n not in accepted.failures], plan.o.partition)
    for n in sorted(nodes, key=lambda n: n.name):
        if n.name in said and not said[n.name].usable and n not in accepted.failures:
            now = said[n.name]
            accepted.failures[n] = (f"out of service in Slurm during the run: {now.state}"
                                    + (f" ({now.reason})" if now.reason else "")
                                    + (" (not responding: its slurmd is silent)" if "*" in now.state else ""))
            print(f"fleet run: {n.said()}: {accepted.failures[n]}", flush=True)


def _pair_step(plan: Plan, a: slurmnodes.SlurmNode, b: slurmnodes.SlurmNode, file: Path) -> waves.Step:
    o, name = plan.o, file.stem
    argv = [*slurmnodes.srun([a, b], o.ntasks_per_node, plan.job_name, o.partition, o.srun_extra,
                             _minutes(o.pair_timeout)),
            sys.executable, "-m", "nccl_bench", "bench", "--backend", o.backend, "-b", str(o.bytes), "-e",
            str(o.bytes), "-n", str(o.iters), "-w", "2", "-I", "1", "-J", str(file)]
    return waves.Step(f"pair {name}", argv, o.pair_timeout, plan.out / "logs" / f"pair-{name}.log")


def _new_folder(out: Path, name: str) -> Path:
    """verdict, then verdict-2, ...: a resumed run judges again, and no verdict is written over."""
    n = 1
    while (out / (name if n == 1 else f"{name}-{n}")).exists():
        n += 1
    return out / (name if n == 1 else f"{name}-{n}")


def _minutes(seconds: float) -> int:
    """Slurm's own time limit on a step, a minute past ours: Slurm ends it even if this process is killed."""
    return int(seconds // 60) + 2


def _journal(out: Path, x: waves.Outcome) -> None:
    with open(out / JOURNAL, "a") as f:
        f.write(json.dumps({"step": x.step.key, "exit": x.code, "seconds": round(x.seconds, 3),
                            "at": time.time()}) + "\n")
