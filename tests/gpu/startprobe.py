"""Where a rank's start goes on this machine, in parts, every GPU at once (tests/gpu/startup.py times whole
commands): CUDA's start in N processes at once, bare or beside the imports a rank without torch makes; NCCL's own
init phases in ours and nccl-tests' under mpiexec; and each tool's first run after the machine sat idle.

    python3 tests/gpu/startprobe.py [cuda] [nccl] [idle]     # all three by default; a table last, logs in $OUT
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
    if "idle" in parts:
        lines += ["== the first run after the machine sat idle"] + idle_table(env, float(os.environ.get("IDLE_S", 40)))
    text = "\n".join(lines)
    (OUT / "startprobe.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
