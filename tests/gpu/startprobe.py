"""Where a rank's start goes on this machine, in parts, every GPU at once (tests/gpu/startup.py times whole
commands): CUDA's start in N processes at once, bare or beside the imports a rank without torch makes; NCCL's own
init phases in ours and nccl-tests' under mpiexec; and each tool's first run after the machine sat idle.

    python3 tests/gpu/startprobe.py [cuda] [nccl] [idle] [visible] [nccllog]   # the first three by default;
                                                                               # a table last, logs in $OUT
visible: CUDA's start in N processes at once that each see every GPU (as our ranks do) or only their own
(CUDA_VISIBLE_DEVICES), beside one process starting all N (as nccl-tests -g N does), alternated.
nccllog: each tool's first row under each launcher with NCCL's log timestamped to the microsecond (INIT and P2P:
its init, then the connections its first collective makes), and our start marks, from the launch.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from startup import FIRST, GPUS, NTD, OUT, env_with_nccltests, timed  # noqa: E402

CUDA = """
import ctypes, sys, threading, time
t0 = time.time()
mode = sys.argv[1]
def start():
    global ready
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    ready = time.time()
def imports():
    global imported
    import numpy, nccl.core  # noqa: F401
    imported = time.time()
if mode == "bare":
    start(); imported = None
elif mode == "thread":
    th = threading.Thread(target=start); th.start(); imports(); th.join()
else:
    imports(); start()
print(f"{ready - t0:.3f} {'-' if imported is None else f'{imported - t0:.3f}'}")
"""


VISIBLE = """
import ctypes, sys, time
t0 = time.time()
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
t1 = time.time()
for g in [int(a) for a in sys.argv[1:]]:
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuDeviceGet(ctypes.byref(dev), g) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    p = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 20) == 0
print(f"{t1 - t0:.3f} {time.time() - t0:.3f}")
"""


def visible_table() -> list[str]:
    """Seconds from each process's start to cuInit done and to its context(s) ready with 1 MiB allocated."""
    def together(cases):
        t0 = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-c", VISIBLE, *gpus], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, **extra}) for gpus, extra in cases]
        outs = [p.communicate()[0].strip() for p in procs]
        return outs, time.monotonic() - t0
    modes = {"each sees all": [([str(g)], {}) for g in range(GPUS)],
             "each sees its own": [(["0"], {"CUDA_VISIBLE_DEVICES": str(g)}) for g in range(GPUS)],
             "one process, all": [([str(g) for g in range(GPUS)], {})]}
    lines = [f"{'mode':18s} {'rep':>3s} {'cuInit s / ready s (each process)':60s} {'all exited s':>12s}"]
    for rep in range(3):
        for mode, cases in modes.items():
            outs, took = together(cases)
            lines.append(f"{mode:18s} {rep:>3d} {'  '.join(o.replace(' ', '/') for o in outs):60s} {took:>12.3f}")
    return lines


NCCLLOG = re.compile(r"^(\d+\.\d+) \S+:(\d+):\d+ \[(\d+)\] NCCL INFO (.*)$")
EVENTS = (("first NCCL line", r""), ("init start", r"Init START"), ("init complete", r"Init COMPLETE"),
          ("first connection", r"via (P2P|SHM|NET)"), ("connected all", r"Connected all"),
          ("last NCCL line", r""))


def nccllog_table(env: dict) -> list[str]:
    """Each tool's first row under each launcher, twice each alternated, with NCCL's INFO log (INIT, P2P)
    timestamped; per event the slowest rank's seconds from the launch; ours with its start marks beside."""
    mpi = ["mpiexec", "-n", str(GPUS)]
    py = [sys.executable, "-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all_reduce", *FIRST]
    cases = [("own", py, [str(NTD / "build" / "all_reduce_perf"), *FIRST, "-g", str(GPUS)]),
             ("mpiexec", mpi + py, mpi + [str(NTD / "build_mpi" / "all_reduce_perf"), *FIRST, "-g", "1"])]
    log_env = {**env, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,P2P,SHM,PROXY",
               "NCCL_DEBUG_TIMESTAMP_LEVELS": "ALL", "NCCL_DEBUG_TIMESTAMP_FORMAT": "%s.%6f_"}
    lines = []
    for rep in range(2):
        for launcher, ours, theirs in cases:
            for tool, cmd in (("ours", ours), ("nccl-tests", theirs)):
                folder = OUT / f"nccllog_{launcher}_{tool}_{rep}"
                folder.mkdir(parents=True, exist_ok=True)
                marks = folder / "marks.txt"
                marks.write_text("")
                r = timed(cmd, env={**log_env, "NCCL_DEBUG_FILE": f"{folder}/nccl.%p.log",
                                    "NCCL_BENCH_START_MARKS": str(marks)})
                lines.append(f"-- {launcher} {tool} rep {rep}: row {r['first_row_s']:.3f} s, exit {r['exit_s']:.2f}")
                lines += log_events(folder, r["wall0"], marks)
    return lines


