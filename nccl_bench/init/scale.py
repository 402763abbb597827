"""The scale model: the unique-ID exchange of thousands of simulated ranks, on CPU.

One real TCPStore (hosted here, loopback) serves N simulated ranks that do what
bootstrap.exchange_ids does, with the core's key layout: each root sets its ID, every
rank waits for and multi-gets every root's key. Per mode and ranks-per-root it runs
init 0 on a fresh namespace, then re-inits in the same namespace, each rank released at
a seeded random delay (the skew), and reports store operations per init, exchange time,
and the rate of ranks that read a previous init's ID (stock's stale reads).

Ranks are driven by pools of client threads, one TCPStore client each: publishers (never
block) and readers (may block in wait until the roots published). A rank whose reader
thread is busy starts late; the report shows that lag. Key reads per init are capped by a
budget: above it (every rank reading every root, ranks-per-root 1) a seeded sample of
ranks reads and every root still publishes; operation counts are given for all N ranks.

Not modelled: NCCL's own bootstrap ring after the exchange, network latency and many
hosts (everything is loopback), and the store server's real fan-in from N sockets.
"""
from __future__ import annotations

import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

from tabulate import tabulate

from nccl_bench.core import results, stats, sysinfo
from nccl_bench import records
from nccl_bench.comm.bootstrap import MODES, check_mode, id_keys, num_roots, root_ranks
from nccl_bench.core.errors import EXIT_FAILED, UsageError, at_least, seconds
from nccl_bench.core.resources import host_available

ID_BYTES = 128  # sizeof(ncclUniqueId)
READERS = 16  # reader client threads
PUBLISHERS = 8  # publisher client threads
DEFAULT_READ_BUDGET = 1 << 18  # key reads per init actually performed (2 s of store time)
_START_LEAD_S = 0.05  # time for the pools to start before the first release


@dataclass
class SimulateOptions:
    """N simulated ranks; modes; ranks per root to try; re-inits; skew (s); per-init wait deadline (s)."""

    ranks: int
    modes: list[str] = field(default_factory=lambda: list(MODES))
    ranks_per_root: list[int] = field(default_factory=lambda: [1, 8, 128])
    reinits: int = 1
    skew_max: float = 0.0
    seed: int = 0
    timeout: float = 30.0
    read_budget: int = DEFAULT_READ_BUDGET
    json: str | None = None

    def __post_init__(self):
        at_least("--simulate-ranks", self.ranks, 1)
        self.modes = [check_mode(m) for m in self.modes]
        for k in self.ranks_per_root:
            at_least("--ranks-per-root", k, 1)
        at_least("--rounds", self.reinits, 1)
        if not 0 <= self.skew_max <= 3600:
            raise UsageError(f"--skew-max must be 0 to 3600 seconds, got {self.skew_max:g}")
        seconds("--timeout", self.timeout)
        at_least("--read-budget", self.read_budget, 1)
        need, have = estimate_bytes(self), host_available()
        if have is not None and need > have / 2:
            raise UsageError(f"--simulate-ranks {self.ranks} needs about {need / 2**30:.1f} GiB "
                             f"and this machine has {have / 2**30:.1f} GiB available: use fewer ranks "
                             "or a larger --ranks-per-root")
        results.check_writable(self.json, kind="init-simulate")

    def configs(self) -> list[tuple[str, int | None]]:
        """(mode, ranks per root); regular has one root whatever the setting, so it runs once."""
        return [(m, None) for m in self.modes if m == "regular"] + [
            (m, k) for m in self.modes if m != "regular" for k in self.ranks_per_root]


def estimate_bytes(o: SimulateOptions) -> int:
    """Memory the model needs: per-rank records, the store's keys, and per reader thread one
    multi-get of every root (keys and values, held by server, client and Python at once)."""
    roots = max(num_roots(o.ranks, k) for k in o.ranks_per_root)
    per_rank = 400  # release times, outcomes, the sorted task lists
    per_key_read = 3 * ID_BYTES + 250  # value thrice (server reply, client vector, bytes) + key strings
    stored = roots * (ID_BYTES + 150) * (o.reinits + 1) * len(o.modes)
    return o.ranks * per_rank + (READERS + 1) * roots * per_key_read + stored + 64 * 2**20




# --- the store and its clients ------------------------------------------------------------------
class LoopbackStore:
    """A TCPStore server on an ephemeral loopback port, and clients for it."""

    def __init__(self, timeout: float):
        from torch.distributed import TCPStore  # here: the model's options are checked without torch
        self._tcp_store = TCPStore
        self.timeout = timedelta(seconds=timeout)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(2048)
        self.port = sock.getsockname()[1]
        self.server = TCPStore("127.0.0.1", self.port, None, True, self.timeout, wait_for_workers=False,
                               master_listen_fd=sock.fileno(), use_libuv=True)
        sock.detach()  # the store owns the listening socket now

    def client(self):
        return self._tcp_store("127.0.0.1", self.port, None, False, self.timeout, use_libuv=True)

    def close(self) -> None:
        self.server = None


