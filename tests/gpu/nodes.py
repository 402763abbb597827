"""Nodes on one GPU machine: nodes made on one machine (tests/netns.py, pyroute2 where iproute2 is
missing), each with its own GPUs, NCCL between them over its socket transport on the node's eth0 and
NVLink within a node. Every part is bounded; the namespaces are removed whatever happens.

    python3 tests/gpu/nodes.py --part PART,... [--nodes 2] [--reps 3] [--rounds 200]

bench     ours (one torchrun agent per node, every collective in one run) then nccl-tests (MPICH, one
          process per GPU, each entered into its node, one binary per collective), alternated --reps times,
          64 MiB-1 GiB; the table compares medians (>= 0.97 x nccl-tests over sockets)
locate    healthy (names nothing), then node1's link shaped with tc tbf: names node1's network
stress    stock 6 rounds (stale IDs across nodes, each rank with its node), scoped --rounds
samegroup the seed's scenario across nodes: one process group, a communicator per round (stock: stale IDs;
          scoped: none)
cutoff    scoped stress across the nodes; after 10 rounds node1's link goes down for good: the run ends
          naming node1; on new links, --resume completes every round once
accept    bench across the nodes, then each node's own accept (its GPUs, as an operator runs it node by node)
          judging that busbw by the node's NICs (--network), then fleet over the files
replay    tests/gpu/fsdp_job.py across the nodes (its Flight Recorder dumps and profiler traces), then
          replayed across the same nodes: dumps on nccl, traces on torch (tests/gpu/replay_judge.py)
Logs and JSON under $OUT/nodes/; a short table last.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]
import netns  # noqa: E402
from nccl_bench import records  # noqa: E402
from nccl_bench.core.errors import UsageError  # noqa: E402

PY = sys.executable
PORT = 29400
SIZES = ("-b", "64M", "-e", "1G", "-f", "4")
# nccl-tests' seven and ours by the same names; gather, scatter, hypercube and alltoallv are left out for time
EVERY = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
SUMMARY: list[str] = []  # one line per part, printed last
DEADLINE = [float("inf")]  # time.monotonic() by which the script ends (--deadline)


def left() -> float:
    return DEADLINE[0] - time.monotonic()


def said(line: str) -> None:
    print(line, flush=True)
    SUMMARY.append(line)


BACKEND = os.environ.get("NODES_BACKEND", "nccl")  # gloo: the script's own check on a CPU machine


def gpus() -> int:
    if os.environ.get("NODES_GPUS"):  # with NODES_BACKEND=gloo: how many ranks to place
        return int(os.environ["NODES_GPUS"])
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return len([x for x in out.splitlines() if x.startswith("GPU ")])


def node_env(i: int, per: int, extra: dict | None = None) -> dict:
    """Node i's GPUs, NCCL on its own interface and host identity; the machine's rules kept."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(i * per + k) for k in range(per)),
            "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1", "NCCL_HOSTID": f"node{i}",
            "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "OMP_NUM_THREADS": "1",
            **(extra or {})}


def finish(procs, timeout: float) -> list[tuple[int, str]]:
    out, end = [], time.monotonic() + timeout
    for p in procs:
        try:
            o, _ = p.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            o, _ = p.communicate()
        out.append((p.returncode, o or ""))
    return out


def agent(nodes, i: int, per: int, argv: list[str], token: str) -> list[str]:
    """Node i's torchrun agent (c10d rendezvous on node0) running `argv` as each of its ranks."""
    return [PY, "-m", "torch.distributed.run", "--nnodes", str(nodes.n), "--nproc-per-node", str(per),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{nodes.addr(0)}:{PORT}", "--rdzv-id", token,
            "--local-addr", nodes.addr(i), "--max-restarts", "0", *argv]


