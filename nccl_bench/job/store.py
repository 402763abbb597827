"""The job's own store, hosted by rank 0, and round-scoped barriers.

It is separate from any store PyTorch or the launcher creates. Under our self-launch rank 0
binds an ephemeral port and writes it to the file the launcher named; under torchrun it
publishes it through the launcher's rendezvous store; under Slurm or MPI rank 0 listens
on MASTER_PORT. A single-node job binds loopback only.

The store is c10d's TCPStore where the ranks load torch anyway (the gloo and torch backends build
process groups on it); a job whose ranks load no torch (`torch_free`) gets the same calls from
nccl_bench.job.ownstore instead. Under torchrun the launcher's own store is a TCPStore, so there the
job store is one too.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from datetime import timedelta

from nccl_bench import stopping
from nccl_bench.core.errors import BarrierTimeout, StoreSilent, StoreUnreachable
from nccl_bench.core.launch import Identity

_POLL_S = 0.02


def _td(seconds: float) -> timedelta:
    return timedelta(seconds=max(seconds, 0.001))


POLL_FIRST_S, POLL_MAX_S = 0.005, 0.1


def _reachable(addr: str, port: int, timeout: float, say: bool = True) -> bool:
    """Poll with plain sockets first: a failed TCPStore connect logs a C++ stack to stderr. The pause between
    tries doubles from 5 ms to 100 ms: ranks started together find rank 0's store as soon as it listens (a flat
    100 ms cost a rank under mpiexec that much of its start), and a slow one is not asked 100 times a second.
    A host name that does not resolve ends the wait at once (StoreUnreachable); a wait past SAY_AFTER_S is said
    once (`say`), so that no rank waits in silence. A run stopped meanwhile ends the wait as a Ctrl-C would."""
    t0, pause, said = time.monotonic(), POLL_FIRST_S, False
    while True:
        try:
            with socket.create_connection((addr, port), timeout=min(2.0, max(timeout, 0.1))):
                return True
        except socket.gaierror as e:
            raise StoreUnreachable(f"the job store's host {addr!r} does not resolve ({e.strerror}): set MASTER_ADDR "
                                   "to rank 0's node address") from None
        except OSError:
            if stopping():  # the run was stopped (a Ctrl-C this rank was born too late to catch): see runner.meet
                raise KeyboardInterrupt from None
            waited = time.monotonic() - t0
            if waited >= timeout:
                return False
            if say and not said and waited >= SAY_AFTER_S:
                print(f"waiting for the job store at {addr}:{port} (at most {timeout:g} s)", file=sys.stderr,
                      flush=True)
                said = True
            time.sleep(pause)
            pause = min(pause * 2, POLL_MAX_S)


SAY_AFTER_S = 5.0  # a wait for the store says what it waits on after this long


def _within(seconds: float, fn, say: str):
    """fn()'s value, or TimeoutError after `seconds`: a store client whose peer accepts and never answers
    waits in C++ for good (c10d's connect has no bound there); that thread is left behind as the process ends.
    `say` goes to stderr once the wait has lasted SAY_AFTER_S."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller as it is
            box["error"] = e
    thread = threading.Thread(target=run, name="nb-store-connect", daemon=True)
    thread.start()
    bound = max(seconds, 0.001) + 1.0  # the client's own timeout, if it keeps it, comes first
    thread.join(min(SAY_AFTER_S, bound))
    if thread.is_alive() and bound > SAY_AFTER_S:
        print(say, file=sys.stderr, flush=True)
        thread.join(bound - SAY_AFTER_S)
    if thread.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["value"]


def _publish(path: str, value) -> None:
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)  # whole or not at all: a reader never sees half an address


def _published(path: str, timeout: float):
    end = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                return json.load(f)
        except FileNotFoundError:
            if time.monotonic() >= end:
                raise StoreUnreachable(f"rank 0 never published the job store within {timeout:g}s") from None
            time.sleep(0.005)


