"""Nodes on one machine (issues 32, 51): each a network namespace with its own hostname and address, all
joined by a bridge in a namespace of their own, so that no address or link ever exists outside the
namespaces made here. The same fixture serves the CPU tests and the GPU scripts (tests/gpu/nodes.sh):
a node's processes get its GPUs through CUDA_VISIBLE_DEVICES, and NCCL between nodes takes its socket
transport on the node's `eth0`.

    with Nodes(2) as nodes:
        p = nodes.start(0, [sys.executable, "-m", "stress", ...])   # hostname node0, 198.18.0.1
        nodes.shape(1, "20mbit")                                    # tc tbf on node1's link
        nodes.shape_pair(0, 1, "20mbit")                            # only between node0 and node1
        nodes.cut(1); nodes.mend(1)                                 # its link down, then up
    # every process inside is killed, the namespaces (and with them the links) deleted

Two ways to make them, the same namespaces either way: iproute2 (`ip`, `tc`) where it is installed, else
pyroute2 (netlink from Python; the GPU machine has no iproute2). NETNS_BACKEND_ENV picks one. A process
enters its node with `nsenter` into the namespace, then `unshare --uts --mount`: its own hostname, and
the nodes' hosts file (under /etc/netns/) mounted over /etc/hosts, as `ip netns exec` does, so every
node resolves every node's name, as a cluster's DNS would. Addresses come from 198.18.0.0/15, reserved
for network benchmark tests (RFC 2544). Names start with NAME_PREFIX and the creating pid: a namespace
left by a test that was killed outright is removed by the next Nodes() (its pid is gone). Needs root
(`why_not()` says why not).
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
ETC = "/etc/netns"  # ETC/NS/hosts is mounted over /etc/hosts inside node NS: the nodes' names resolve
RUN = "/run/netns"  # where both ways keep a namespace's handle
NETNS_BACKEND_ENV = "NCCL_BENCH_NETNS"  # "iproute2" or "pyroute2"; default: iproute2 where installed


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=_CMD_S)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()[:300]}")
    return r


class IpRoute2:
    """Namespaces, links and qdiscs through `ip` and `tc`."""
    name = "iproute2"

    @staticmethod
    def missing() -> str | None:
        return next((f"no `{t}` here (iproute2)" for t in ("ip", "tc") if not shutil.which(t)), None)

    def add_ns(self, ns: str) -> None:
        _run(["ip", "netns", "add", ns])

    def del_ns(self, ns: str) -> None:
        _run(["ip", "netns", "del", ns], check=False)

    def bridge(self, ns: str, name: str) -> None:
        _run(["ip", "-n", ns, "link", "add", name, "type", "bridge"])
        _run(["ip", "-n", ns, "link", "set", name, "up"])

    def veth(self, ns: str, name: str, peer_ns: str, peer: str, master: str) -> None:
        # both ends made inside their namespaces: nothing appears in the host's
        _run(["ip", "link", "add", name, "netns", ns, "type", "veth", "peer", "name", peer, "netns", peer_ns])
        _run(["ip", "-n", ns, "link", "set", name, "master", master, "up"])

    def address(self, ns: str, dev: str, addr: str, prefix: int) -> None:
        _run(["ip", "-n", ns, "addr", "add", f"{addr}/{prefix}", "dev", dev])
        _run(["ip", "-n", ns, "link", "set", dev, "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def state(self, ns: str, dev: str, up: bool) -> None:
        _run(["ip", "-n", ns, "link", "set", dev, "up" if up else "down"])

    def tbf(self, ns: str, dev: str, rate: str) -> None:
        _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit",
              "latency", "400ms"])

    def direct(self, ns: str, dev: str, peer_ns: str, peer: str, src: str, dst: str, rate: str) -> None:
        """A link of their own between two nodes, `rate` each way (tbf on both ends), and a host route on each
        side that sends the other's address over it: their traffic to each other takes it, all else the switch."""
        _run(["ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", peer, "netns", peer_ns])
        for here, d, me, other in ((ns, dev, src, dst), (peer_ns, peer, dst, src)):
            _run(["ip", "-n", here, "link", "set", d, "up"])
            _run(["ip", "-n", here, "route", "add", f"{other}/32", "dev", d, "src", me])
            self.tbf(here, d, rate)


class PyRoute2:
    """The same through pyroute2's netlink sockets, for machines without iproute2."""
    name = "pyroute2"

    @staticmethod
    def missing() -> str | None:
        try:
            import pyroute2  # noqa: F401
        except ImportError:
            return "no iproute2 and no pyroute2 here (pip install pyroute2)"
        return None

    def add_ns(self, ns: str) -> None:
        from pyroute2 import netns
        netns.create(ns)

    def del_ns(self, ns: str) -> None:
        from pyroute2 import netns
        try:
            netns.remove(ns)
        except OSError:
            pass  # gone already

    def _in(self, ns: str):
        from pyroute2 import NetNS
        return NetNS(ns)

    def bridge(self, ns: str, name: str) -> None:
        with self._in(ns) as ipr:
            ipr.link("add", ifname=name, kind="bridge")
            ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")

    def veth(self, ns: str, name: str, peer_ns: str, peer: str, master: str) -> None:
        with self._in(ns) as ipr:
            ipr.link("add", ifname=name, kind="veth", peer={"ifname": peer, "net_ns_fd": peer_ns})
            ipr.link("set", index=ipr.link_lookup(ifname=name)[0], master=ipr.link_lookup(ifname=master)[0],
                     state="up")

    def address(self, ns: str, dev: str, addr: str, prefix: int) -> None:
        with self._in(ns) as ipr:
            idx = ipr.link_lookup(ifname=dev)[0]
            ipr.addr("add", index=idx, address=addr, prefixlen=prefix)
            ipr.link("set", index=idx, state="up")
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")

    def state(self, ns: str, dev: str, up: bool) -> None:
        with self._in(ns) as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname=dev)[0], state="up" if up else "down")

    def tbf(self, ns: str, dev: str, rate: str) -> None:
        with self._in(ns) as ipr:
            idx = ipr.link_lookup(ifname=dev)[0]
            try:
                ipr.tc("del", index=idx, root=True)
            except Exception:  # pyroute2's NetlinkError: no qdisc of ours there yet
                pass
            ipr.tc("add", "tbf", index=idx, handle="1:", root=True, rate=rate, burst=4096, latency="400ms")

    def direct(self, ns: str, dev: str, peer_ns: str, peer: str, src: str, dst: str, rate: str) -> None:
        raise RuntimeError("a link between two nodes alone is made with iproute2 here")


