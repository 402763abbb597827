"""How a self-launched stress run ends when it is told to: SIGKILL of the launcher; SIGINT and SIGTERM
to the whole process group (a terminal's Ctrl-C; `timeout`, Slurm's scancel, systemd), to the launcher
alone (`kill`) and to one rank alone. Each ends within seconds with the shell's code for that signal,
leaves no process behind, and (SIGINT, SIGTERM) leaves a journal that says the run was stopped, then
its summary, rather than one cut mid-line.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from helpers import REPO, TOKEN_VAR, assert_no_survivors

ARGS = ["-m", "stress", "--backend", "gloo", "--nranks", "2", "--rounds", "100000", "--skew-max", "0.01",
        "--timeout", "10"]


def default_sigint() -> None:
    """Ctrl-C and a hangup as in a terminal: a shell's background job (or a CI runner, or nohup) may start us with
    SIGINT or SIGHUP ignored, which every child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def journal_records(path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def start(args: list[str], token: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=REPO, env={**os.environ, TOKEN_VAR: token},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint)


def rank_pids(token: str) -> list[int]:
    """The ranks: processes of this run forked by the forkserver (whose parent is the launcher)."""
    from helpers import survivors
    mine = set(survivors(token))
    parent = {}
    for pid in mine:
        try:
            parent[pid] = int((Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]))
        except (OSError, ValueError, IndexError):
            pass
    return sorted(p for p, pp in parent.items() if pp in mine and parent.get(pp) in mine)