def log_events(folder: Path, wall0: float, marks: Path) -> list[str]:
    """Per event, its seconds from the launch on each rank (a rank: a pid and CUDA device); our marks after."""
    ranks: dict[str, list[tuple[float, str]]] = {}
    for log in sorted(folder.glob("nccl.*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = NCCLLOG.match(line)
            if m:
                ranks.setdefault(f"{m.group(2)}/{m.group(3)}", []).append((float(m.group(1)) - wall0, m.group(4)))
    out = []
    for name, pattern in EVENTS:
        at = []
        for events in ranks.values():
            hits = [t for t, text in events if re.search(pattern, text)]
            if hits:
                at.append(hits[-1] if name == "last NCCL line" else hits[0])
        out.append(f"   {name:18s} " + " ".join(f"{t:.3f}" for t in sorted(at)))
    # the largest gaps between a rank's consecutive lines: where its time goes between what NCCL says
    for rank, events in sorted(ranks.items())[:GPUS]:
        gaps = sorted(((b[0] - a[0], a, b) for a, b in zip(events, events[1:])), key=lambda g: -g[0])[:3]
        out += [f"   gap {rank} {g:.3f} s after {a[0]:.3f} {a[1][:70]!r} -> {b[1][:50]!r}" for g, a, b in gaps]
    per: dict[str, list[float]] = {}
    for line in marks.read_text().splitlines():
        _pid, rank, what, at = line.split()
        per.setdefault(what if rank != "-" else f"driver {what}", []).append(float(at) - wall0)
    if per:
        out.append("   marks (slowest rank): " + ", ".join(f"{k} {max(v):.3f}" for k, v in per.items()))
    return out


def cuda(n: int, mode: str) -> list[str]:
    """`n` processes at once, one per GPU: seconds from each one's start to CUDA ready and to its imports."""
    procs = [subprocess.Popen([sys.executable, "-c", CUDA, mode], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": str(g)}) for g in range(n)]
    return [p.communicate()[0].strip() for p in procs]


def cuda_table() -> list[str]:
    lines = [f"{'processes':>9s} {'mode':7s} {'CUDA ready s (each process)':40s} {'imports done s':30s}"]
    for n in sorted({1, GPUS}):
        for mode in ("bare", "thread", "serial"):
            for rep in range(2):
                out = [o.split() for o in cuda(n, mode)]
                lines.append(f"{n:>9d} {mode:7s} {' '.join(o[0] for o in out):40s} {' '.join(o[1] for o in out):30s}")
    return lines


TIMINGS = re.compile(r"Init timings.*?total ([\d.]+) \(([^)]*)\)")


def nccl_table(env: dict) -> list[str]:
    """NCCL's own account of ncclCommInitRank (NCCL_DEBUG=INFO's 'Init timings'), ours and nccl-tests' under
    mpiexec, three runs each alternated."""
    mpi = ["mpiexec", "-n", str(GPUS)]
    ours = mpi + [sys.executable, "-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all_reduce",
                  *FIRST]
    theirs = mpi + [str(NTD / "build_mpi" / "all_reduce_perf"), *FIRST, "-g", "1"]
    lines = []
    for rep in range(3):
        for tool, cmd in (("ours", ours), ("nccl-tests", theirs)):
            folder = OUT / f"nccl_{tool}_{rep}"
            folder.mkdir(parents=True, exist_ok=True)
            r = timed(cmd, env={**env, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT",
                                "NCCL_DEBUG_FILE": f"{folder}/nccl.%h.%p.log"})
            totals = []
            for log in sorted(folder.glob("nccl.*.log")):
                m = TIMINGS.search(log.read_text(errors="replace"))
                if m:
                    totals.append(f"{m.group(1)} ({m.group(2)})")
            worst = max((float(t.split()[0]) for t in totals), default=0)
            lines.append(f"{tool:10s} rep {rep}: row {r['first_row_s']:.2f} s; NCCL's init, rank 0: "
                         + "; ".join(totals[:1]) + f"; slowest rank's total {worst:.2f}")
    return lines


def idle_table(env: dict, idle_s: float) -> list[str]:
    """After `idle_s` seconds of nothing on the GPUs, one tool's first row, then the other's; and the other way."""
    py = [sys.executable, "-m", "nccl_bench", "bench", "--backend", "nccl", "--collective", "all_reduce", *FIRST]
    perf = [str(NTD / "build" / "all_reduce_perf"), *FIRST, "-g", str(GPUS)]
    lines = []
    for first, second in ((("nccl-tests", perf), ("ours", py)), (("ours", py), ("nccl-tests", perf))):
        time.sleep(idle_s)
        a, b = timed(first[1], env=env), timed(second[1], env=env)
        lines.append(f"after {idle_s:.0f} s idle: {first[0]} row {a['first_row_s']:.2f} s, then {second[0]} row "
                     f"{b['first_row_s']:.2f} s")
    return lines


def main() -> int:
    parts = sys.argv[1:] or ["cuda", "nccl", "idle"]
    OUT.mkdir(parents=True, exist_ok=True)
    env = env_with_nccltests()
    lines = []
    if "cuda" in parts:
        lines += ["== CUDA's start (cuInit and a primary context) in processes one per GPU, started together"]
        lines += cuda_table()
    if "nccl" in parts:
        lines += ["== NCCL's init under mpiexec"] + nccl_table(env)
    if "visible" in parts:
        lines += ["== CUDA's start in one process per GPU seeing every GPU or its own, or one process for all"]
        lines += visible_table()
    if "nccllog" in parts:
        lines += ["== the first row with NCCL's log timestamped: seconds from the launch, each rank"]
        lines += nccllog_table(env)
    if "idle" in parts:
        lines += ["== the first run after the machine sat idle"] + idle_table(env, float(os.environ.get("IDLE_S", 40)))
    text = "\n".join(lines)
    (OUT / "startprobe.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
