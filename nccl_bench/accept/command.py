"""`accept`: is this node fit to join the fleet? doctor, bandwidth, per-GPU copies, init and a short
stress, each judged against a profile: a built-in one for a known machine type
(nccl_bench/records/profiles/*.json), else one derived from what the node reports (accept.derive),
or a golden node's (`--profile FILE` written by `--record-baseline FILE`); JSON and JUnit.

Each step is its own bounded job (nccl_bench.job.jobs), so a hang in one step is recorded as
that step's failure and the others still run. Error counters are read before and after
and judged on the difference.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


from nccl_bench.accept import derive
from nccl_bench.accept import network
from nccl_bench.core import gpucounters
from nccl_bench.core import junit
from nccl_bench.records import profiles
from nccl_bench.accept import selection
from nccl_bench.accept import topology
from nccl_bench.accept import verdicts
from nccl_bench.accept import golden as golden_mod
from nccl_bench.core import launch, results, stats, sysinfo
from nccl_bench import records
from nccl_bench.job.cli import Parser, add_launch_args, prog
from nccl_bench.job.options import check_launch
from nccl_bench.comm import gpu_count
from nccl_bench.core.errors import EXIT_FAILED, EXIT_USAGE, UsageError
from nccl_bench.job.jobs import JobFailed, run_result
import stress  # run as `python -m stress`: a dependency the layer test sees


@dataclass
class AcceptOptions:
    backend: str | None = None
    nranks: int | None = None
    profile: str | None = None
    json: str | None = None
    junit: str | None = None
    init_rounds: int = 10
    stress_rounds: int = 20
    step_timeout: float = 300.0  # seconds for each step's job
    locate: bool = False  # on FAIL, run `locate` to name the GPU, link or node
    margin: float = 0.85  # a derived profile's floors: this x the expectation
    record_baseline: str | None = None  # write the run as a golden node's profile here
    workload: list[str] | None = None  # a job's dumps, trace or workload file: replayed and judged
    workload_max_slowdown: float = 1.25  # the replay's sequence may take this x the job's own
    network: str | None = None  # a bench file across the nodes: its busbw judged by this node's NICs

    def __post_init__(self):
        self.backend = check_launch(self.backend, self.nranks)
        for name in ("init_rounds", "stress_rounds"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not self.step_timeout > 0:
            raise UsageError(f"--step-timeout must be above 0 seconds, got {self.step_timeout:g}")
        if not 0 < self.margin <= 1:
            raise UsageError(f"--margin must be in (0, 1], got {self.margin:g}")
        if not self.workload_max_slowdown > 0:
            raise UsageError(f"--workload-max-slowdown must be above 0, got {self.workload_max_slowdown:g}")
        results.check_writable(self.json)
        results.check_writable(self.record_baseline, "--record-baseline")
        junit.check_writable(self.junit)

    def job_args(self) -> list[str]:
        return ["--backend", self.backend] + (["--nranks", str(self.nranks)] if self.nranks else [])


def parser() -> Parser:
    p = Parser(prog=prog("accept"), description="doctor + bandwidth + init + short stress, judged by a profile")
    add_launch_args(p)
    p.add_argument("--profile", default=None, help="profile name or JSON file (default: chosen from GPU model and count)")
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
    return p


# --- the steps: each returns (measurements, step record) ------------------------------------------
def step_doctor(o: AcceptOptions) -> dict:
    return {"doctor": run_result(["nccl_bench", "doctor", *o.job_args()], o.step_timeout, ok_codes=(0, 1)).rows}


def step_bench(o: AcceptOptions, profile: profiles.Profile) -> dict:
    """busbw per (collective, size) (the median over cycles: 3 when recording a baseline, for the spread)."""
    names = sorted({f.collective for f in profile.busbw} | {"all_reduce"})
    top = max([f.bytes for f in profile.busbw] + [8])
    cycles = 3 if o.record_baseline else 1
    res = run_result(["nccl_bench", "bench", *o.job_args(), "--collective", ",".join(names), "-b", "8",
                    "-e", str(top), "-f", "2", "-n", "20", "-w", "5", "-c", "1", "-N", str(cycles)],
                     o.step_timeout, ok_codes=(0, 1))
    rows = res.every_cycle()
    per = {}
    for r in rows:
        per.setdefault((r["collective"], r["size"]), []).append(r)
    busbw = {k: stats.percentile([r["out_of_place"]["bus_bw"] for r in v], 0.5) for k, v in per.items()}
    spread = {k: (v[0].get("spread_pct") or {}).get("out_of_place") for k, v in per.items()}
    eight = [r["out_of_place"]["time"] for r in rows if r["collective"] == "all_reduce" and r["size"] == 8]
    wrong = sum((r[p].get("nwrong") or 0) for r in rows for p in ("out_of_place", "in_place"))
    return {"busbw": busbw, "busbw_spread_pct": spread, "wrong": wrong,
            **({"latency_us_8B": stats.percentile(eight, 0.5)} if eight else {})}


def step_copies(o: AcceptOptions) -> dict:
    """Every local GPU's device, host-to-device and device-to-host copy; the slowest GPU's counts."""
    rows = run_result(["nccl_bench.measure.copies"], o.step_timeout).rows
    out = {"copy_GBps": {}, "copy_rows": rows}
    for key in ("device", "h2d", "d2h"):
        worst = min(rows, key=lambda r: r[f"{key}_GBps"])
        out["copy_GBps"][f"{key}_GBps"] = worst[f"{key}_GBps"]
        out["copy_GBps"][f"{key}_gpu"] = worst["gpu"]
    return out


def step_init(o: AcceptOptions) -> dict:
    rows = run_result(["nccl_bench", "init", *o.job_args(), "--init", "scoped", "--rounds", str(o.init_rounds)],
                      o.step_timeout, ok_codes=(0, 1)).rows
    inits = [r["init_s"] for r in rows if not r.get("warmup") and r["outcome"] == "ok" and r["init_s"]]
    failed = sum(1 for r in rows if not r.get("warmup") and r["outcome"] != "ok")
    out = {"init_failures": failed}
    if inits:
        out["init_ms_p50"] = stats.percentile(inits, 0.5) * 1e3
    return out


def step_stress(o: AcceptOptions) -> dict:
    res = run_result([stress.__name__, *o.job_args(), "--init", "scoped", "--rounds", str(o.stress_rounds)],
                     o.step_timeout, json_flag="--summary-json", ok_codes=(0, 1))
    return {"stress_failures": int(res.top["failures"])}


def step_replay(o: AcceptOptions) -> dict:
    """The workload replayed: the sequence's median time per pass, the trace's, wrong values."""
    res = run_result(["nccl_bench", "replay", *o.workload, *o.job_args(), "-n", "10", "-w", "2"], o.step_timeout,
                     ok_codes=(0, 1))
    seq = res.block("sequence")
    spread = ((seq["here_p75_us"] - seq["here_p25_us"]) / seq["here_median_us"]) if seq["here_median_us"] else None
    return {"replay_sequence_us": seq["here_median_us"], "replay_trace_us": seq["trace_us"],
            "replay_wrong": sum(r["nwrong"] for r in res.rows), "replay_workload": res.block("replay")["digest"],
            "replay_spread": spread, "replay_max_slowdown": o.workload_max_slowdown}


def check_workload(o: AcceptOptions) -> None:
    """The replay reads and checks the workload (`replay --list`) before any step runs: its bad input is
    accept's, one line and exit 2."""
    try:
        run_result(["nccl_bench", "replay", *o.workload, "--list"], o.step_timeout)
    except JobFailed as e:
        if e.code == EXIT_USAGE:
            raise UsageError(e.last_line) from None
        raise UsageError(f"--workload: the replay could not read it ({e.reason})") from None


