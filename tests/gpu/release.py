"""The release's GPU checks (tests/gpu_checks.py): list them, or run any subset and print one table.

    python3 tests/gpu/release.py --list
    python3 tests/gpu/release.py [WORD ...] [--out DIR] [--budget SECONDS]

A WORD picks the checks whose names hold it (none: every check). Each check runs on every GPU of the machine
unless it says why it needs fewer (GpuCheck.fewer). A check that needs more GPUs than this machine has is
skipped and says so; one that --budget has no minute left for, or that the budget cuts
short, is left for the next call (LATER) and said. Each check runs in its own folder under --out (default $OUT, else
/tmp/gpu-release) with its log; the table comes last. Exit 0 when every check that ran passed, 1 else,
2 on bad input. NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]
from gpu_checks import CHECKS, JUDGES, machine_gpus  # noqa: E402

SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
        "PYTHONUNBUFFERED": "1"}
WHEELS = REPO / ".whl"
MIN_START_S = 60  # no check starts with less of the call's budget left
SITE = Path("/tmp/site")


def environment(have: int) -> dict:
    """The machine's rules, and on GPUs the carried wheels (nccl4py, nvtx) where this machine lacks them."""
    env = {**os.environ, **SAFE}
    missing = [m for m in ("nccl", "nvtx") if have and subprocess.run([sys.executable, "-c", f"import {m}"],
                                                                      capture_output=True).returncode]
    if missing and not SITE.is_dir():
        wheels = sorted(WHEELS.glob("*.whl"))
        if not wheels:
            print(f"release: {', '.join(missing)} not installed and no network here: put the wheels in .whl/ "
                  "(pip download nccl4py nvtx --no-deps --only-binary=:all: -d .whl) and carry it", file=sys.stderr)
            raise SystemExit(2)
        got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                              "--target", str(SITE), *map(str, wheels)], capture_output=True, text=True)
        if got.returncode:
            print(f"release: the wheels in .whl/ do not install here: {(got.stderr.strip().splitlines() or ['?'])[-1]}",
                  file=sys.stderr)
            raise SystemExit(2)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), str(REPO), env.get("PYTHONPATH")) if p)
    return env


def adopt_orphans() -> None:
    """A check's processes that outlive their parent come to us, not to init (a child subreaper), so that
    leftovers() finds every one: a killed process group misses those a check started in groups of their own."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def children(pid: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(d.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def leftovers() -> int:
    """Kill and reap whatever a check left running under us; how many there were."""
    killed = 0
    for _ in range(100):  # each pass kills our children; theirs come to us (adopt_orphans) for the next
        kids = children(os.getpid())
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, 9)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return killed


def run_one(check, out: Path, env: dict, limit: float) -> tuple[str, str, float]:
    """(status, headline or why, seconds); `limit`: what is left of the call's budget."""
    tmp = out / check.name
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if check.argv:
        argv = check.command(tmp)
        cmd = [sys.executable, *argv]
    else:
        argv, cmd = [], ["bash", str(REPO / "tests" / "gpu" / check.script)]
    t0 = time.monotonic()
    with open(tmp / "log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env={**env, **check.env, "OUT": str(tmp)}, stdout=subprocess.PIPE,
                                stderr=log, text=True, start_new_session=True)
        try:
            text, _ = proc.communicate(timeout=min(check.timeout, limit))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            if limit < check.timeout:
                return "LATER", f"the call's budget ran out after {limit:.0f} s", time.monotonic() - t0
            return "FAIL", f"timed out after {check.timeout:.0f} s", time.monotonic() - t0
        except BaseException:  # Ctrl-C too: the check's processes go with us
            os.killpg(proc.pid, 9)
            proc.wait()
            raise
        finally:  # on every way out, and the log says so
            if left := leftovers():
                log.write(f"\nrelease: killed {left} process(es) the check left running\n")
        log.write(text)
    took = time.monotonic() - t0
    if proc.returncode != check.exit_code:
        last = (text.strip().splitlines() or [""])[-1][:160]
        return "FAIL", f"exit {proc.returncode}, expected {check.exit_code}: {last}", took
    try:
        return "PASS", JUDGES[check.expect](check, argv, text), took
    except (AssertionError, OSError, KeyError, ValueError) as e:
        return "FAIL", f"{type(e).__name__}: {str(e)[:300]}", took


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="tests/gpu/release.py", description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("words", nargs="*", metavar="WORD")
    p.add_argument("--list", action="store_true", help="list the checks and stop")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu-release"))
    p.add_argument("--budget", type=float, default=520.0, help="seconds this call may take (default 520)")
    a = p.parse_args(argv)
    picked = [c for c in CHECKS if not a.words or any(w in c.name for w in a.words)]
    if not picked:
        print(f"release: no check's name holds {' or '.join(a.words)} (--list names them)", file=sys.stderr)
        return 2
    if a.list:
        for c in picked:
            how = " ".join(c.argv) if c.argv else f"bash tests/gpu/{c.script}"
            print(f"{c.name:24} {c.gpus} GPU(s)  <= {c.timeout / 60:4.1f} min  {c.shows}\n{'':26}{how}")
        print(f"{len(picked)} checks, at most {sum(c.timeout for c in picked) / 60:.0f} min in all")
        return 0
    out, have = Path(a.out), machine_gpus()
    env = environment(have)
    adopt_orphans()
    start, table = time.monotonic(), []
    for c in picked:
        left = a.budget - (time.monotonic() - start)
        if have < c.gpus:
            table.append((c.name, "SKIP", f"needs {c.gpus} GPU(s), this machine has {have}", 0.0))
        elif left < MIN_START_S:
            table.append((c.name, "LATER", f"{left:.0f} s of --budget left", 0.0))
        else:
            status, said, took = run_one(c, out, env, left)
            table.append((c.name, status, said, took))
        print(f"release: {c.name}: {table[-1][1]} {table[-1][2]}", flush=True)
    print(f"\n{'check':24} {'result':6} {'s':>5}  {'GPUs':4}  headline ({have} GPU(s); logs under {out})")
    for (name, status, said, took), c in zip(table, picked):
        print(f"{name:24} {status:6} {took:5.0f}  {'all' if not c.fewer else 'less':4}  {said}")
    fewer = [c for c in picked if c.fewer]
    if fewer:
        print("on fewer GPUs: " + "; ".join(f"{c.name} ({c.fewer})" for c in fewer))
    return 1 if any(t[1] == "FAIL" for t in table) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