def _listen(addr: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((addr, port))
    sock.listen(2048)
    return sock


class JobStore:
    """Rank 0 hosts; every rank is a client. Keys are namespaced under `nb/<job>/`."""

    def __init__(self, ident: Identity, timeout: float = 60.0, torch_free: bool = False):
        self.ident = ident
        self.timeout = timeout
        self.torch_free = torch_free and not ident.agent_store
        self._sock = None
        self.server = None
        addr, port = self._locate()
        if not _reachable(addr, port, timeout, say=ident.local_rank == 0):  # a node's first rank says the wait
            raise StoreUnreachable(f"cannot reach the job store at {addr}:{port} within {timeout:g}s "
                                   "(master address unreachable?)")
        try:
            self.raw = _within(timeout, lambda: self._joined(addr, port, timeout),
                               f"waiting for the job store at {addr}:{port} to answer (at most {timeout:g} s)")
        except TimeoutError:
            raise StoreSilent(f"the job store at {addr}:{port} accepts connections but never answered within "
                              f"{timeout:g}s: another service on that port (MASTER_PORT)?") from None
        except Exception as e:  # the store's errors (timeout, refused) say it is unreachable
            raise StoreUnreachable(
                f"cannot reach the job store at {addr}:{port} within {timeout:g}s "
                f"(master address unreachable?): {e.__class__.__name__}") from None
        self.address = f"{addr}:{port}"

    def _joined(self, addr: str, port: int, timeout: float):
        """A client of the store, which has answered once (this rank's host set)."""
        raw = self._client(addr, port, timeout)
        raw.set(f"host/{self.ident.rank}", self.ident.host)
        return raw

    # --- finding rank 0's store ---------------------------------------------------
    def _locate(self) -> tuple[str, int]:
        ident = self.ident
        bind = "127.0.0.1" if ident.single_node else "0.0.0.0"
        addr = "127.0.0.1" if ident.single_node else ident.master_addr
        if ident.store_file:
            # our launcher: rank 0 writes the port it bound to the launcher's file, the others read it there
            if ident.rank == 0:
                self._serve(bind, 0)
                _publish(ident.store_file, [addr, self.listen_port])
            addr, port = _published(ident.store_file, self.timeout)
            return addr, int(port)
        if ident.agent_store:
            # torchrun: the launcher's store tells the others which port rank 0 bound.
            agent = self._agent_store()
            key = f"nccl_bench/{ident.run_id}/{ident.restart}/job_store"
            if ident.rank == 0:
                self._serve(bind, 0)
                agent.set(key, json.dumps([addr, self.listen_port]))
            try:
                agent.wait([key], _td(self.timeout))
            except Exception:  # the store's timeout: rank 0 never published
                raise StoreUnreachable(f"rank 0 never published the job store within {self.timeout:g}s") from None
            addr, port = json.loads(agent.get(key))
            return addr, int(port)
        if ident.rank == 0:
            self._serve(bind, ident.master_port)
        return addr, ident.master_port

    def _client(self, addr: str, port: int, timeout: float):
        if self.torch_free:
            from nccl_bench.job.ownstore import StoreClient
            return StoreClient(addr, port, timeout)
        import torch.distributed as dist
        return dist.TCPStore(addr, port, None, False, _td(timeout), use_libuv=True)

    def _agent_store(self):
        i = self.ident
        if not _reachable(i.master_addr, i.master_port, self.timeout):
            raise StoreUnreachable(f"cannot reach the launcher's store at {i.master_addr}:{i.master_port} "
                                   f"within {self.timeout:g}s (master address unreachable?)")
        import torch.distributed as dist
        try:
            return dist.TCPStore(i.master_addr, i.master_port, None, False, _td(self.timeout), use_libuv=True)
        except Exception as e:  # TCPStore's errors say the launcher's store is unreachable
            raise StoreUnreachable(
                f"cannot reach the launcher's store at {i.master_addr}:{i.master_port}: "
                f"{e.__class__.__name__}") from None

    def _serve(self, bind: str, port: int) -> None:
        try:
            self._sock = _listen(bind, port)
        except OSError as e:
            raise StoreUnreachable(f"rank 0 cannot listen on {bind}:{port}: {e.strerror}") from None
        port = self._sock.getsockname()[1]
        self.listen_port = port
        if self.torch_free:
            from nccl_bench.job.ownstore import StoreServer
            self.server, self._sock = StoreServer(self._sock), None  # the server owns the listening socket now
            return
        import torch.distributed as dist
        self.server = dist.TCPStore(bind, port, None, True, _td(self.timeout), wait_for_workers=False,
                                    master_listen_fd=self._sock.fileno(), use_libuv=True)
        self._sock.detach()  # the store owns the listening socket now

    # --- barriers and gathers ------------------------------------------------------
    def host_of(self, rank: int) -> str:
        key = f"host/{rank}"
        return self.raw.get(key).decode() if self.raw.check([key]) else ""

    def hosts(self, timeout: float) -> list[str]:
        """Every rank's host, waiting up to `timeout` for ranks still connecting ('' for one that never came)."""
        try:
            self.raw.wait([f"host/{r}" for r in range(self.ident.world_size)], _td(timeout))
        except Exception:
            pass  # a rank that never connects is named by whatever waits for it next
        return [self.host_of(r) for r in range(self.ident.world_size)]

    def barrier(self, name: str, timeout: float | None = None, ranks: list[int] | None = None) -> None:
        """All ranks (or those of `ranks`) arrive at `name` (unique per round) or BarrierTimeout names
        who did not."""
        self.arrive(name, ranks)
        self.wait_for(name, self.timeout if timeout is None else timeout, ranks)

    def arrive(self, name: str, ranks: list[int] | None = None) -> None:
        """This rank at barrier `name`, once; wait_for it then, in one wait or several."""
        ranks = range(self.ident.world_size) if ranks is None else ranks
        self.raw.set(f"bar/{name}/{self.ident.rank}", b"1")
        if self.raw.add(f"bar/{name}/count", 1) == len(ranks):
            self.raw.set(f"bar/{name}/done", b"1")

    def wait_for(self, name: str, timeout: float, ranks: list[int] | None = None) -> None:
        """Every rank has arrived at barrier `name`, or BarrierTimeout names who had not after `timeout`."""
        ranks = range(self.ident.world_size) if ranks is None else ranks
        try:
            self.raw.wait([f"bar/{name}/done"], _td(timeout))
        except Exception:  # the store's timeout: name the ranks that never arrived
            missing = [r for r in ranks if not self.raw.check([f"bar/{name}/{r}"])]
            if not missing:  # the last one arrived as the wait gave up: passed, as the others see it pass
                return
            raise BarrierTimeout(name, [(r, self.host_of(r)) for r in missing], timeout) from None

    def all_gather_obj(self, name: str, obj, timeout: float | None = None, ranks: list[int] | None = None) -> list:
        """Every rank's (or those of `ranks`') JSON-serialisable `obj`, in rank order; BarrierTimeout
        names the missing."""
        self.raw.set(f"ag/{name}/{self.ident.rank}", json.dumps(obj))
        self.barrier(f"ag/{name}", timeout, ranks)
        keys = [f"ag/{name}/{r}" for r in (range(self.ident.world_size) if ranks is None else ranks)]
        return [json.loads(v) for v in self.raw.multi_get(keys)]

    def group(self, name: str, ranks: list[int]) -> "GroupStore":
        """Gathers among `ranks` only, under keys of their own (a split group)."""
        return GroupStore(self, name, ranks)

    def stop_serving(self) -> None:
        """Rank 0's server stops now; its clients' next call fails (stress's store-loss fault, and close).
        torch's TCPStore has no close(): its destructor stops it, and CPython runs that as the last reference
        (this one: the server is never handed out) is dropped."""
        if self.torch_free and self.server is not None:
            self.server.close()
        self.server = None

    def close(self) -> None:
        if self.torch_free and self.raw is not None:
            self.raw.close()
        self.raw = None
        self.stop_serving()


class GroupStore:
    """The job store as one group of ranks sees it: gathers among the group, in group rank order."""

    def __init__(self, store: JobStore, name: str, ranks: list[int]):
        self.store, self.name, self.ranks = store, name, list(ranks)
        self.raw = store.raw

    def all_gather_obj(self, name: str, obj, timeout: float | None = None) -> list:
        return self.store.all_gather_obj(f"{self.name}/{name}", obj, timeout, self.ranks)
