"""The job store without torch (nccl_bench.job.ownstore): TCPStore's calls as the job makes them, on real
sockets, and a real job on our own launcher whose processes never load torch."""
import json
import os
import socket
import struct
import threading
import time

import pytest

from helpers import REPO, run
from nccl_bench.core.errors import BarrierTimeout
from nccl_bench.core.launch import Identity
from nccl_bench.job import ownstore
from nccl_bench.job.store import JobStore


@pytest.fixture
def served():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = ownstore.StoreServer(listener)
    clients = []

    def client(timeout=5.0):
        clients.append(ownstore.StoreClient("127.0.0.1", server.port, timeout))
        return clients[-1]
    yield server, client
    for c in clients:
        c.close()
    server.close()


def test_the_calls_the_job_makes(served):
    server, client = served
    a, b = client(), client()
    a.set("k", b"\x00\xffbinary")
    a.set("s", "text")
    assert b.get("k") == b"\x00\xffbinary" and b.get("s") == b"text"
    assert [a.add("n", 1), b.add("n", 2)] == [1, 3]
    assert b.get("n") == b"3"  # as TCPStore keeps a counter: its decimal text
    assert a.check(["k", "s"]) and not a.check(["k", "missing"])
    assert b.multi_get(["s", "k"]) == [b"text", b"\x00\xffbinary"]
    assert a.num_keys() == server.num_keys() == 3
    assert a.delete_key("s") and not a.delete_key("s")


def test_a_wait_ends_when_another_client_sets_the_key(served):
    _, client = served
    a, b = client(), client()
    setter = threading.Timer(0.2, b.set, ("late", b"1"))
    setter.start()
    t0 = time.monotonic()
    a.wait(["late"], 5.0)
    assert time.monotonic() - t0 < 2.0
    setter.join()  # its answer read before the clients close


def test_a_wait_that_runs_out_raises_and_the_connection_goes_on(served):
    _, client = served
    a = client()
    with pytest.raises(ownstore.StoreTimeout):
        a.wait(["never"], 0.1)
    a.set("after", b"1")
    assert a.get("after") == b"1"


def test_an_oversized_request_closes_that_connection_only(served):
    server, client = served
    good = client()
    rogue = socket.create_connection(("127.0.0.1", server.port))
    rogue.sendall(struct.pack("!I", ownstore.MAX_REQUEST + 1))
    assert rogue.recv(1) == b""  # closed, nothing read past the length
    rogue.close()
    good.set("still", b"1")
    assert good.get("still") == b"1"


def test_a_barrier_names_the_rank_that_never_came(tmp_path):
    ident = Identity(rank=0, world_size=2, local_rank=0, local_world_size=2, master_addr="127.0.0.1", master_port=0,
                     launcher="torchrun", host="here", store_file=str(tmp_path / "store"))
    store = JobStore(ident, timeout=5.0, torch_free=True)
    try:
        assert isinstance(store.raw, ownstore.StoreClient)
        with pytest.raises(BarrierTimeout) as e:
            store.barrier("never", timeout=0.2)
        assert [r for r, _ in e.value.missing] == [1]
    finally:
        store.close()


def test_a_job_without_torch_on_our_launcher(tmp_path):
    """Ranks forked from the warm server, the store and the ID exchange: torch is loaded by no process."""
    out = tmp_path / "job.json"
    env = {"PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "jobs"), str(REPO)])}
    proc = run(["-m", "torchfreejob", str(out), "--nranks", "3"], timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2]
    assert not doc["launcher_torch"] and not any(r["torch"] for r in ranks)
    assert {r["store"] for r in ranks} == {"StoreClient"}
    scoped = {json.dumps(r["ids"]["1/scoped"]) for r in ranks}
    assert len(scoped) == 1  # every rank read the one ID its root published


@pytest.mark.parametrize("how", ["group SIGINT", "launcher SIGTERM", "launcher SIGKILL"])
def test_ranks_forked_from_the_launcher_end_with_it(tmp_path, how):
    """A job without torch forks its ranks from the launcher itself: a Ctrl-C to the process group, a SIGTERM
    to the launcher and a SIGKILL of it each end every rank, with the shell's code where the launcher lives."""
    import signal
    import subprocess
    import sys
    import uuid
    from helpers import TOKEN_VAR, assert_no_survivors
    out, token = tmp_path / "job.json", uuid.uuid4().hex
    env = {**os.environ, TOKEN_VAR: token,
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "jobs"), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-m", "torchfreejob", str(out), "--nranks", "2", "--hold"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"job.json.rank{r}.pid").exists() for r in range(2)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        ranks = [int((tmp_path / f"job.json.rank{r}.pid").read_text()) for r in range(2)]
        parents = {int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) for pid in ranks}
        assert parents == {proc.pid}  # forked from the launcher, no server between
        if how == "group SIGINT":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM if how == "launcher SIGTERM" else signal.SIGKILL)
        code = proc.wait(timeout=30)
        assert code == {"group SIGINT": 130, "launcher SIGTERM": 143, "launcher SIGKILL": -9}[how], proc.stderr.read()
        if how != "launcher SIGKILL":
            assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_no_survivors(token, grace=10.0)
