"""The nodes fixture (tests/netns.py) made both ways it knows, iproute2 and pyroute2 (issue 51: the GPU
machine has no iproute2): each node has its hostname, resolves the others by name, reaches them over its
own link, and a shaped link is slower; nothing is left afterwards."""
import subprocess
import sys

import pytest

import netns

LISTEN = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 29555)); s.listen(1)
c, _ = s.accept(); n, t = 0, None
while (b := c.recv(1 << 16)):
    t = t or time.monotonic()
    n += len(b)
print(socket.gethostname(), n, round(time.monotonic() - t, 3), flush=True)
"""
SEND = """
import socket, sys, time
for _ in range(100):
    try:
        c = socket.create_connection(("node0", 29555), timeout=2); break
    except OSError:
        time.sleep(0.05)
c.sendall(b"x" * int(sys.argv[1])); c.close()
print(socket.gethostname(), flush=True)
"""


@pytest.mark.parametrize("way", ["iproute2", "pyroute2"])
def test_nodes_have_names_reach_each_other_and_a_shaped_link_is_slower(way, monkeypatch):
    monkeypatch.setenv(netns.NETNS_BACKEND_ENV, way)
    if (why := netns.why_not()):
        pytest.skip(f"no nodes made by {way} here: {why}")
    seconds = {}
    with netns.Nodes(2) as nodes:
        assert nodes.way.name == way
        for shaped in (False, True):
            if shaped:
                nodes.shape(1, "8mbit")
            rx = nodes.start(0, [sys.executable, "-c", LISTEN], stdout=subprocess.PIPE, text=True)
            tx = nodes.start(1, [sys.executable, "-c", SEND, str(1 << 20)], stdout=subprocess.PIPE, text=True)
            sent, _ = tx.communicate(timeout=30)
            got, _ = rx.communicate(timeout=30)
            host, nbytes, secs = got.split()  # timed where the bytes arrive: a sender's buffers hide the link
            assert (host, nbytes, sent.strip()) == ("node0", str(1 << 20), "node1"), (got, sent)
            seconds[shaped] = float(secs)
    assert not nodes.leftovers()
    # 1 MiB at 8 Mbit/s is about 1 s where it arrives; unshaped, milliseconds
    assert seconds[True] > 0.5 > seconds[False], seconds