@dataclass
class Counts:
    """Store operations actually issued in one init."""

    set: int = 0
    wait: int = 0
    multi_get: int = 0
    keys_read: int = 0
    bytes_read: int = 0

    def add(self, other: "Counts") -> None:
        for k in ("set", "wait", "multi_get", "keys_read", "bytes_read"):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    @property
    def ops(self) -> int:
        return self.set + self.wait + self.multi_get


def _run_pool(clients, tasks, work) -> None:
    """Threads (one client each) take tasks in release order; an exception stops the pool."""
    lock, nxt, errors = threading.Lock(), [0], []

    def loop(client):
        while not errors:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(tasks):
                return
            try:
                work(client, tasks[i])
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)
    threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in clients[:max(1, len(tasks))]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# --- one init of N simulated ranks ---------------------------------------------------------------
def simulate_init(store: LoopbackStore, pubs, readers_pool, o: SimulateOptions, mode: str,
                  rpr: int | None, counter: int) -> dict:
    """One init of o.ranks simulated ranks: the roots publish, every (sampled) rank waits for and reads
    every key, each at its own skew; the row of what it cost and what it read."""
    init = SimulatedInit(o, mode, rpr, counter)
    init.run(pubs, readers_pool)
    return init.row()


class SimulatedInit:
    """The ID exchange of one init: who publishes which key when, who reads, and what each reader got."""

    def __init__(self, o: SimulateOptions, mode: str, rpr: int | None, counter: int):
        n = o.ranks
        self.o, self.mode, self.rpr, self.counter = o, mode, rpr, counter
        self.nroots = 1 if mode == "regular" else num_roots(n, rpr)
        self.roots = [0] if mode == "regular" else root_ranks(n, self.nroots)
        namespace = f"sim/{mode}/{rpr or 0}"  # the same for every init: only stock's keys repeat
        self.keys = [f"{namespace}/{k}" for k in id_keys(mode, counter, self.nroots)]
        self.ids = [os.urandom(ID_BYTES) for _ in self.roots]
        self.expected = b"".join(self.ids)
        rng = random.Random(f"simulate/{o.seed}/{mode}/{rpr}/{counter}")
        self.delay = [rng.uniform(0, o.skew_max) if o.skew_max > 0 else 0.0 for _ in range(n)]
        self.sampled = n * self.nroots > o.read_budget
        self.readers = sorted(rng.sample(range(n), max(1, o.read_budget // self.nroots))) if self.sampled else range(n)
        self.published = {r: threading.Event() for r in self.roots}
        self.t0 = time.perf_counter() + _START_LEAD_S
        self.counts_lock, self.total = threading.Lock(), Counts()
        self.outcome: dict[int, tuple] = {}  # rank -> (exchange_s, lag_s, stale_keys, timed_out)

    def _until(self, t: float) -> None:
        left = t - time.perf_counter()
        if left > 0:
            time.sleep(left)

    def publish(self, client, task) -> None:
        rank, root = task
        self._until(self.t0 + self.delay[rank])
        client.set(self.keys[root], self.ids[root])
        self.published[rank].set()
        with self.counts_lock:
            self.total.set += 1

    def read(self, client, rank: int) -> None:
        release = self.t0 + self.delay[rank]
        self._until(release)
        start = time.perf_counter()
        if rank in self.published:  # a root reads after its own set, as in exchange_ids
            self.published[rank].wait(self.o.timeout)
        c = Counts(wait=1)
        try:
            client.wait(self.keys, timedelta(seconds=self.o.timeout))
        except Exception:  # the store's timeout: a rank that never saw every key
            self.outcome[rank] = (time.perf_counter() - release, start - release, 0, True)
        else:
            values = client.multi_get(self.keys)
            got = b"".join(values)
            end = time.perf_counter()
            c.multi_get, c.keys_read, c.bytes_read = 1, len(self.keys), len(got)
            stale = 0 if got == self.expected else sum(v != e for v, e in zip(values, self.ids))
            self.outcome[rank] = (end - release, start - release, stale, False)
        with self.counts_lock:
            self.total.add(c)

    def run(self, pubs, readers_pool) -> None:
        """Publishers never block, so readers waiting for a root's key always get it eventually."""
        pub_tasks = sorted(((r, i) for i, r in enumerate(self.roots)), key=lambda t: self.delay[t[0]])
        pub_error: list[BaseException] = []

        def publish_all():
            try:
                _run_pool(pubs, pub_tasks, self.publish)
            except BaseException as e:  # noqa: BLE001 - raised below, in the caller's thread
                pub_error.append(e)
        publisher = threading.Thread(target=publish_all, daemon=True)
        publisher.start()
        _run_pool(readers_pool, sorted(self.readers, key=lambda r: self.delay[r]), self.read)
        publisher.join()
        if pub_error:
            raise pub_error[0]

    def row(self) -> dict:
        n, nroots, outcome, total = self.o.ranks, self.nroots, self.outcome, self.total
        wall = max((self.t0 + self.delay[r] + outcome[r][0] for r in outcome), default=self.t0) - self.t0
        ex = stats.summary(v[0] for v in outcome.values() if not v[3])
        return {
            "mode": self.mode, "ranks_per_root": self.rpr, "nranks": n, "nroots": nroots, "init": self.counter,
            "reinit": self.counter > 0, "readers": len(outcome), "sampled": self.sampled,
            "skew_max_s": self.o.skew_max,
            # counted: what this run issued; full: what N ranks issue (every rank waits and multi-gets)
            "store_ops": total.ops, "sets": total.set, "waits": total.wait, "multi_gets": total.multi_get,
            "keys_read": total.keys_read, "bytes_read": total.bytes_read,
            "full_store_ops": nroots + 2 * n, "full_keys_read": n * nroots, "full_bytes_read": n * nroots * ID_BYTES,
            "wall_s": wall, **{f"exchange_{k}_s": ex[k] for k in ("median", "p90", "p99", "max")},
            "lag_max_s": max((v[1] for v in outcome.values()), default=0.0),
            "stale_ranks": sum(1 for v in outcome.values() if v[2]),
            "stale_keys": sum(v[2] for v in outcome.values()),
            "timeouts": sum(1 for v in outcome.values() if v[3]),
        }


# --- the report ------------------------------------------------------------------------------------
def _ms(seconds: float | None, digits: int = 1) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.{digits}f}"


def table(rows: list[dict]) -> str:
    body = []
    for key in dict.fromkeys((r["mode"], r["ranks_per_root"]) for r in rows):
        group = [r for r in rows if (r["mode"], r["ranks_per_root"]) == key]
        first, re = group[0], [r for r in group if r["reinit"]]
        readers = sum(r["readers"] for r in re)
        stale = sum(r["stale_ranks"] for r in re)
        body.append([
            first["mode"], "-" if first["ranks_per_root"] is None else first["ranks_per_root"], first["nroots"],
            first["full_store_ops"], first["full_keys_read"], f"{first['full_bytes_read'] / 1e6:.1f}",
            f"{first['readers']}" + (" (sampled)" if first["sampled"] else ""),
            _ms(stats.percentile([r["exchange_median_s"] for r in re], 0.5), 2),
            _ms(max((r["exchange_max_s"] for r in re if r["exchange_max_s"] is not None), default=None)),
            _ms(stats.percentile([r["wall_s"] for r in re], 0.5)),
            f"{max(r['lag_max_s'] for r in group) * 1e3:.1f}",
            f"{stale}/{readers} ({100.0 * stale / max(readers, 1):.1f} %)"])
    return tabulate(body, headers=["mode", "ranks/root", "roots", "store ops/init", "keys read/init", "MB read/init",
                                   "readers", "exchange median ms", "max ms", "wall ms", "lag max ms",
                                   "stale ranks (re-inits)"],
                    tablefmt="simple", disable_numparse=True)


def run(o: SimulateOptions) -> int:
    configs = o.configs()
    print(f"scale model: {o.ranks} simulated ranks, {len(configs)} configuration(s) x {o.reinits + 1} inits, "
          f"skew 0..{o.skew_max:g} s (seed {o.seed}); {READERS} reader + {PUBLISHERS} publisher store clients, "
          f"about {estimate_bytes(o) / 2**20:.0f} MiB; key reads capped at {o.read_budget} per init "
          "(readers sampled above it)", flush=True)
    store = LoopbackStore(o.timeout + o.skew_max + 30)
    pubs = [store.client() for _ in range(PUBLISHERS)]
    reader_clients = [store.client() for _ in range(READERS)]
    rows: list[dict] = []
    t_start = time.perf_counter()
    complete = False
    try:
        for mode, rpr in configs:
            for counter in range(o.reinits + 1):
                rows.append(simulate_init(store, pubs, reader_clients, o, mode, rpr, counter))
        complete = True
    finally:  # what was simulated is written even when the run is cut short
        if rows:
            meta = sysinfo.collect(None)
            meta["params"] = {"command": "init --simulate-ranks", "ranks": o.ranks, "modes": o.modes,
                              "ranks_per_root": o.ranks_per_root, "reinits": o.reinits, "skew_max_s": o.skew_max,
                              "seed": o.seed, "read_budget": o.read_budget, "readers": READERS,
                              "publishers": PUBLISHERS, "id_bytes": ID_BYTES, "complete": complete,
                              "seconds": time.perf_counter() - t_start}
            path = records.write("init-simulate", rows, meta, o.json)
            if complete:
                print(table(rows), flush=True)
            print(f"results: {path}" + ("" if complete else " (incomplete run)"), flush=True)
        pubs.clear()
        reader_clients.clear()
        store.close()
    print(f"simulated in {time.perf_counter() - t_start:.1f} s", flush=True)
    # stale reads are stock's finding; in regular or scoped, or a rank that timed out, they are a failure
    bad = [r for r in rows if r["timeouts"] or (r["mode"] != "stock" and r["stale_ranks"])]
    for r in bad:
        print(f"FAIL {r['mode']} ranks/root {r['ranks_per_root']} init {r['init']}: "
              f"{r['stale_ranks']} stale rank(s), {r['timeouts']} timed out", flush=True)
    return EXIT_FAILED if bad else 0