def backend():
    """The way this machine makes namespaces: NETNS_BACKEND_ENV, else iproute2 where installed, else pyroute2."""
    chosen = os.environ.get(NETNS_BACKEND_ENV, "")
    if chosen:
        return {"iproute2": IpRoute2, "pyroute2": PyRoute2}[chosen]()
    return IpRoute2() if IpRoute2.missing() is None else PyRoute2()


def why_not() -> str | None:
    """None when namespaces can be made here, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("unshare", "nsenter", "mount"):
        if not shutil.which(tool):
            return f"no `{tool}` here (util-linux)"
    b = backend()
    if (why := b.missing()):
        return why
    probe = f"{NAME_PREFIX}{os.getpid()}probe"
    try:
        b.add_ns(probe)
    except Exception as e:  # RuntimeError from ip, OSError or NetlinkError from pyroute2: say it
        return f"making a network namespace failed ({b.name}): {str(e)[:200]}"
    b.del_ns(probe)
    return None


def _ours() -> list[str]:
    try:
        return sorted(n for n in os.listdir(RUN) if n.startswith(NAME_PREFIX))
    except OSError:
        return []


def _pids_in(ns: str) -> list[int]:
    """Processes whose network namespace is `ns` (what `ip netns pids` does)."""
    try:
        target = os.stat(f"{RUN}/{ns}").st_ino
    except OSError:
        return []
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == target and int(pid) != os.getpid():
                out.append(int(pid))
        except OSError:
            continue
    return out


def sweep_stale() -> None:
    """Namespaces a killed test left behind (their creator's pid is gone): killed inside and deleted."""
    for ns in _ours():
        pid = ns[len(NAME_PREFIX):].split("n")[0].split("s")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _empty(ns)


def _empty(ns: str) -> None:
    """Kill every process inside `ns`, wait for them, delete it."""
    for _ in range(50):
        pids = _pids_in(ns)
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    backend().del_ns(ns)
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
        self.way = backend()

    def addr(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    def host(self, i: int) -> str:
        return f"node{i}"

    def __enter__(self) -> "Nodes":
        try:
            self.way.add_ns(self.switch)
            self.way.bridge(self.switch, "br0")
            hosts = "127.0.0.1 localhost\n" + "".join(f"{self.addr(k)} {self.host(k)}\n" for k in range(self.n))
            for i, ns in enumerate(self.ns):
                self.way.add_ns(ns)
                os.makedirs(f"{ETC}/{ns}", exist_ok=True)
                with open(f"{ETC}/{ns}/hosts", "w") as f:
                    f.write(hosts)
                self.way.veth(self.switch, f"p{i}", ns, "eth0", "br0")
                self.way.address(ns, "eth0", self.addr(i), 24)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, i: int, argv: list[str], env: dict | None = None, cwd: str | None = None,
              **popen) -> subprocess.Popen:
        """`argv` inside node i, with its hostname and hosts file (UTS and mount namespaces of its own), in a
        session of its own."""
        ns = self.ns[i]
        inside = f'mount --bind {ETC}/{ns}/hosts /etc/hosts && hostname {self.host(i)} && exec "$@"'
        wrapped = ["nsenter", f"--net={RUN}/{ns}", "unshare", "--uts", "--mount", "--propagation", "private",
                   "sh", "-c", inside, "sh", *argv]
        p = subprocess.Popen(wrapped, env=env, cwd=cwd, start_new_session=True, **popen)
        self.procs.append(p)
        return p

    def shape(self, i: int, rate: str) -> None:
        """Node i's link limited to `rate` (tc tbf; netem is not in every kernel)."""
        self.way.tbf(self.ns[i], "eth0", rate)

    def shape_pair(self, i: int, j: int, rate: str) -> None:
        """The link between nodes i and j alone limited to `rate`, both ways: their traffic to each other moves to
        a link of its own with tbf on both ends (no classful qdisc or filter needed: this kernel has tbf and
        veth); their traffic to other nodes still takes the switch."""
        self.way.direct(self.ns[i], f"x{j}", self.ns[j], f"x{i}", self.addr(i), self.addr(j), rate)

    def cut(self, i: int) -> None:
        """Node i drops off the network: its end of the link goes down (on the switch's side too)."""
        self.way.state(self.switch, f"p{i}", up=False)

    def mend(self, i: int) -> None:
        self.way.state(self.switch, f"p{i}", up=True)

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
