"""The acceptance judge: profile thresholds x measured values -> one verdict per check.

`judge(profile, measurements)` is the only place thresholds are compared. Measurements
are plain data, so bench, init and stress results plug in without this module knowing
how they were taken:

    {
      "busbw": {("all_reduce", 1073741824): 340.2, ...},  # GB/s, out-of-place, per (collective, bytes)
      "latency_us_8B": 14.1,         # 8-byte all_reduce time per operation, microseconds
      "init_ms_p50": 35.0,           # median communicator init (ID exchange + init), milliseconds
      "wrong": 0,                    # wrong elements over every checked result
      "stress_failures": 0,          # failed rounds in the short stress run
      "counters_before": {"gpu0/nvlink_crc": 0, ...},  # core.gpucounters.read_counters() before the runs
      "counters_after":  {"gpu0/nvlink_crc": 0, ...},  # ... and after
      "doctor": [check dicts],       # optional: health checks; any "fail" fails the verdict
      "copy_GBps": {"device_GBps": 2900, "device_gpu": 3, "h2d_GBps": ..., ...},  # slowest GPU's copies
      "busbw_skipped": "one rank: ...",  # optional: why busbw was not measured (its floors are skips)
    }

In JSON (`load_measurements`), "busbw" may instead be a list of rows
{"collective", "bytes", "busbw"}. A category missing from the measurements entirely is
a skip ("not measured in this run"); a threshold whose entry is missing inside a measured
category is a fail: a floor nobody checked must not pass.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from tabulate import tabulate

from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.records.profiles import Profile
from nccl_bench.records.metrics import size_label  # the fleet names its metrics the same way


@dataclass(frozen=True)
class Verdict:
    check: str
    status: str  # pass | fail | skip
    measured: float | int | None
    required: str  # e.g. ">= 312.1 GB/s"
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status != "fail"

    def message(self) -> str:
        m = "not measured" if self.measured is None else _fmt(self.measured)
        return f"{self.status.upper()} {self.check}: measured {m}, required {self.required}" + (
            f" ({self.detail})" if self.detail else "")

    def as_dict(self) -> dict:
        return asdict(self)


def _fmt(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _at_most(check: str, measured, limit, unit: str, present: bool) -> Verdict:
    required = f"<= {_fmt(limit)}{unit}"
    if not present:
        return Verdict(check, "skip", None, required, "not measured in this run")
    if measured is None:
        return Verdict(check, "fail", None, required, "no value")
    return Verdict(check, "pass" if measured <= limit else "fail", measured, required)


def judge_counters(before: dict, after: dict, max_increase: dict) -> list[Verdict]:
    """One verdict per counter name in the profile, on the increase summed over devices."""
    out = []
    for name, allowed in max_increase.items():
        keys = sorted(k for k in set(before) | set(after) if k.rsplit("/", 1)[-1] == name)
        check, required = f"counter {name}", f"increase <= {allowed}"
        if not keys:
            out.append(Verdict(check, "skip", None, required, "not reported by this machine"))
            continue
        unread = [k for k in keys if k not in before or k not in after]
        if unread:
            out.append(Verdict(check, "fail", None, required, f"not read before and after: {', '.join(unread)}"))
            continue
        deltas = {k: after[k] - before[k] for k in keys}
        went_down = [k for k, d in deltas.items() if d < 0]
        growth = sum(d for d in deltas.values() if d > 0)
        detail = ", ".join(f"{k} +{d}" for k, d in deltas.items() if d > 0)
        if went_down:
            out.append(Verdict(check, "fail", growth, required,
                               f"went down (reset or driver reload during the run?): {', '.join(went_down)}"))
        else:
            out.append(Verdict(check, "pass" if growth <= allowed else "fail", growth, required, detail))
    return out


def judge(profile: Profile, m: dict) -> list[Verdict]:
    """Every threshold of `profile` against the measurements `m` (shape in the module doc)."""
    out = []
    busbw = m.get("busbw")
    for f in profile.busbw:
        check = f"busbw {f.collective} {size_label(f.bytes)}"
        required = f">= {_fmt(f.min_GBps)} GB/s"
        if busbw is None:
            out.append(Verdict(check, "skip", None, required, m.get("busbw_skipped") or "not measured in this run"))
            continue
        got = busbw.get((f.collective, f.bytes))
        if got is None:
            out.append(Verdict(check, "fail", None, required, "this size was not measured"))
        else:
            out.append(Verdict(check, "pass" if got >= f.min_GBps else "fail", got, required))
    copies = m.get("copy_GBps")
    for key, floor in profile.copy_min_GBps.items():
        check, required = f"copy {key}", f">= {_fmt(floor)} GB/s"
        got = (copies or {}).get(f"{key}_GBps")
        if copies is None:
            out.append(Verdict(check, "skip", None, required, "not measured in this run"))
        elif got is None:
            out.append(Verdict(check, "fail", None, required, "not measured"))
        else:
            out.append(Verdict(check, "pass" if got >= floor else "fail", round(got, 1), required,
                               f"slowest: GPU {copies.get(f'{key}_gpu')}"))
    out.append(_at_most("latency all_reduce 8 B", m.get("latency_us_8B"), profile.latency_8B_max_us, " us",
                        "latency_us_8B" in m))
    out.append(_at_most("init median", m.get("init_ms_p50"), profile.init_max_ms, " ms", "init_ms_p50" in m))
    out.append(_at_most("wrong results", m.get("wrong"), profile.wrong_max, "", "wrong" in m))
    out.append(_at_most("stress failures", m.get("stress_failures"), profile.stress_failures_max, "",
                        "stress_failures" in m))
    if profile.counters_max_increase:
        if "counters_before" in m or "counters_after" in m:
            out += judge_counters(m.get("counters_before") or {}, m.get("counters_after") or {},
                                  profile.counters_max_increase)
        else:
            out += [Verdict(f"counter {n}", "skip", None, f"increase <= {v}", "not measured in this run")
                    for n, v in profile.counters_max_increase.items()]
    if "replay_sequence_us" in m:
        out += judge_replay(profile, m)
    if "doctor" in m:
        failed = sorted({c["name"] for c in m["doctor"] if c["status"] == "fail"})
        out.append(Verdict("doctor", "fail" if failed else "pass", len(failed), "0 failed checks",
                           ", ".join(failed)))
    else:
        out.append(Verdict("doctor", "skip", None, "0 failed checks", "not measured in this run"))
    return out


def judge_replay(profile: Profile, m: dict) -> list[Verdict]:
    """accept --workload: the replay's sequence time against a golden node's replay of the same workload
    (the profile's), else against the job's own trace x --workload-max-slowdown; and its wrong values."""
    seq, check = m["replay_sequence_us"], "replay sequence"
    golden = profile.replay if profile.replay.get("workload") == m.get("replay_workload") else None
    if golden:
        limit, source = golden["sequence_max_us"], f"golden node's replay ({profile.name})"
    elif m.get("replay_trace_us"):
        limit = m["replay_trace_us"] * m["replay_max_slowdown"]
        source = f"the job's own trace {m['replay_trace_us']:.1f} us x {m['replay_max_slowdown']:g}"
        if m.get("replay_sequence_ready_us"):  # the job's calls' ready times: the replay's kernels, the same way
            seq, source = m["replay_sequence_ready_us"], source + " (ready times on both sides)"
    else:
        return [Verdict(check, "skip", round(seq, 1), "-", "the trace has no durations and the profile no golden "
                        "replay of this workload"),
                _at_most("replay wrong results", m.get("replay_wrong"), 0, "", True)]
    return [Verdict(check, "pass" if seq <= limit else "fail", round(seq, 1), f"<= {limit:.1f} us", source),
            _at_most("replay wrong results", m.get("replay_wrong"), 0, "", True)]


def all_passed(verdicts: list[Verdict]) -> bool:
    return all(v.passed for v in verdicts)


def table(verdicts: list[Verdict]) -> str:
    rows = [("PASS" if v.status == "pass" else v.status.upper(), v.check,
             "-" if v.measured is None else _fmt(v.measured), v.required, v.detail) for v in verdicts]
    return tabulate(rows, headers=("result", "check", "measured", "required", "detail"), tablefmt="simple")


def load_measurements(path: str | Path) -> dict:
    """Measurements from JSON: "busbw" as rows [{collective, bytes, busbw}] or {"coll:bytes": v}."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"measurements {path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"measurements {path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"measurements {path}: must be a JSON object")
    rows = doc.get("busbw")
    if isinstance(rows, list):
        try:
            doc["busbw"] = {(r["collective"], int(r["bytes"])): float(r["busbw"]) for r in rows}
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"measurements {path}: field 'busbw' rows need collective, bytes, busbw ({e})") from None
    elif isinstance(rows, dict):
        try:
            doc["busbw"] = {(k.split(":")[0], int(k.split(":")[1])): float(v) for k, v in rows.items()}
        except (IndexError, ValueError) as e:
            raise UsageError(f"measurements {path}: field 'busbw' keys must look like 'all_reduce:1048576' "
                             f"({e})") from None
    return doc


def main(argv: list[str]) -> int:
    """python -m nccl_bench.accept.verdicts --profile NAME|PATH MEASUREMENTS.json [--junit PATH]"""
    from nccl_bench.core import junit
    from nccl_bench.records import profiles
    from nccl_bench.job.cli import Parser
    p = Parser(prog="python -m nccl_bench.accept.verdicts", description="judge measurements against a hardware profile")
    p.add_argument("measurements", help="JSON file of measurements (shape: nccl_bench/accept/verdicts.py)")
    p.add_argument("--profile", required=True, help="built-in profile name or path to a profile JSON file")
    p.add_argument("--junit", metavar="PATH", default=None, help="also write JUnit XML (never overwritten)")
    a = p.parse_args(argv)
    junit.check_writable(a.junit)
    profile = profiles.load(a.profile)
    verdicts = judge(profile, load_measurements(a.measurements))
    print(table(verdicts))
    for v in verdicts:
        if v.status == "fail":
            print(v.message())
    if a.junit:
        print(f"wrote {junit.write(a.junit, junit.suite_from_verdicts(f'accept.{profile.name}', verdicts))}")
    ok = all_passed(verdicts)
    print(f"accept {'PASS' if ok else 'FAIL'} against profile {profile.name}")
    return 0 if ok else EXIT_FAILED


if __name__ == "__main__":
    from nccl_bench.job.runner import guarded
    sys.exit(guarded(lambda: main(sys.argv[1:])))