def signal_and_wait(proc: subprocess.Popen, sig: int, ready, to: str = "default",
                    token: str = "") -> tuple[str, str, float]:
    """Once ready() holds, send `sig` to `to`: "group" (every process of the run), "launcher", "rank"
    (the last rank alone) or "default" (SIGINT to the group, as a terminal's Ctrl-C; else the launcher);
    (stdout, stderr, seconds it then took to end). The group is killed if it outlives this."""
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=5)
            time.sleep(0.05)
        if to == "default":
            to = "group" if sig == signal.SIGINT else "launcher"
        target = rank_pids(token)[-1:] if to == "rank" else []
        assert to != "rank" or target, "no rank found"
        t0 = time.monotonic()
        if to == "group":
            os.killpg(proc.pid, sig)
        elif to == "rank":
            os.kill(target[0], sig)
        else:
            os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
        return out, err, time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("sig, code", [(signal.SIGKILL, -9), (signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGKILL", "SIGINT", "SIGTERM"])
def test_a_signal_ends_the_run_at_once_and_leaves_nothing(tmp_path, sig, code):
    token, journal = uuid.uuid4().hex, tmp_path / "j.jsonl"
    proc = start([*ARGS, "--journal", str(journal)], token)
    out, err, took = signal_and_wait(
        proc, sig, lambda: sum(r.get("type") == "round" for r in journal_records(journal)) >= 5)
    assert proc.returncode == code, (proc.returncode, out[-2000:], err[-2000:])
    assert took < 5, f"{sig.name} took {took:.1f} s to end the run"
    assert "Traceback" not in err and "resource_tracker" not in err, err  # no library's lines
    assert_no_survivors(token)
    types = [r.get("type") for r in journal_records(journal)]
    if sig != signal.SIGKILL:
        assert types[-2:] == ["stopped", "end"], types[-5:]  # why it ended, then the summary
        said = [line for line in (out + err).splitlines() if "stopped" in line or "interrupted" in line]
        assert len(said) == 1 and sig.name in said[0], said  # said once, naming the signal


@pytest.mark.parametrize("sig, code, to", [(signal.SIGTERM, 143, "group"), (signal.SIGTERM, 143, "rank"),
                                           (signal.SIGINT, 130, "launcher"), (signal.SIGINT, 130, "rank"),
                                           (signal.SIGHUP, 129, "launcher"), (signal.SIGHUP, 129, "group")],
                         ids=["SIGTERM-group", "SIGTERM-rank", "SIGINT-launcher", "SIGINT-rank", "SIGHUP-launcher",
                              "SIGHUP-group"])
def test_every_stop_signal_anywhere_ends_with_the_stop_line_and_the_summary(tmp_path, sig, code, to):
    """`timeout -s TERM` and scancel signal the whole group (the forkserver included); `kill` of one rank
    or of the launcher; SIGHUP (a closed terminal, to the group; a service manager's reload, to the launcher):
    the same clean stop in every case."""
    token, journal = uuid.uuid4().hex, tmp_path / "j.jsonl"
    proc = start([*ARGS, "--journal", str(journal)], token)
    out, err, took = signal_and_wait(
        proc, sig, lambda: sum(r.get("type") == "round" for r in journal_records(journal)) >= 5, to, token)
    assert proc.returncode == code, (proc.returncode, out[-2000:], err[-2000:])
    assert took < 5, f"{sig.name} to the {to} took {took:.1f} s to end the run"
    assert "Traceback" not in err, err
    assert_no_survivors(token)
    types = [r.get("type") for r in journal_records(journal)]
    assert types[-2:] == ["stopped", "end"], types[-5:]
    assert list(tmp_path.glob("j-summary*.json")), "no summary written"
    said = [line for line in (out + err).splitlines() if "stopped" in line]
    assert len(said) == 1 and sig.name in said[0], (out, err)


def a_process_shows(token: str, proc_file: str, needle: bytes) -> bool:
    """Some process of the run has `needle` in its /proc/PID/`proc_file`."""
    from helpers import survivors
    for pid in survivors(token):
        try:
            if needle in Path(f"/proc/{pid}/{proc_file}").read_bytes():
                return True
        except OSError:
            pass
    return False


def forkserver_starting(token: str) -> bool:
    """The run's forkserver exists: it is importing torch (its preload) for a second or so."""
    return a_process_shows(token, "cmdline", b"multiprocessing.forkserver")


def importing_ours(token: str) -> bool:
    """The launcher is past Python's own start and into our imports: it has mapped the socket module (our
    `comm` imports it; `site` does not). A fixed delay found it still starting Python on a loaded machine."""
    return a_process_shows(token, "maps", b"_socket")


_RANKS_SEEN: dict[str, float] = {}


def ranks_up_for(token: str, seconds: float) -> bool:
    """The run's ranks have existed for `seconds`: past their meeting and init, into the sweep (a fixed delay
    from the start kept two ranks busy for seconds longer than needed)."""
    if token not in _RANKS_SEEN and rank_pids(token):
        _RANKS_SEEN[token] = time.monotonic()
    return token in _RANKS_SEEN and time.monotonic() - _RANKS_SEEN[token] > seconds


MOMENTS = {  # when a Ctrl-C reaches the process group of a starting bench, as ready(token, t_start)
    "launcher-imports": lambda token, t0: importing_ours(token),
    "forkserver-imports-torch": lambda token, t0: forkserver_starting(token),
    "ranks-starting": lambda token, t0: bool(rank_pids(token)),
    "timed-loop": lambda token, t0: ranks_up_for(token, 2.0),
}


@pytest.mark.parametrize("sig, moment", [(signal.SIGINT, m) for m in MOMENTS] +
                         [(signal.SIGTERM, "forkserver-imports-torch"), (signal.SIGTERM, "ranks-starting")],
                         ids=lambda v: v.name if isinstance(v, signal.Signals) else v)
def test_a_stop_at_any_moment_of_a_bench_is_the_one_line(tmp_path, sig, moment):
    """A Ctrl-C (or SIGTERM) to the process group while the launcher imports, while the forkserver imports
    torch (the launcher meanwhile imports torch's launcher), while the ranks start and in the sweep: the run
    ends within seconds with the one line and 130 (143), no traceback from any process, nothing left running."""
    token = uuid.uuid4().hex
    proc = start(["-m", "nccl_bench", "bench", "--backend", "gloo", "--nranks", "2", "-b", "8", "-e", "64M",
                  "-n", "200", "-J", str(tmp_path / "b.json")], token)
    t0 = time.monotonic()
    out, err, took = signal_and_wait(proc, sig, lambda: MOMENTS[moment](token, t0), "group", token)
    assert proc.returncode == 128 + sig, (proc.returncode, out[-2000:], err[-2000:])
    assert took < 15, f"{sig.name} took {took:.1f} s"
    assert err.strip() == {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}[sig], err
    assert_no_survivors(token)


def in_session(sid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process in the run's session, zombies included (their environment is gone)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid:
                out.append((int(name), fields[0]))
    return out


def busy_loops(n: int = 2) -> list[subprocess.Popen]:
    """CPU-heavy neighbours: on a 2-core machine they keep every core busy while the run starts and stops."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


STOPPED_AT = {
    "bench": ["-m", "nccl_bench", "bench", "--backend", "gloo", "--nranks", "2", "-b", "8", "-e", "64M", "-n", "200"],
    "stress": ["-m", "stress", "--backend", "gloo", "--nranks", "2", "--rounds", "100000"],
}


def stopped_at(command: str, at: float, folder: Path) -> None:
    """One run of `command`, Ctrl-C to its process group `at` seconds in: 130 within 20 s, no traceback, and
    one second after the launcher returned nothing of the run left, zombies included."""
    token = uuid.uuid4().hex
    out_file = ["-J" if command == "bench" else "--journal", str(folder / f"{command}-{at}")]
    proc = start([*STOPPED_AT[command], *out_file], token)
    t0 = time.monotonic()
    # never before the launcher is into our imports: a Ctrl-C while Python imports `site` is fatal to Python
    # itself (exit 1) before any code of ours runs, and a loaded machine can take 0.3 s to get there
    out, err, took = signal_and_wait(proc, signal.SIGINT, lambda: time.monotonic() - t0 >= at and
                                     importing_ours(token), "group", token)
    assert proc.returncode == 130, (at, proc.returncode, out[-2000:], err[-2000:])
    assert took < 20, f"Ctrl-C at {at} s took {took:.1f} s"
    assert "Traceback" not in err, (at, err)
    time.sleep(1.0)
    assert_no_survivors(token, grace=0.0)
    assert not in_session(proc.pid), (at, in_session(proc.pid))  # zombies too: every one reaped


@pytest.mark.parametrize("command", sorted(STOPPED_AT))
def test_ctrl_c_at_any_moment_under_load_is_130_and_nothing_lives_a_second_later(tmp_path, command):
    """Ctrl-C to the process group 0.3, 1, 2.5 and 4 s into a run (issue 50's moments: importing, starting
    ranks, running), two busy loops beside it: exit 130 within 20 s, no traceback, and one second after the
    launcher returned no process of the run is left (the launcher waits for everything it started, the
    forkserver importing torch included). The runs overlap, each its own process group, so the test takes
    the longest run's time, not the sum; the later three start once the first has had its Ctrl-C: four
    Pythons starting at once beside the busy loops can leave one still importing `site` at 0.3 s, where
    Python itself makes any Ctrl-C fatal ("Failed to import the site module", exit 1) before our code runs."""
    from concurrent.futures import ThreadPoolExecutor
    loops = busy_loops()
    try:
        with ThreadPoolExecutor(4) as pool:
            runs = [pool.submit(stopped_at, command, 0.3, tmp_path)]
            time.sleep(0.5)
            runs += [pool.submit(stopped_at, command, at, tmp_path) for at in (1.0, 2.5, 4.0)]
            for run in runs:
                run.result()
    finally:
        for p in loops:
            p.kill()
            p.wait()


def test_a_ctrl_c_caught_from_code_that_exec_ran_still_ends_130(tmp_path):
    """CPython marks a KeyboardInterrupt leaving exec'd or eval'd code as unhandled even when caught (torch's
    import runs thousands of dataclass and namedtuple methods made that way), and a `python -m` run then
    kills itself with SIGINT at exit. Our one line clears the mark: 130, not -2."""
    (tmp_path / "caught.py").write_text(
        "import sys\nimport nccl_bench\ntry:\n    exec('raise KeyboardInterrupt')\nexcept KeyboardInterrupt:\n"
        "    sys.exit(nccl_bench.interrupted())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "caught"], env=env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr.strip()) == (130, "interrupted"), (proc.returncode, proc.stderr)


def test_a_stop_a_rank_carried_out_ends_the_job_as_stopped_however_the_rank_exits():
    """SIGTERM to one rank once ended the job 0 (issue 72): the stop is the launcher's to say, not only the
    signalled rank's exit code. The job's rank notes the stop, then every rank ends well."""
    from helpers import run
    proc = run(["-m", "stopjob"], env={"PYTHONPATH": str(REPO / "tests" / "jobs")}, timeout=120)
    assert proc.returncode == 143, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines() == ["terminated"], proc.stderr



def test_a_ctrl_c_that_python_hands_on_as_a_runtimeerror_is_still_the_one_line(tmp_path):
    """Python 3.11 hands on an exception raised while a dataclass's fields are named as a RuntimeError caused by
    it: a Ctrl-C while a rank imported comm/bootstrap.py came out as "Error calling __set_name__ on 'Field'
    instance 'ids'", a traceback (CI). Planted here in a module's class body: 130 and the one line."""
    (tmp_path / "planted.py").write_text(
        "class Named:\n"
        "    def __set_name__(self, owner, name):\n"
        "        raise KeyboardInterrupt\n"
        "class Holder:\n"
        "    x = Named()\n"
        "def main():\n"
        "    return 0\n")
    proc = subprocess.run([sys.executable, "-c", "import sys; from nccl_bench import entry; "
                           "sys.exit(entry('planted', 'main'))"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.strip() == "interrupted", proc.stderr