def torchrun(nodes, per: int, argv: list[str], log: Path, timeout: float, extra: dict | None = None):
    """One torchrun agent per node, `argv` as each rank; each agent's (exit code, output)."""
    token = f"n{int(time.time() * 1000) % 10**8}"
    procs = [nodes.start(i, agent(nodes, i, per, argv, token), env=node_env(i, per, extra), cwd=str(REPO),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(nodes.n)]
    got = finish(procs, timeout)
    log.write_text("\n".join(f"== agent {i}: exit {c}\n{o}" for i, (c, o) in enumerate(got)))
    return got


def nccl_tests(nodes, per: int, coll: str, log: Path, timeout: float) -> int:
    """nccl-tests under MPICH's mpiexec, one process per GPU, each entered into its node (MPMD): PMI over
    inherited descriptors, NCCL over the nodes' eth0."""
    env_file = Path("/tmp/nccltests/env")
    if not env_file.exists():
        log.write_text("nccl-tests not built\n")
        return -1
    binary = f"{coll}_perf"
    argv = ["bash", "-c", f"source {env_file} && exec mpiexec " + " : ".join(
        f"-n {per} -env CUDA_VISIBLE_DEVICES {','.join(str(i * per + k) for k in range(per))} -env NCCL_HOSTID node{i} "
        f"nsenter --net={netns.RUN}/{nodes.ns[i]} unshare --uts sh -c 'hostname {nodes.host(i)}; exec \"$@\"' sh "
        f"/tmp/nccltests/build_mpi/{binary} {' '.join(SIZES)} -g 1 -n 3 -w 1 -c 1"
        for i in range(nodes.n))]
    env = node_env(0, per)
    env.pop("CUDA_VISIBLE_DEVICES")
    env.pop("NCCL_HOSTID")
    p = subprocess.Popen(argv, env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    (code, out), = finish([p], timeout)
    log.write_text(out)
    return code


def part_bench(nodes, per: int, out: Path, reps: int) -> None:
    took = 0.0
    for rep in range(reps):
        if took and left() < 1.2 * took:
            said(f"bench: rep {rep} not started, {left():.0f} s left (a rep took {took:.0f} s)")
            break
        t0 = time.monotonic()
        got = torchrun(nodes, per, ["-m", "nccl_bench", "bench", "--backend", BACKEND, "--collective", ",".join(EVERY),
                                    *SIZES, "-n", "3", "-w", "1", "-c", "1", "-J", str(out / f"ours_{rep}.json")],
                       out / f"ours_{rep}.log", 240)
        print(f"bench ours rep {rep}: exit {[c for c, _ in got]}", flush=True)
        codes = [nccl_tests(nodes, per, coll, out / f"theirs_{coll}_{rep}.log", 90) for coll in EVERY]
        print(f"bench nccl-tests rep {rep}: exit {codes}", flush=True)
        took = time.monotonic() - t0


def part_locate(nodes, per: int, out: Path) -> None:
    for name, rate in (("healthy", None), ("shaped", "2gbit")):
        if rate:
            nodes.shape(1, rate)
        got = torchrun(nodes, per, ["-m", "nccl_bench", "locate", "--backend", BACKEND, "--size", "64M",
                                    "--no-picture", "--json", str(out / f"locate_{name}.json")],
                       out / f"locate_{name}.log", 150)
        lines = [x for c, o in got for x in o.splitlines() if x.startswith(("SUSPECT", "locate:"))]
        said(f"locate {name}: exit {[c for c, _ in got]}; " + " | ".join(lines[:4]))


def part_stress(nodes, per: int, out: Path, rounds: int) -> None:
    for mode, n in (("stock", 6), ("scoped", rounds)):
        got = torchrun(nodes, per, ["-m", "stress", "--backend", BACKEND, "--init", mode, "--rounds", str(n),
                                    "--timeout", "5", "--journal", str(out / f"stress_{mode}.jsonl"),
                                    "--summary-json", str(out / f"stress_{mode}.json")],
                       out / f"stress_{mode}.log", 240)
        said(f"stress {mode} {n} rounds: exit {[c for c, _ in got]}; {summary(out / f'stress_{mode}.json')}")


def summary(path: Path) -> str:
    """A stress run's counts from its --summary-json (its row per init mode), in a few words."""
    try:
        rows = records.load(str(path)).rows
    except UsageError:
        return "no summary"
    keys = ("rounds", "ok", "hangs", "errors", "wrong", "stale_proven", "init_p50_ms", "rounds_per_s")
    return "; ".join(", ".join(f"{k} {r[k]:.3g}" if isinstance(r.get(k), float) else f"{k} {r.get(k)}"
                               for k in keys) for r in rows)


def part_samegroup(nodes, per: int, out: Path) -> None:
    """pytorch#178473's scenario (tests/gpu/samegroup.sh) with the ranks on two nodes: rank r of round r
    late by 3 s, one communicator per round in one process group."""
    world = nodes.n * per
    rounds = max(4, min(6, world))
    delays = [x for r in range(1, rounds) for x in ("--inject", f"delay:{r}:{r % world}:3")]
    for mode in ("stock", "scoped"):
        got = torchrun(nodes, per, ["-m", "stress", "--backend", "torch", "--ranks-per-root", "1", "--rounds",
                                    str(rounds), "--skew-max", "0", "--timeout", "8", *delays, "--scenario",
                                    "same-group", "--init", mode, "--journal", str(out / f"samegroup_{mode}.jsonl"),
                                    "--summary-json", str(out / f"samegroup_{mode}.json")],
                       out / f"samegroup_{mode}.log", 200)
        stale = [x for _, o in got for x in o.splitlines() if "used root" in x][:1]
        said(f"same-group {mode} {rounds} rounds: exit {[c for c, _ in got]}; "
             f"{summary(out / f'samegroup_{mode}.json')}; {stale[0].strip()[:160] if stale else 'no stale ID said'}")


def journal_rounds(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "round":
            out.append(rec)
    return out


def part_cutoff(nodes_n: int, per: int, out: Path) -> None:
    """Scoped stress across the nodes; after 10 rounds node1's link goes down for good: the run must end on
    node0 naming node1; then, on new links, --resume completes every round once."""
    journal, rounds = out / "cutoff.jsonl", 200
    args = ["-m", "stress", "--backend", BACKEND, "--init", "scoped", "--rounds", str(rounds), "--timeout", "5",
            "--skew-max", "0", "--journal", str(journal)]
    with netns.Nodes(nodes_n) as nodes:
        token = f"c{int(time.time() * 1000) % 10**8}"
        procs = [nodes.start(i, agent(nodes, i, per, args, token), env=node_env(i, per), cwd=str(REPO),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(nodes.n)]
        end = time.monotonic() + 120
        while len(journal_rounds(journal)) < 10 and time.monotonic() < end and procs[0].poll() is None:
            time.sleep(0.2)
        before = len(journal_rounds(journal))
        nodes.cut(1)
        cut_at = time.monotonic()
        (code, text), = finish(procs[:1], 120)
        ended = time.monotonic() - cut_at
        (out / "cutoff.log").write_text(text)
    lines = [x for x in text.splitlines() if "stopped after" in x or "node1" in x][:3]
    named = any("node1" in x for x in text.splitlines())
    said(f"cutoff: {before} rounds before the cut; agent 0 exit {code} {ended:.1f} s after it; node1 named: "
         f"{named}; " + " | ".join(x.strip()[:140] for x in lines))
    with netns.Nodes(nodes_n) as nodes:
        got = torchrun(nodes, per, [*args, "--resume"], out / "cutoff_resume.log", 240)
    every = journal_rounds(journal)
    once = sorted(r["round"] for r in every) == list(range(rounds))
    ok = sum(r.get("verdict") == "ok" for r in every)
    said(f"cutoff resume: exit {[c for c, _ in got]}; every round once: {once}; {ok}/{rounds} ok")


def part_accept(nodes, per: int, out: Path) -> None:
    """The busbw between the nodes (bench across them), then each node's accept over its own GPUs (derived
    profile) judging it by the node's NICs (--network), at once; then fleet over both files."""
    from nccl_bench.accept import nics
    across = out / "across.json"
    size = "1M" if BACKEND == "gloo" else "1G"
    got = torchrun(nodes, per, ["-m", "nccl_bench", "bench", "--backend", BACKEND, "-b", size, "-e", size, "-n", "5",
                                "-w", "2", "-J", str(across)], out / "across.log", 150)
    said(f"bench across the nodes (all_reduce {size}): exit {[c for c, _ in got]}; this machine's InfiniBand/RoCE "
         f"ports: {', '.join(p.name() for p in nics.read()) or 'none'}")
    files = [out / f"accept_node{i}.json" for i in range(nodes.n)]
    network = ["--network", str(across)] if across.exists() else []
    procs = [nodes.start(i, [PY, "-m", "nccl_bench", "accept", "--json", str(files[i]), *network],
                         env=node_env(i, per), cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True) for i in range(nodes.n)]
    got = finish(procs, 300)
    for i, (c, o) in enumerate(got):
        (out / f"accept_node{i}.log").write_text(o)
        verdict = [x for x in o.splitlines() if x.startswith("accept ")][-1:]
        net = [" ".join(x.split()) for x in o.splitlines() if "network busbw" in x][:1]
        said(f"accept node{i}: exit {c}; {verdict[0] if verdict else o.strip()[-200:]}; {net[0] if net else ''}")
    fleet = subprocess.run([PY, "-m", "nccl_bench", "fleet", *map(str, files), "--out", str(out / "fleet")],
                           cwd=str(REPO), capture_output=True, text=True, timeout=120)
    (out / "fleet.log").write_text(fleet.stdout + fleet.stderr)
    said(f"fleet: exit {fleet.returncode}; " + " | ".join(fleet.stdout.strip().splitlines()[-2:]))


def part_replay(nodes, per: int, out: Path) -> None:
    """The FSDP job across the nodes, then its dumps (nccl) and traces (torch) replayed across them."""
    job = Path("/tmp/nodes_replay")
    subprocess.run(["rm", "-rf", str(job)])
    job.mkdir(parents=True)
    got = torchrun(nodes, per, [str(REPO / "tests/gpu/fsdp_job.py"), str(job)], out / "replay_job.log", 300,
                   {"TORCH_NCCL_ENABLE_TIMING": "1", "TORCH_FR_BUFFER_SIZE": "4000"})
    said(f"replay job (FSDP across {nodes.n} nodes): exit {[c for c, _ in got]}")
    results = []
    for source, backend in (("kineto", "torch"), ("fr", "nccl")):
        result = out / f"replay_{source}_{backend}.json"
        got = torchrun(nodes, per, ["-m", "nccl_bench", "replay", str(job / source), "--backend", backend, "-n", "20",
                                    "-w", "3", "--json", str(result)], out / f"replay_{source}_{backend}.log", 240)
        said(f"replay {source} on {backend} across the nodes: exit {[c for c, _ in got]}")
        results.append(str(result))
    judged = subprocess.run([PY, str(REPO / "tests/gpu/replay_judge.py"), *results], cwd=str(REPO),
                            capture_output=True, text=True, timeout=60)
    (out / "replay_judge.txt").write_text(judged.stdout + judged.stderr)
    said("replay judge: " + " | ".join(judged.stdout.strip().splitlines()[-3:]))
    subprocess.run(["tar", "czf", str(out / "replay_job.tgz"), "-C", str(job), "."])


def their_busbw(log: Path) -> dict[int, float]:
    """size -> out-of-place busbw from a nccl-tests log (its data lines: size count type redop root time
    algbw busbw #wrong, then in place)."""
    out = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        tok = line.split()
        if len(tok) >= 13 and tok[0].isdigit():
            try:
                out[int(tok[0])] = float(tok[7])
            except ValueError:
                continue
    return out


def our_busbw(path: Path) -> dict[tuple[str, int], float]:
    try:
        rows = records.load(str(path)).every_cycle()
    except UsageError:
        return {}
    return {(r["collective"], r["size"]): r["out_of_place"]["bus_bw"] for r in rows}


def table(out: Path, reps: int) -> None:
    import statistics
    print("collective      size        ours GB/s (median)  nccl-tests GB/s (median)  ratio  target >= 0.97")
    ours = [our_busbw(out / f"ours_{r}.json") for r in range(reps)]
    for coll in EVERY:
        theirs = [their_busbw(out / f"theirs_{coll}_{r}.log") for r in range(reps)]
        for size in sorted({k for d in theirs for k in d} | {s for d in ours for c, s in d if c == coll}):
            a = [d[(coll, size)] for d in ours if (coll, size) in d]
            b = [d[size] for d in theirs if size in d]
            if a and b:
                ratio = statistics.median(a) / statistics.median(b)
                print(f"{coll:15} {size:>11} {statistics.median(a):>10.2f} {statistics.median(b):>22.2f}"
                      f"  {ratio:13.3f}  {'met' if ratio >= 0.97 else 'MISSED'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", default="stress,samegroup,cutoff,locate,replay")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=200, help="scoped stress rounds")
    p.add_argument("--deadline", type=float, default=None, help="seconds: no part or rep starts too late for it")
    a = p.parse_args()
    if a.deadline:
        DEADLINE[0] = time.monotonic() + a.deadline
    out = Path(os.environ.get("OUT", "/tmp/out")) / "nodes"
    out.mkdir(parents=True, exist_ok=True)
    if (why := netns.why_not()):
        print(f"nodes: cannot make nodes here: {why}")
        return 2
    ng = gpus()
    per = ng // a.nodes
    if per < 1:
        print(f"nodes: {a.nodes} nodes need {a.nodes} GPUs, this machine has {ng}")
        return 2
    print(f"nodes: {a.nodes} nodes x {per} GPU(s), namespaces by {netns.backend().name}", flush=True)
    parts = a.part.split(",")
    runs = {"bench": lambda n: part_bench(n, per, out, a.reps), "stress": lambda n: part_stress(n, per, out, a.rounds),
            "samegroup": lambda n: part_samegroup(n, per, out), "locate": lambda n: part_locate(n, per, out),
            "accept": lambda n: part_accept(n, per, out), "replay": lambda n: part_replay(n, per, out)}
    for part in parts:
        t0 = time.monotonic()
        if left() < 60:
            said(f"nodes: {part} not started, {left():.0f} s left")
            continue
        if part == "cutoff":
            part_cutoff(a.nodes, per, out)  # its own nodes: the cut link is not mended in place
        elif part in runs:
            with netns.Nodes(a.nodes) as nodes:  # fresh nodes per part: a shaped or cut link stays with its part
                runs[part](nodes)
        else:
            print(f"nodes: unknown part {part}")
            return 2
        print(f"nodes: {part} took {time.monotonic() - t0:.0f} s; namespaces left: {len(netns._ours())}", flush=True)
    print("\n== summary")
    for line in SUMMARY:
        print(line)
    if "bench" in parts:
        table(out, a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
