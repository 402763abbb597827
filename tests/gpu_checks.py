"""The GPU checks a release must pass, as data: each one's name, the GPUs it needs, its time bound, what it
shows, how it runs and the judge of its outcome.

A check runs either a command of this project (`argv`, for `python`; `{tmp}` is the check's own folder)
or a script under tests/gpu/ that sets up what the check needs (nccl-tests built beside us, a job of its
own) and prints a verdict line. The judge is one function per check kind below; it raises AssertionError
saying what is wrong and returns the headline number.

    python3 tests/gpu/release.py --list            # every check, its GPUs and minutes
    python3 tests/gpu/release.py                   # every check this machine has the GPUs for
    python3 tests/gpu/release.py bench stress      # the checks whose names hold either word
tests/test_gpu.py runs the command checks under pytest (skipped with a reason without the GPUs).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class GpuCheck:
    name: str
    gpus: int  # at least this many
    timeout: float  # seconds
    shows: str  # what a pass means, in one line
    argv: list = field(default_factory=list)  # python ARGV... (a command check)
    script: str | None = None  # bash tests/gpu/SCRIPT (a script check: its output holds the verdict line)
    expect: str = "exit0"  # the judge (JUDGES)
    exit_code: int = 0
    env: dict = field(default_factory=dict)
    # why it runs on fewer GPUs than the machine has; "": on every GPU (a 2-GPU pass is no evidence for 4)
    fewer: str = ""

    def command(self, tmp: Path) -> list[str]:
        return [a.replace("{tmp}", str(tmp)) for a in self.argv]


def _journal(argv) -> list[dict]:
    rounds = [json.loads(line) for line in open(argv[argv.index("--journal") + 1])]
    return [r for r in rounds if r.get("type") == "round"]


def machine_gpus() -> int:
    import subprocess
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in listed.splitlines())


def judge_exit0(check, argv, out) -> str:
    return "exit 0"


def judge_main_job(check, argv, out) -> str:
    """The README's main job: every round on every GPU passed, and each rank's start was said apart from them."""
    lines = [json.loads(line) for line in open(argv[argv.index("--journal") + 1])]
    nranks, asked = lines[0]["options"]["nranks"], argv[argv.index("--rounds") + 1]
    rounds = [r for r in lines if r.get("type") == "round"]
    assert nranks == machine_gpus(), f"ran {nranks} ranks on a machine of {machine_gpus()} GPUs"
    bad = [(r["round"], r["verdict"], (r.get("diagnosis") or "")[:200]) for r in rounds if r["verdict"] != "ok"]
    assert len(rounds) == int(asked) and not bad, f"{len(rounds)} rounds, failed: {bad[:3]}"
    start = [n for n in lines if n.get("type") == "start"][0]["ranks"]
    took = [s["seconds"] for s in start]
    return f"{len(rounds)}/{asked} rounds ok on {nranks} GPUs; start {min(took):.2f}-{max(took):.2f} s per rank"


def judge_duration_each_mode(check, argv, out) -> str:
    """--duration: every rank ended each mode after the same round (the mode's `duration` line, its rounds 0 to
    that one, each with every rank's record), then the next mode ran; every round ok."""
    lines = [json.loads(line) for line in open(argv[argv.index("--journal") + 1])]
    nranks, modes = lines[0]["options"]["nranks"], lines[0]["options"]["init"]
    assert nranks == machine_gpus(), f"ran {nranks} ranks on a machine of {machine_gpus()} GPUs"
    assert lines[-1].get("type") == "end", f"the journal ends with {lines[-1].get('type')!r}, not its end line"
    ended = {n["mode"]: n["after_round"] for n in lines if n.get("type") == "duration"}
    assert sorted(ended) == sorted(modes), f"modes its --duration ended: {sorted(ended)} of {modes}"
    rounds = [r for r in lines if r.get("type") == "round"]
    said = []
    for m in modes:
        mine = sorted(r["round"] for r in rounds if r["mode"] == m)
        assert mine == list(range(ended[m] + 1)), f"{m}: rounds {mine[:3]}..{mine[-3:]}, ended after {ended[m]}"
        bad = [(r["round"], r["verdict"]) for r in rounds if r["mode"] == m and r["verdict"] != "ok"]
        assert not bad, f"{m}: failed rounds {bad[:5]}"
        short = [r["round"] for r in rounds if r["mode"] == m and len([x for x in r["ranks"] if x]) != nranks]
        assert not short, f"{m}: a rank's record missing in rounds {short[:5]}"
        said.append(f"{m} {len(mine)}")
    return f"each mode ended after the same round on all {nranks} ranks: {', '.join(said)} rounds, all ok"


def judge_stale_round_1_then_ok(check, argv, out) -> str:
    rounds = [json.loads(line) for line in open(argv[1])]
    ok = [all(e["ok"] for e in r["ranks"]) for r in rounds]
    assert ok == [True, False, True], ok
    failed = rounds[1]["ranks"]
    assert all(e["error"]["kind"] == "hang" for e in failed)
    assert len({tuple(e["evidence"]["fingerprints"]) for e in failed}) > 1, "the ranks should disagree on the IDs"
    return "round 1 stale (hang), the ranks' IDs differ; round 2 ok"


def judge_bench_exact(check, argv, out) -> str:
    from nccl_bench import records
    from nccl_bench.measure import collectives
    rows = records.load(argv[argv.index("--json") + 1]).every_cycle()
    asked = argv[argv.index("--collective") + 1]
    assert asked == "all" or {r["collective"] for r in rows} == set(asked.split(","))
    assert all(r[p]["nwrong"] in (0, None) for r in rows for p in ("out_of_place", "in_place"))
    assert all(r["out_of_place"]["bus_bw"] >= 0 and r["out_of_place"]["time"] > 0 for r in rows)
    if "--algo" in argv:
        assert {r["algo"] for r in rows} == {"ring", "tree"}
        fit = {c for c in collectives.NAMES if not collectives.get(c).unfit(rows[0]["nranks"])}
        assert {r["collective"] for r in rows} == fit
        # NCCL's word for the algorithm it used, "p2p" for point-to-point, None where not reported
        assert all(r["algo_confirmed"] in (None, "p2p") or r["algo_confirmed"].lower() == r["algo"] for r in rows)
        # recorded at every size's sync launch: each row of a collective NCCL picks an algorithm for has it
        assert all(r["algo_confirmed"] for r in rows if collectives.get(r["collective"]).nccl_name is not None)
    return f"{len(rows)} rows, 0 wrong"


def judge_corrupt_round_1(check, argv, out) -> str:
    rounds = _journal(argv)
    assert [r["verdict"] for r in rounds] == ["ok", "wrong", "ok"], [r["verdict"] for r in rounds]
    assert "corrupted at the source" in rounds[1]["diagnosis"]
    return "round 1 wrong, named corrupted at the source"


def judge_behind_hang_round_10(check, argv, out) -> str:
    rounds = _journal(argv)
    assert [r["round"] for r in rounds] == list(range(30))
    assert [r["round"] for r in rounds if r["verdict"] != "ok"] == [10], [r["verdict"] for r in rounds]
    assert "rank 1 never entered verify" in rounds[10]["diagnosis"]
    assert all(r["destroy_ms"] is not None for r in rounds if r["verdict"] == "ok")
    assert all(x["teardown_s"] is not None for r in rounds for x in r["ranks"])
    assert "ncclCommDestroy joins NCCL's proxy threads" in out
    return "30 rounds once each, only round 10 hung"


def judge_same_group_stale(check, argv, out) -> str:
    rounds = _journal(argv)
    assert [(r["mode"], r["verdict"] == "ok") for r in rounds] == [
        ("stock", True), ("stock", False), ("scoped", True), ("scoped", True)], [r["verdict"] for r in rounds]
    assert rounds[1]["stale"] and rounds[1]["diagnosis"].startswith("stale ID: "), rounds[1]["diagnosis"]
    assert all(s["from"] == "round 0" for s in rounds[1]["stale"])
    return "stock round 1 read round 0's ID; scoped 2/2"


def judge_accept_pass(check, argv, out) -> str:
    from nccl_bench import records
    res = records.load(argv[argv.index("--json") + 1])
    assert res.meta["verdict"] == "PASS", [r for r in res.rows if r.get("status") == "fail"]
    ranks = re.search(r"^accept: profile .*, (\d+) rank\(s\)$", out, re.M)
    assert ranks and int(ranks.group(1)) == machine_gpus(), f"accept ran {ranks and ranks.group(1)} ranks"
    return f"PASS against {res.meta.get('profile')} ({res.meta.get('profile_origin')}) on {ranks.group(1)} GPUs"


def judge_locate_healthy(check, argv, out) -> str:
    from nccl_bench import records
    res = records.load(argv[argv.index("--json") + 1])
    assert res.meta["verdict"] == "HEALTHY" and not res.meta.get("suspects"), res.meta.get("suspects")
    bws = [r["busbw"] for r in res.rows]
    return f"HEALTHY, {len(bws)} pairs at {min(bws):.0f}-{max(bws):.0f} GB/s" if bws else "HEALTHY (one GPU)"


def judge_verdict_line(check, argv, out) -> str:
    """A script check: its judge prints `NAME: PASS` or `NAME: FAIL ...` last."""
    found = re.findall(r"^([A-Z][A-Z ]+): (PASS|FAIL)(.*)$", out, re.M)
    assert found, "no verdict line in the script's output"
    name, verdict, rest = found[-1]
    assert verdict == "PASS", f"{name}: {verdict}{rest}"
    return f"{name}: PASS{rest}"


JUDGES = {name[len("judge_"):].replace("_", "-"): f for name, f in globals().items() if name.startswith("judge_")}

_BENCH = ["-m", "nccl_bench", "bench", "--backend", "nccl", "-b", "8", "-n", "5", "-w", "2", "-c", "1"]
CHECKS = [
    GpuCheck("smoke-nccl", 2, 120, "every init mode on nccl4py: init, a checked all_reduce, destroy",
             ["-m", "nccl_bench", "smoke", "--backend", "nccl", "--ranks-per-root", "1"]),
    GpuCheck("smoke-torch", 2, 120, "every init mode on ProcessGroupNCCL",
             ["-m", "nccl_bench", "smoke", "--backend", "torch", "--ranks-per-root", "1"]),
    GpuCheck("stale-nccl", 2, 180,
             "stock with root 1 held back 3 s: a stale ID, a bounded hang, abort, then scoped works",
             ["tests/jobs/churn.py", "{tmp}/nccl.jsonl", "--backend", "nccl", "--modes", "stock,stock,scoped",
              "--delay", "1:1:3", "--timeout", "10"], expect="stale-round-1-then-ok"),
    GpuCheck("stale-torch", 2, 200, "the same on ProcessGroupNCCL",
             ["tests/jobs/churn.py", "{tmp}/torch.jsonl", "--backend", "torch", "--modes", "stock,stock,scoped",
              "--delay", "1:1:3", "--timeout", "12"], expect="stale-round-1-then-ok"),
    GpuCheck("init-nccl", 2, 180, "init latency per phase, regular and scoped",
             ["-m", "nccl_bench", "init", "--backend", "nccl", "--rounds", "5", "--init", "regular,scoped",
              "--ranks-per-root", "1", "--timeout", "5", "--json", "{tmp}/init.json"]),
    GpuCheck("same-group-torch", 2, 240, "pytorch#178473's own scenario: stock reads a stale ID, scoped passes",
             ["-m", "stress", "--backend", "torch", "--scenario", "same-group", "--init", "stock,scoped",
              "--ranks-per-root", "1", "--rounds", "2", "--skew-max", "0", "--timeout", "8",
              "--inject", "delay:1:1:3", "--journal", "{tmp}/sg.jsonl"], expect="same-group-stale", exit_code=1),
    GpuCheck("bench-every-collective", 2, 240, "every collective, Ring and Tree, each element checked, the algorithm "
             "confirmed by NCCL", [*_BENCH, "--collective", "all", "--algo", "ring,tree", "-e", "4M", "-f", "8",
                                   "--json", "{tmp}/bench.json"], expect="bench-exact"),
    GpuCheck("bench-split", 2, 180, "--split: a communicator per group, every group sweeping at once",
             [*_BENCH, "--collective", "all_reduce,gather,alltoallv,hypercube", "--split", "MOD 2", "-e", "4M", "-f",
              "8", "--no-algo-confirm", "--json", "{tmp}/bench.json"], expect="bench-exact"),
    GpuCheck("bench-cuda-graph", 2, 120, "-G: the timed loop captured in a CUDA graph, still exact",
             [*_BENCH, "--collective", "all_reduce,all_gather", "-G", "3", "-e", "1M", "-f", "32", "--no-algo-confirm",
              "--json", "{tmp}/bench.json"], expect="bench-exact"),
    *[GpuCheck(f"bench-register-{r}", 2, 180, f"-R {r}: buffers registered ({how}), every collective exact",
               [*_BENCH, "--collective", "all", "-R", str(r), "-e", "1M", "-f", "32", "--no-algo-confirm",
                "--json", "{tmp}/bench.json"], expect="bench-exact")
      for r, how in ((1, "locally"), (2, "as symmetric windows"))],
    *[GpuCheck(f"bench-cta-policy-{x}", 2, 180, f"-x {x}: NCCL's CTA policy {how} on every communicator, every "
               "collective exact", [*_BENCH, "--collective", "all", "-x", str(x), "-e", "1M", "-f", "32",
                                    "--no-algo-confirm", "--json", "{tmp}/bench.json"], expect="bench-exact")
      for x, how in ((1, "efficiency"), (2, "zero"))],
    GpuCheck("stress-corrupt", 2, 120, "a fault in rank 1's input: found, named corrupted at the source",
             ["-m", "stress", "--backend", "nccl", "--rounds", "3", "--timeout", "5", "--skew-max", "0", "--init",
              "scoped", "--inject", "corrupt@1:1", "--journal", "{tmp}/corrupt.jsonl"], expect="corrupt-round-1",
             exit_code=1),
    GpuCheck("stress-destroys-behind", 2, 150, "destroys behind the rounds: a hang's abort in the background, every "
             "round journaled once",
             ["-m", "stress", "--backend", "nccl", "--rounds", "30", "--skew-max", "0", "--init", "scoped",
              "--inject", "skip-collective@10:1", "--journal", "{tmp}/behind.jsonl"], expect="behind-hang-round-10",
             exit_code=1),
    GpuCheck("stress-one-rank", 1, 90, "one rank alone churns",
             ["-m", "stress", "--backend", "nccl", "--nranks", "1", "--rounds", "10", "--skew-max", "0",
              "--journal", "{tmp}/one.jsonl"], fewer="one rank alone is what it shows"),
    GpuCheck("stress-duration", 2, 150, "--duration: each mode ends after the same round on every rank, then the "
             "next runs", ["-m", "stress", "--backend", "nccl", "--init", "regular,scoped", "--duration", "15",
                           "--journal", "{tmp}/duration.jsonl"], expect="duration-each-mode"),
    GpuCheck("main-job", 1, 480, "the README's main job on every GPU: 1000 re-inits under skew, 0 failures, each "
             "rank's start outside the rounds' deadlines",
             ["-m", "stress", "--rounds", "1000", "--journal", "{tmp}/main.jsonl"], expect="main-job"),
    GpuCheck("accept", 1, 420, "accept with no flag (its JSON named for the judge): the node passes against its "
             "built-in or derived profile", ["-m", "nccl_bench", "accept", "--json", "{tmp}/accept.json"],
             expect="accept-pass"),
    GpuCheck("locate-healthy", 2, 300, "a healthy node: every pair and half measured, nothing named",
             ["-m", "nccl_bench", "locate", "--json", "{tmp}/locate.json"], expect="locate-healthy"),
    # script checks: what needs more than one command of ours (a job of its own, nccl-tests built beside us)
    GpuCheck("replay-fsdp", 2, 560, "an FSDP2 job's dumps and traces replayed: rows of 1 MiB or more within "
             "0.8-1.25 x the job's time, 0 wrong", script="replay.sh", expect="verdict-line"),
    GpuCheck("replay-torchrun", 1, 420, "the 4-rank zoo's traces and dumps replayed by 4 torchrun agents on GPU 0 (4 "
             "NCCL hosts): every rank ends 0 (a user's launcher's ranks end through the interpreter), 0 wrong",
             script="zoo_one_gpu.sh", expect="verdict-line",
             env={"RUNS": "pp:kineto pp:fr mesh:kineto moe:fr", "CUDA_VISIBLE_DEVICES": "0"},
             fewer="4 NCCL hosts on one GPU: how each rank's process ends and every value, not times"),
    GpuCheck("stops-and-sizes", 1, 420, "accept stopped by a Ctrl-C at 3 moments: 130, no folder or GPU process left; "
             "sizes no GPU holds said before any rank; one rank's busbw floors SKIP", script="stops.sh",
             expect="verdict-line"),
    GpuCheck("bench-torch-free", 2, 420, "a --backend nccl bench imports torch in no process; its data check's kernels "
             "equal torch's; every collective, type and reduction exact, without torch and on torch's buffers",
             script="torchfree.sh", expect="verdict-line"),
    GpuCheck("beside-nccl-tests", 2, 560, "small and large sizes alone, alternated with nccl-tests 3 times: the "
             "ratio of medians within the targets (needs .nccltests/ carried)", script="trust.sh",
             expect="verdict-line", env={"CALL": "alone"}),
]
COMMANDS = [c for c in CHECKS if c.argv]
