"""accept's steps, each a bounded job of its own (nccl_bench.job.jobs) whose result is read through
nccl_bench.records: doctor, bench (busbw per collective and size), the GPUs' copies, init latency, a short
scoped stress, a workload's replay; what each measured goes into one dict the verdicts judge. Before any
step: the profile's sizes fit this backend, and the workload reads. After a FAIL: locate, when asked."""
from __future__ import annotations

from pathlib import Path

from nccl_bench.accept import verdicts
from nccl_bench.accept.options import AcceptOptions
from nccl_bench.core import gpucounters, stats
from nccl_bench.core.errors import EXIT_FAILED, EXIT_USAGE, UsageError
from nccl_bench.core.heartbeat import Heartbeat
from nccl_bench.job.jobs import JobFailed, run_result
from nccl_bench.measure import collectives, fits
from nccl_bench.records import profiles

STRESS = "stress.__main__"  # `python -m stress` as a module path: the layer test sees the dependency in it


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
    latency = {"latency_us_8B": stats.percentile(eight, 0.5)} if eight else {}
    if (res.meta.get("bench") or {}).get("nranks") == 1:  # busbw is 0 by nccl-tests' formula: no floor applies
        return {"busbw_skipped": "one rank: busbw is 0 by nccl-tests' formula", "wrong": wrong, **latency}
    return {"busbw": busbw, "busbw_spread_pct": spread, "wrong": wrong, **latency}


def step_copies(o: AcceptOptions) -> dict:
    """Every local GPU's device, host-to-device and device-to-host copy; the slowest GPU's counts."""
    rows = run_result(["nccl_bench", "copies"], o.step_timeout).rows
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
    res = run_result([STRESS, *o.job_args(), "--init", "scoped", "--rounds", str(o.stress_rounds)],
                     o.step_timeout, json_flag="--summary-json", ok_codes=(0, 1))
    return {"stress_failures": int(res.top["failures"])}


def step_replay(o: AcceptOptions) -> dict:
    """The workload replayed: the sequence's median time per pass, the trace's, wrong values."""
    res = run_result(["nccl_bench", "replay", *o.workload, *o.job_args(), "-n", "10", "-w", "2"], o.step_timeout,
                     ok_codes=(0, 1))
    seq = res.block("sequence")
    spread = ((seq["here_p75_us"] - seq["here_p25_us"]) / seq["here_median_us"]) if seq["here_median_us"] else None
    # against the job's own trace, like against like: where the trace's sum is of ready times and the replay saw its
    # kernels, the replay's ready times (the golden path compares per-call times, here_median_us, node to node)
    ready = seq.get("ratio_of") == "ready" and seq.get("here_ready_us")
    return {"replay_sequence_us": seq["here_median_us"], "replay_trace_us": seq["trace_us"],
            "replay_sequence_ready_us": seq["here_ready_us"] if ready else None,
            "replay_wrong": sum(r["nwrong"] for r in res.rows), "replay_workload": res.block("replay")["digest"],
            "replay_spread": spread, "replay_max_slowdown": o.workload_max_slowdown}


def check_profile_fits(profile: profiles.Profile, backend: str, nranks: int) -> None:
    """Every size the profile would have bench measure fits this backend and machine: checked whole before
    the first step, not found out at the bench step."""
    for f in profile.busbw:
        if backend == "gloo" and f.bytes > fits.GLOO_MAX_BYTES:
            raise UsageError(f"profile {profile.name}: busbw {f.collective} at {f.bytes} bytes is beyond the CPU "
                             f"(gloo) model's {fits.GLOO_MAX_BYTES >> 20} MiB")
        if f.collective in collectives.NAMES and (why := fits.why_not(
                backend, fits.need_bytes([f.collective], f.bytes, ["float"], max(nranks, 1)), max(nranks, 1))):
            raise UsageError(f"profile {profile.name}: busbw {f.collective} at {f.bytes} bytes: {why}")


def check_workload(o: AcceptOptions) -> None:
    """The replay reads and checks the workload (`replay --list`) before any step runs: its bad input is
    accept's, one line and exit 2."""
    try:
        run_result(["nccl_bench", "replay", *o.workload, "--list"], o.step_timeout)
    except JobFailed as e:
        if e.code == EXIT_USAGE:
            raise UsageError(f"--workload: {e.last_line.removeprefix('error: ')}") from None
        raise UsageError(f"--workload: the replay could not read it ({e.reason})") from None


def run_steps(o: AcceptOptions, profile: profiles.Profile) -> tuple[dict, list[dict]]:
    m, steps = {"counters_before": gpucounters.read_counters()}, []
    todo = [("doctor", lambda: step_doctor(o)), ("bench", lambda: step_bench(o, profile))]
    if o.backend != "gloo" and (profile.copy_min_GBps or o.record_baseline or "copies" in (o.steps or ())):
        todo.append(("copies", lambda: step_copies(o)))
    todo += [("init", lambda: step_init(o)), ("stress", lambda: step_stress(o))]
    if o.workload:
        todo.append(("replay", lambda: step_replay(o)))
    steps += [{"step": name, "status": "not run"} for name, _ in todo if not o.runs(name)]
    todo = [(name, fn) for name, fn in todo if o.runs(name)]
    if steps:  # their checks are SKIP, "not measured in this run"
        print(f"accept: not run (--steps): {', '.join(s['step'] for s in steps)}", flush=True)
    with Heartbeat("accept") as said:  # a step's job may run for minutes: a line every 10 s says which
        for name, fn in todo:
            print(f"accept: {name} ...", flush=True)
            said.now = f"{name} running"
            try:
                m.update(fn())
                steps.append({"step": name, "status": "ran"})
            except JobFailed as e:
                steps.append({"step": name, "status": "failed", "reason": e.reason})
                print(f"accept: {name} failed: {e.reason}", flush=True)
    m["counters_after"] = gpucounters.read_counters()
    return m, steps


def not_run(steps: list[dict]) -> list[str]:
    """The steps --steps left out."""
    return [s["step"] for s in steps if s["status"] == "not run"]


def step_verdicts(steps: list[dict]) -> list[verdicts.Verdict]:
    """A step whose job failed is a failed check of its own, with the job's reason."""
    return [verdicts.Verdict(f"step {s['step']}", "fail", None, "job completes", s["reason"])
            for s in steps if s["status"] == "failed"]


def step_locate(o: AcceptOptions, profile: profiles.Profile) -> None:
    """After a FAIL: locate's suspects, each with its evidence (locate's own exit 1 means it found some)."""
    import json
    from nccl_bench.core import scratch
    print("accept: locate ...", flush=True)
    with scratch.folder("accept") as tmp:
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