def run_steps(o: AcceptOptions, profile: profiles.Profile) -> tuple[dict, list[dict]]:
    m, steps = {"counters_before": gpucounters.read_counters()}, []
    todo = [("doctor", lambda: step_doctor(o)), ("bench", lambda: step_bench(o, profile))]
    if o.backend != "gloo" and (profile.copy_min_GBps or o.record_baseline):
        todo.append(("copies", lambda: step_copies(o)))
    todo += [("init", lambda: step_init(o)), ("stress", lambda: step_stress(o))]
    if o.workload:
        todo.append(("replay", lambda: step_replay(o)))
    for name, fn in todo:
        print(f"accept: {name} ...", flush=True)
        try:
            m.update(fn())
            steps.append({"step": name, "status": "ran"})
        except JobFailed as e:
            steps.append({"step": name, "status": "failed", "reason": e.reason})
            print(f"accept: {name} failed: {e.reason}", flush=True)
    m["counters_after"] = gpucounters.read_counters()
    return m, steps


def step_verdicts(steps: list[dict]) -> list[verdicts.Verdict]:
    """A step whose job failed is a failed check of its own, with the job's reason."""
    return [verdicts.Verdict(f"step {s['step']}", "fail", None, "job completes", s["reason"])
            for s in steps if s["status"] == "failed"]


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if launch.detect() is not None:
        raise UsageError("accept starts its own jobs on this node: run it without torchrun/srun/mpirun")
    o = AcceptOptions(backend=a.backend, nranks=a.nranks, profile=a.profile, json=a.json, junit=a.junit,
                      init_rounds=a.init_rounds, stress_rounds=a.stress_rounds, step_timeout=a.step_timeout,
                      locate=a.locate, margin=a.margin, record_baseline=a.record_baseline, workload=a.workload,
                      workload_max_slowdown=a.workload_max_slowdown, network=a.network)
    if o.workload:  # read and checked now: bad input is one line before any step runs
        check_workload(o)
    across = network.verdict(o.network, o.margin) if o.network else None  # bad input: one line, nothing run
    facts = topology.read() if o.backend != "gloo" else None
    names = selection.detected_gpu_names()
    profile = selection.choose(o.profile, o.backend, names, facts, o.margin)
    nranks = o.nranks or (gpu_count() if o.backend != "gloo" else 2)
    print(f"accept: profile {profile.name} ({profile.origin}), backend {o.backend}, {nranks} rank(s)", flush=True)
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
    if o.json:
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
    print(f"accept {'PASS' if ok else 'FAIL'} against profile {profile.name} ({profile.origin})")
    if o.record_baseline:
        write_baseline(o, m, names, facts)
    if not ok and o.locate:
        step_locate(o, profile)
    return 0 if ok else EXIT_FAILED


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


def step_locate(o: AcceptOptions, profile: profiles.Profile) -> None:
    """After a FAIL: locate's suspects, each with its evidence (locate's own exit 1 means it found some)."""
    import json
    import tempfile
    print("accept: locate ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="nccl_bench_accept_") as tmp:
        spec = profile.path or profile.name
        if not profile.path and profile.origin != "built-in":  # a derived profile exists only in memory
            spec = str(Path(tmp) / f"{profile.name}.json")
            Path(spec).write_text(json.dumps(profiles.to_doc(profile)))
        argv = ["nccl_bench", "locate", "--backend", o.backend, "--profile", spec,
                *(["--nranks", str(o.nranks)] if o.nranks else [])]
        try:
            res = run_result(argv, o.step_timeout, ok_codes=(0, EXIT_FAILED))
        except JobFailed as e:
            print(f"accept: locate failed: {e.reason}", flush=True)
            return
    found = res.meta["suspects"]
    for s in found:
        print(f"SUSPECT {s['who']}: " + "; ".join(s["evidence"]))
    print(f"accept: locate: {len(found) or 'no'} suspect(s)", flush=True)


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
