"""Nodes on one machine (issue 32): each a network namespace with its own hostname and address, all
joined by a bridge in a namespace of their own, so that no address or link ever exists outside the
namespaces made here.

    with Nodes(2) as nodes:
        p = nodes.start(0, [sys.executable, "-m", "stress", ...])   # hostname node0, 198.18.0.1
        nodes.shape(1, "20mbit")                                    # tc tbf on node1's link
        nodes.cut(1); nodes.mend(1)                                 # its link down, then up
    # every process inside is killed, the namespaces (and with them the links) deleted

Each node resolves every node's name (a hosts file under /etc/netns/, which `ip netns exec` mounts
over /etc/hosts), as a cluster's DNS would. Addresses come from 198.18.0.0/15, reserved for network benchmark tests (RFC 2544). Names start
with NAME_PREFIX and the creating pid: a namespace left by a test that was killed outright is
removed by the next Nodes() (its pid is gone). Needs root and iproute2 (`why_not()` says why not).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

NAME_PREFIX = "nbt"
SUBNET = "198.18.0"  # node i is SUBNET.(i + 1)/24
_CMD_S = 10  # every ip/tc call is bounded
ETC = "/etc/netns"  # `ip netns exec NS` bind-mounts ETC/NS/hosts over /etc/hosts: the nodes' names resolve


def why_not() -> str | None:
    """None when namespaces can be made here, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "unshare"):
        if not shutil.which(tool):
            return f"no `{tool}` here (iproute2, util-linux)"
    probe = f"{NAME_PREFIX}{os.getpid()}probe"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"`ip netns add` failed: {r.stderr.strip()[:200]}"
    _ip("netns", "del", probe, check=False)
    return None


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=_CMD_S)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()[:300]}")
    return r


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["ip", *args], check)


def _ours() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(NAME_PREFIX)]


def sweep_stale() -> None:
    """Namespaces a killed test left behind (their creator's pid is gone): killed inside and deleted."""
    for ns in _ours():
        pid = ns[len(NAME_PREFIX):].split("n")[0].split("s")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _empty(ns)


def _empty(ns: str) -> None:
    """Kill every process inside `ns`, wait for them, delete it."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    _ip("netns", "del", ns, check=False)
    shutil.rmtree(f"{ETC}/{ns}", ignore_errors=True)


class Nodes:
    """`n` nodes node0..node{n-1} on one bridge; a context manager that removes everything it made."""

    def __init__(self, n: int = 2):
        if not 1 <= n <= 8:
            raise ValueError(f"1 to 8 nodes, got {n}")
        sweep_stale()
        self.n = n
        tag = f"{NAME_PREFIX}{os.getpid()}"
        self.switch = f"{tag}sw"
        self.ns = [f"{tag}n{i}" for i in range(n)]
        self.procs: list[subprocess.Popen] = []

    def addr(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    def host(self, i: int) -> str:
        return f"node{i}"

    def __enter__(self) -> "Nodes":
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            hosts = "127.0.0.1 localhost\n" + "".join(f"{self.addr(k)} {self.host(k)}\n" for k in range(self.n))
            for i, ns in enumerate(self.ns):
                _ip("netns", "add", ns)
                os.makedirs(f"{ETC}/{ns}", exist_ok=True)
                with open(f"{ETC}/{ns}/hosts", "w") as f:
                    f.write(hosts)
                # both ends made inside their namespaces: nothing appears in the host's
                _ip("link", "add", f"p{i}", "netns", self.switch, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, i: int, argv: list[str], env: dict | None = None, cwd: str | None = None,
              **popen) -> subprocess.Popen:
        """`argv` inside node i, with its hostname (a UTS namespace of its own), in a session of its own."""
        wrapped = ["ip", "netns", "exec", self.ns[i], "unshare", "--uts", "sh", "-c",
                   f'hostname {self.host(i)} && exec "$@"', "sh", *argv]
        p = subprocess.Popen(wrapped, env=env, cwd=cwd, start_new_session=True, **popen)
        self.procs.append(p)
        return p

    def shape(self, i: int, rate: str) -> None:
        """Node i's link limited to `rate` (tc tbf; netem is not in every kernel)."""
        _run(["tc", "-n", self.ns[i], "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate,
              "burst", "32kbit", "latency", "400ms"])

    def cut(self, i: int) -> None:
        """Node i drops off the network: its end of the link goes down (on the switch's side too)."""
        _ip("-n", self.switch, "link", "set", f"p{i}", "down")

    def mend(self, i: int) -> None:
        _ip("-n", self.switch, "link", "set", f"p{i}", "up")

    def close(self) -> None:
        """Kill what was started (its whole session), then everything inside the namespaces; delete them."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for ns in [*self.ns, self.switch]:
            if ns in _ours():
                _empty(ns)
            shutil.rmtree(f"{ETC}/{ns}", ignore_errors=True)
        try:
            os.rmdir(ETC)  # only when empty: another's namespace files stay
        except OSError:
            pass

    def leftovers(self) -> list[str]:
        """Namespaces of this Nodes still present (for the tests' own check)."""
        return [ns for ns in _ours() if ns in (*self.ns, self.switch)]
