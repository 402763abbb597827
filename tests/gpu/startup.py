"""Start-up as a user waits for it, ours beside nccl-tests', on every GPU of this machine: each command timed
from outside as a whole process (its first table row, its first line on the terminal, its exit), the tools
alternated ours then theirs, REPS times in one call, judged by the ratio of medians.

    python3 tests/gpu/startup.py first    # -b 8 -e 8 -n 1 -w 0: own launcher vs -g N, mpiexec vs mpiexec
    python3 tests/gpu/startup.py own      # the first of those alone
    python3 tests/gpu/startup.py sweep    # -b 8 -e 8G -f 2, default iterations, own launcher vs -g N
    python3 tests/gpu/startup.py commands [BEFORE_TREE]   # smoke, init, stress, accept; paired with a
                                                           # checkout of an older commit when given
    python3 tests/gpu/startup.py contexts  # CUDA's start on each GPU alone, twice: what a GPU's first use costs
    python3 tests/gpu/startup.py timeline  # the first row under each launcher, ours alternated with nccl-tests,
                                           # each rank's milestones (NCCL_BENCH_START_MARKS) from the launch
    python3 tests/gpu/startup.py marks     # those milestones of ours alone (own launcher), no nccl-tests

STARTUP_REPS sets the alternations (default 3); one untimed run of each command comes first (rep -1, outside the
medians). tests/gpu/startup.sh runs issue 59's acceptance with these in two calls.
nccl-tests comes from tests/gpu/nccltests.sh (carry .nccltests/ and .whl/mpi/). Logs and a JSON of every
timing under $OUT; a table last. Both tools write to pseudo-terminals, as to a user's: a C program's stdout is then
line-buffered and ours shows its terminal lines, so what is timed is what a user sees.

A row is timed when it is whole: size, count, type, redop, root and the eight numbers, its line ended. nccl-tests
prints a row's first five columns before it runs the size (writeBenchmarkLinePreamble) and its numbers after; under
mpiexec those columns reached the terminal 0.02-0.28 s before its first collective had connected (session 6,
NCCL's timestamped log), and a first match on them timed nccl-tests' row before it had measured anything.
"""
from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/out"))
NTD = Path("/tmp/nccltests")
REPS = int(os.environ.get("STARTUP_REPS", 3))  # pairs per case; at least 3
# a whole table row: size, count, type, redop, root, then out-of-place and in-place time, algbw, busbw, #wrong
ROW = re.compile(rb"^\s+\d+\s+\d+\s+\w+\s+\w+\s+-?\d+(\s+\S+){8}\s*$")
GPUS = int(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU "))
FIRST = ["-b", "8", "-e", "8", "-n", "1", "-w", "0"]
SWEEP = ["-b", "8", "-e", "8G", "-f", "2"]


def timed(cmd: list[str], cwd: str | None = None, env: dict | None = None, limit: float = 300) -> dict:
    """Run `cmd`; seconds to its first table row, its first stderr line and its exit (None: never)."""
    master, slave = pty.openpty()
    out_master, out_slave = pty.openpty()
    wall0 = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=out_slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    os.close(out_slave)
    first_row = first_err = None
    out, err = b"", b""
    streams = {out_master: "out", master: "err"}
    while streams and time.monotonic() - t0 < limit:
        ready, _, _ = select.select(list(streams), [], [], 0.5)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                del streams[fd]
                continue
            now = time.monotonic() - t0
            if streams[fd] == "out":
                out += chunk
                if first_row is None and any(ROW.match(line) for line in out.split(b"\n")[:-1]):  # ended lines
                    first_row = now
            else:
                err += chunk
                if first_err is None and chunk.strip():
                    first_err = now
        if proc.poll() is not None and not ready:
            break
    try:
        code = proc.wait(timeout=max(limit - (time.monotonic() - t0), 1))
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    took = time.monotonic() - t0
    os.close(master)
    os.close(out_master)
    with open(OUT / "startup.log", "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}  (exit {code}, {took:.2f} s)\n".encode() + out[-4000:] + b"\n--- stderr\n"
                  + err[-4000:])
    return {"cmd": cmd, "exit": code, "first_row_s": first_row, "first_line_s": first_err, "exit_s": took,
            "wall0": wall0}


CONTEXT_PROBE = """
import ctypes, sys, time
t0 = time.perf_counter()
cuda = ctypes.CDLL("libcuda.so.1")
t1 = time.perf_counter()
assert cuda.cuInit(0) == 0
t2 = time.perf_counter()
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
t3 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f}")
"""


def contexts() -> str:
    """Each GPU's CUDA start in a process of its own (CUDA_VISIBLE_DEVICES), one GPU after another, in two
    passes: the first pass on a machine fresh from boot pays what a GPU's first use costs, the second what
    every later process pays."""
    lines = [f"{'pass':>4s} {'gpu':>3s} {'dlopen s':>8s} {'cuInit s':>8s} {'context s':>9s} {'process s':>9s}"]
    for n in (1, 2):
        for gpu in range(GPUS):
            t0 = time.monotonic()
            out = subprocess.run([sys.executable, "-c", CONTEXT_PROBE], capture_output=True, text=True,
                                 env={**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}).stdout.split()
            took = time.monotonic() - t0
            lines.append(f"{n:>4d} {gpu:>3d} " + " ".join(f"{v:>8s}" for v in (out or ["-"] * 3))
                         + f" {took:>9.3f}")
    return "\n".join(lines)


MILESTONES = ("driver python", "driver forking", "forked", "python", "cuda-start", "store", "met", "cuda",
              "nccl-imported", "ids", "init", "sweep-imported", "buffers", "filled", "launched", "collective",
              "checked", "lined-up", "warmed", "measured", "row")


def timeline(env: dict, launchers: list[tuple[str, list[str], list[str]]]) -> str:
    """Each launcher's case REPS times, ours (marked) then nccl-tests; per milestone the median over runs of
    the slowest rank's seconds from the launch, beside nccl-tests' row."""
    marks_file = OUT / "startmarks.txt"
    lines = []
    for name, ours, theirs in launchers:
        runs, rows_theirs, rows_ours = [], [], []
        for rep in range(REPS):
            marks_file.write_text("")
            r = timed(ours, env={**env, "NCCL_BENCH_START_MARKS": str(marks_file)})
            rows_ours.append(r["first_row_s"])
            per: dict[str, list[float]] = {}
            for line in marks_file.read_text().splitlines():
                pid, rank, what, at = line.split()
                what = f"driver {what}" if rank == "-" else what
                per.setdefault(what, []).append(float(at) - r["wall0"])
            runs.append(per)
            with open(OUT / "startmarks_all.txt", "a") as f:
                f.write(f"== {name} rep {rep} (wall0 {r['wall0']:.6f})\n" + marks_file.read_text())
            if theirs:  # none: ours alone (`marks`)
                rows_theirs.append(timed(theirs, env=env)["first_row_s"])
        lines.append(f"== {name}: our row {med(rows_ours)} s (runs {rows_ours}), nccl-tests row {med(rows_theirs)} s"
                     f" (runs {rows_theirs})")
        lines += nccl_init_timings(name, ours, theirs, env) if theirs else []
        lines.append(f"  {'milestone':16s} {'first rank s':>12s} {'last rank s':>11s}   (medians over {REPS} runs)")
        for what in MILESTONES:
            firsts = [min(p[what]) for p in runs if what in p]
            lasts = [max(p[what]) for p in runs if what in p]
            if firsts:
                lines.append(f"  {what:16s} {med(firsts):>12.3f} {med(lasts):>11.3f}")
    return "\n".join(lines)


def nccl_init_timings(name: str, ours: list[str], theirs: list[str], env: dict) -> list[str]:
    """One more run of each tool with NCCL's INIT log (NCCL_DEBUG_FILE, the same for both): NCCL's own account
    of its communicator's init per rank ("Init timings"), the part of the first row NCCL spends."""
    lines = []
    for tool, cmd in (("ours", ours), ("nccl-tests", theirs)):
        logs = Path("/tmp/ncclinit")  # one file per rank: beside $OUT, not in it (tar them to keep them)
        logs.mkdir(exist_ok=True)
        stem = logs / f"ncclinit.{re.sub(r'[^a-z0-9]+', '_', name.lower())}.{tool}"
        for old in logs.glob(stem.name + ".*"):
            old.unlink()
        r = timed(cmd, env={**env, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT",
                            "NCCL_DEBUG_FILE": f"{stem}.%h.%p"})
        said = sorted(m.group(0) for f in logs.glob(stem.name + ".*") for m in
                      re.finditer(r"Init timings.*", f.read_text(errors="replace")))
        lines.append(f"  {tool} with NCCL's INIT log: row {r['first_row_s']} s, {len(said)} rank(s) said")
        lines += [f"    {t}" for t in said[:8]]
    return lines


def env_with_nccltests() -> dict:
    env = dict(os.environ)
    text = (NTD / "env").read_text() if (NTD / "env").exists() else ""
    for m in re.finditer(r"export (\w+)=(\S+)", text):
        env[m.group(1)] = os.path.expandvars(m.group(2).replace("${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}",
                                                                 ":" + env.get("LD_LIBRARY_PATH", "")).replace(
            "$PATH", env.get("PATH", "")))
    return env


BEFORE = os.environ.get("STARTUP_BEFORE")  # a tree of older product code: timed as a third tool, "[before]"


def pairs(name: str, ours: list[str], theirs: list[str], env: dict) -> list[dict]:
    # One untimed run of each first, so the timed ones find the machine as a user's second run does: bytecode
    # written, the check's kernels compiled (kept as rep -1, outside the medians: the first run on a machine)
    # (STARTUP_FIRST=theirs: nccl-tests' first: the machine's cold caches are then paid by it)
    order = (("ours", ours), ("nccl-tests", theirs))
    rows = [{"case": name, "tool": tool, "rep": -1, **timed(cmd, env=env)}
            for tool, cmd in (order[::-1] if os.environ.get("STARTUP_FIRST") == "theirs" else order)]
    tools = [("ours", ours, None), ("nccl-tests", theirs, None)]
    if BEFORE:  # ours, the older tree (run from its folder: python -m finds its package first), nccl-tests
        tools.insert(1, ("before", ours, BEFORE))
    for rep in range(REPS):
        for tool, cmd, cwd in tools:
            r = timed(cmd, cwd=cwd, env=env)
            rows.append({"case": name + (" [before]" if tool == "before" else ""),
                         "tool": "ours" if tool == "before" else tool, "rep": rep, **r})
            print(f"{name:28s} {tool:10s} rep {rep}: row {r['first_row_s']}, line {r['first_line_s']}, "
                  f"exit {r['exit_s']:.2f} s (code {r['exit']})", flush=True)
    return rows


def med(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def table(rows: list[dict]) -> str:
    lines = [f"{'case':28s} {'ours row/exit s':>18s} {'nccl-tests row/exit s':>22s} {'ratio row':>9s} "
             f"{'ratio exit':>10s} {'our 1st line s':>14s}"]
    cases = [(case, False) for case in dict.fromkeys(r["case"] for r in rows)]
    if rows and rows[0]["rep"] == -1:  # the machine's first run of each tool, after setup (tests/gpu/env.sh)
        cases.insert(1, (rows[0]["case"], True))
    for case, first in cases:
        mine = [r for r in rows if r["case"] == case and (r["rep"] == -1 if first else r["rep"] >= 0)]
        o = [r for r in mine if r["tool"] == "ours"]
        base = case.removesuffix(" [before]")  # the older tree is judged against the same nccl-tests runs
        t = [r for r in rows if r["case"] == base and r["tool"] != "ours" and (r["rep"] == -1 if first
                                                                               else r["rep"] >= 0)]
        case = "  its first run after setup" if first else case
        orow, oexit = med(r["first_row_s"] for r in o), med(r["exit_s"] for r in o)
        trow, texit = med(r["first_row_s"] for r in t), med(r["exit_s"] for r in t)
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        lines.append(f"{case:28s} {fmt(orow) + ' / ' + fmt(oexit):>18s} {fmt(trow) + ' / ' + fmt(texit):>22s} "
                     f"{ratio(orow, trow):>9s} {ratio(oexit, texit):>10s} "
                     f"{fmt(med(r['first_line_s'] for r in o)):>14s}")
    return "\n".join(lines)


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else "first"
    OUT.mkdir(parents=True, exist_ok=True)
    if what in ("first", "own", "sweep", "timeline"):
        subprocess.run(["bash", "tests/gpu/nccltests.sh"], check=False)
    env = env_with_nccltests()
    py = [sys.executable, "-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all_reduce"]
    perf, perf_mpi = str(NTD / "build" / "all_reduce_perf"), str(NTD / "build_mpi" / "all_reduce_perf")
    mpi = ["mpiexec", "-n", str(GPUS)]
    rows: list[dict] = []
    if what in ("first", "own"):
        rows += pairs(f"first row, own / -g {GPUS}", py + FIRST, [perf, *FIRST, "-g", str(GPUS)], env)
    if what == "first":
        rows += pairs("first row, no algo confirm", py + FIRST + ["--no-algo-confirm"],
                      [perf, *FIRST, "-g", str(GPUS)], env)
        rows += pairs("first row, mpiexec", mpi + py + FIRST, mpi + [perf_mpi, *FIRST, "-g", "1"], env)
    elif what == "sweep":
        rows += pairs(f"sweep 8 B-8 GiB, own / -g {GPUS}", py + SWEEP, [perf, *SWEEP, "-g", str(GPUS)], env)
    elif what == "contexts":
        text = contexts()
        (OUT / "startup_contexts.txt").write_text(text + "\n")
        print(text)
        return 0
    elif what == "timeline":
        affinity = subprocess.run(mpi + ["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True,
                                  text=True, env=env).stdout
        text = "mpiexec's ranks may run on:\n" + affinity + timeline(env, [
            (f"own launcher / -g {GPUS}", py + FIRST, [perf, *FIRST, "-g", str(GPUS)]),
            (f"mpiexec -n {GPUS}", mpi + py + FIRST, mpi + [perf_mpi, *FIRST, "-g", "1"])])
        (OUT / "startup_timeline.txt").write_text(text + "\n")
        print(text)
        return 0
    elif what == "marks":  # ours alone, each rank's milestones, no nccl-tests needed
        text = timeline(env, [(f"own launcher, {GPUS} GPUs", py + FIRST, [])])
        (OUT / "startup_marks.txt").write_text(text + "\n")
        print(text)
        return 0
    elif what == "commands":
        before = sys.argv[2] if len(sys.argv) > 2 else None
        cmds = {"smoke": ["smoke", "--backend", "nccl"],
                "init": ["init", "--backend", "nccl", "--init", "scoped", "--rounds", "5"],
                "stress 20": None, "accept": ["accept", "--backend", "nccl"]}
        for rep in range(-1, 1 if before is None else 2):  # rep -1: untimed (warm)
            for name, args in cmds.items():
                if name == "accept" and rep != 0:
                    continue  # a minute and a half each: once (the other commands' warm run warmed its imports)
                argv = ([sys.executable, "-m", "stress", "--backend", "nccl", "--rounds", "20"] if args is None
                        else [sys.executable, "-m", "nccl_bench", *args])
                for tool, cwd in (("ours", None), ("before", before)):
                    if tool == "before" and before is None:
                        continue
                    r = timed(argv, cwd=cwd, env=env, limit=400)
                    rows.append({"case": name, "tool": tool, "rep": rep, **r})
                    print(f"{name:10s} {tool:7s} rep {rep}: exit {r['exit_s']:.2f} s (code {r['exit']}), first line "
                          f"{r['first_line_s']}", flush=True)
    (OUT / f"startup_{what}.json").write_text(json.dumps({"gpus": GPUS, "rows": rows}, indent=1))
    text = table(rows)
    (OUT / f"startup_{what}_table.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
