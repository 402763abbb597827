"""Run real jobs as subprocesses, and prove none of their processes outlive them."""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def apart(name: str):
    """Held by tests that must not run beside each other on this machine (timing judged on a CPU model beside a
    cluster that loads it: tests/conftest.py LAST), whatever worker or run they are in."""
    with open(Path("/tmp") / f"nccl-bench-tests-{name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, or the process ends
        yield
TOKEN_VAR = "NCCL_BENCH_TEST_TOKEN"


def run(args: list[str], timeout: float = 180, env: dict | None = None, cwd: Path = REPO,
        **kw) -> subprocess.CompletedProcess:
    """python ARGS in the repo (or cwd) with a fresh token; asserts nothing with that token survives."""
    token = uuid.uuid4().hex
    full_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    full_env.update({TOKEN_VAR: token, "PYTHONUNBUFFERED": "1", **(env or {})})
    with subprocess.Popen([sys.executable, *args], cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True, **kw) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except BaseException:  # past its time (or the test stopped): the whole run goes, not only its first process
            kill_all(p, token)
            raise
    assert_no_survivors(token)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def kill_all(p: subprocess.Popen, token: str) -> None:
    """SIGKILL to the run's session and to every process that carries its token (one that left the session), then
    each reaped: subprocess.run's timeout kills the first process alone, and what it started ran on."""
    with contextlib.suppress(OSError):
        os.killpg(p.pid, signal.SIGKILL)
    for pid in survivors(token):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    p.kill()
    p.communicate()


def survivors(token: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if f"{TOKEN_VAR}={token}".encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            continue
    return found


def assert_no_survivors(token: str, grace: float = 5.0) -> None:
    deadline = time.monotonic() + grace
    while (left := survivors(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}"


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The whole stderr of a bad-input run: exactly one line, no traceback."""
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script: Path, args: list[str], nranks: int, timeout: float = 120) -> None:
    """`script ARGS` as `nranks` processes started as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR/PORT on
    loopback); every one must exit 0. For the small jobs under tests/jobs/ that make real dumps."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", str(script), *args], cwd=REPO,
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(nranks), "MASTER_ADDR": "127.0.0.1",
                                   "MASTER_PORT": str(port)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(nranks)]
    try:
        logs = [p.communicate(timeout=timeout)[0].decode() for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert all(p.returncode == 0 for p in procs), logs
