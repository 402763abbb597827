"""Every wait for a peer is bounded by --timeout (with its documented floor, runner.MIN_STORE_WAIT_S), says on
whom it waits, and ends the run with one line: exit 1 for a peer that never came (issue 69)."""
import socket
import threading
import time

import pytest

from helpers import free_port, run
from nccl_bench.job.runner import MIN_STORE_WAIT_S

SMOKE = ["-m", "nccl_bench", "smoke", "--backend", "gloo", "--timeout", "4"]


def ended_in_one_line(proc, took: float, says: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    failed = [line for line in proc.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1 and says in failed[0], proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert took < MIN_STORE_WAIT_S + 5 + 5, f"took {took:.1f} s"  # the floor, the 5 s promised, start-up


@pytest.fixture
def silent_port():
    """A port held by a service that accepts every connection and never answers."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held, stop = [], threading.Event()

    def accept():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                pass
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join()
    for c in held:
        c.close()
    sock.close()


def test_a_store_that_accepts_and_never_answers_is_a_peer_that_never_came(silent_port):
    t0 = time.monotonic()
    proc = run(SMOKE, env={"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": str(silent_port)}, timeout=60)
    ended_in_one_line(proc, time.monotonic() - t0, "accepts connections but never answered")
    assert "waiting for the job store at" in proc.stderr, proc.stderr


@pytest.mark.parametrize("env", [{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"},
                                 {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}],
                         ids=["mpirun", "env"])
def test_a_peer_that_never_arrives_ends_the_run_once_not_each_mode(env):
    t0 = time.monotonic()
    proc = run(SMOKE, env={**env, "MASTER_PORT": str(free_port())}, timeout=60)
    ended_in_one_line(proc, time.monotonic() - t0, "rank 1 (host unknown) never joined the job")
    assert "waiting for rank 1 (host unknown) to join the job" in proc.stderr, proc.stderr


@pytest.mark.parametrize("rank", ["0", "1"], ids=["rank 0 meeting its peers", "rank 1 finding the store"])
def test_a_rank_waiting_for_its_peers_ends_at_once_and_quietly_when_its_run_was_stopped(tmp_path, rank):
    """A rank born just before a Ctrl-C drops it (launcher.run_module) and goes on to wait for peers (or rank 0's
    store) that the Ctrl-C ended: once the run's stop line was said (the marker our launcher names), the wait ends
    with 130 and no line of its own (a CI run saw "interrupted" then "waiting for rank 1 ... 10 s of 60 s")."""
    said = tmp_path / "said"
    said.touch()  # another process of the run said "interrupted"
    t0 = time.monotonic()
    proc = run(SMOKE, env={"RANK": rank, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": str(free_port()), "NCCL_BENCH_SAID": str(said)}, timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "", proc.stderr
    assert took < MIN_STORE_WAIT_S, f"took {took:.1f} s"
