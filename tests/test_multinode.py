"""Two or three nodes on one machine (issue 32): network namespaces as hosts (tests/netns.py), launched
as users launch them: one torchrun agent per node with c10d rendezvous on node0's address, or srun under a
real Slurm (tests/slurm.py). Every scenario removes its nodes and checks that nothing of it is left."""
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

import netns
import slurm
from helpers import REPO, apart
from nccl_bench import records

WHY_NOT = netns.why_not()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no nodes on this machine: {WHY_NOT}")
PY = sys.executable
PORT = 29400
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def torchrun(nodes, per_node: int, argv: list[str], token: str) -> list[subprocess.Popen]:
    """One torchrun agent per node, c10d rendezvous on node0's address (README: multi-node)."""
    return [nodes.start(i, [PY, "-m", "torch.distributed.run", "--nnodes", str(nodes.n), "--nproc-per-node",
                            str(per_node), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{nodes.addr(0)}:{PORT}",
                            "--rdzv-id", token, "--local-addr", nodes.addr(i), "--max-restarts", "0", *argv],
                        env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(nodes.n)]


@contextlib.contextmanager
def slurm_nodes(n: int):
    """`n` nodes under a real Slurm (tests/slurm.py): slurmctld and a slurmd per node."""
    if (why := slurm.why_not()) is not None:
        pytest.skip(f"no Slurm on this machine: {why}")
    with netns.Nodes(n) as nodes, slurm.Slurm(nodes) as s:
        yield nodes, s


def srun(s: "slurm.Slurm", per_node: int, argv: list[str]) -> list[subprocess.Popen]:
    """`srun -N<nodes> --ntasks-per-node K python ARGV` from node 0, as a user runs it: no MASTER_ADDR, the
    job store found from Slurm. One process, srun's (its exit is the tasks' highest)."""
    return [s.srun([f"-N{s.nodes.n}", "--ntasks-per-node", str(per_node), PY, *argv], env=ENV, cwd=REPO,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]


def finish(procs, timeout: float) -> list[tuple[int, str, str]]:
    out = []
    for p in procs:
        o, e = p.communicate(timeout=timeout)
        out.append((p.returncode, o, e))
    return out


def rounds(path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "round"]


def wait_rounds(path, n: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and len(path.read_text().splitlines()) > n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach {n} rounds in {timeout:g} s")


def test_stress_across_nodes_names_the_stale_root_and_its_node_scoped_stays_clean(tmp_path):
    # Slurm's way: 2 nodes x 2 tasks, each started on its node
    journal = tmp_path / "j.jsonl"
    t0 = time.monotonic()
    with slurm_nodes(2) as (nodes, s):
        got = finish(srun(s, 2, ["-m", "stress", "--backend", "gloo", "--init", "stock,scoped", "--skew-max",
                                 "0.2", "--rounds", "5", "--timeout", "1.5", "--journal", str(journal)]), 120)
        bench = finish(srun(s, 2, ["-m", "nccl_bench", "bench", "--backend", "gloo", "-b", "64K", "-e", "64K",
                                   "-n", "3", "-w", "1", "-J", str(tmp_path / "bench.json")]), 120)
    assert not nodes.leftovers()
    code, out, err = got[0]
    assert code == 1, out[-2000:] + err[-2000:]  # stock's stale IDs fail rounds; the job says so
    rows = rounds(journal)
    assert records.load(str(journal)).meta["hosts"] == ["node0", "node1"]
    stock = [r for r in rows if r["mode"] == "stock"]
    scoped = [r for r in rows if r["mode"] == "scoped"]
    assert len(stock) == len(scoped) == 5 and all(r["verdict"] == "ok" for r in scoped)
    stale = [r for r in stock if r["stale"]]
    assert stale, [r["verdict"] for r in stock]
    line = stale[0]["diagnosis"]
    s = stale[0]["stale"][0]
    node = "node0" if s["rank"] < 2 else "node1"
    assert f"rank {s['rank']} on {node} used root {s['root']}'s ID from round" in line, line
    assert "on node1" in " ".join(r["diagnosis"] for r in stale), line  # the other node named too
    assert bench[0][0] == 0, bench[0][1][-2000:] + bench[0][2][-2000:]  # bench all_reduce across the nodes
    doc = records.load(str(tmp_path / "bench.json"))
    assert doc.hosts == ["node0", "node1"] and doc.rows[0]["out_of_place"]["nwrong"] == 0
    print(f"\nstress + bench 2 nodes x 2 (srun): {time.monotonic() - t0:.1f} s; {line[:200]}")


def test_a_node_cut_off_mid_run_ends_the_run_names_it_and_resume_completes(tmp_path):
    # torchrun's way, 1 rank per node. A few seconds' partition first (ride through or stop, as said),
    # then the link down for good: the run ends on its evidence; --resume after the link is back completes.
    journal = tmp_path / "j.jsonl"
    args = ["-m", "stress", "--backend", "gloo", "--init", "scoped", "--rounds", "120", "--timeout", "1",
            "--skew-max", "0", "--journal", str(journal)]
    t0 = time.monotonic()
    with netns.Nodes(2) as nodes:
        procs = torchrun(nodes, 1, args, uuid.uuid4().hex[:8])
        wait_rounds(journal, 20, 60)
        nodes.cut(1)
        time.sleep(2.0)
        nodes.mend(1)
        seen = len(rounds(journal))
        try:  # rode through: it keeps journaling
            wait_rounds(journal, seen + 20, 30)
            rode = True
        except AssertionError:
            rode = False
        if rode:
            nodes.cut(1)
            cut_at = time.monotonic()
            code, out, err = finish(procs[:1], 60)[0]
            ended_s = time.monotonic() - cut_at
        else:
            code, out, err = finish(procs[:1], 60)[0]
            ended_s = 0.0
        assert code == 1, out[-3000:] + err[-2000:]
        said = f"rode through: {rode}\n{out[-3000:]}\n--- stderr:\n{err[-3000:]}"
        assert "stress: stopped after scoped round" in out and "a rank or the job store was lost" in out, said
        assert "node1 unreachable" in out or "never arrived: rank 1 (node1)" in out, said
        # its bound: the start barrier (gather: deadline + 5 s grace on gloo; then 5 s) + the deadline + the 2 s
        # leave + exit, about 16 s here; 30 under a loaded CI
        assert ended_s < 30, f"the run took {ended_s:.0f} s to end after the cut"
        kept = rounds(journal)
        assert [r["round"] for r in kept] == list(range(len(kept)))  # every finished round, once, in order
        lines = journal.read_text().splitlines()
        assert json.loads(lines[-1])["type"] == "end" and any('"type": "stopped"' in x or '"type":"stopped"' in x
                                                              for x in lines)
        nodes.close()  # the cut-off node's torchrun agent waits on its rendezvous store: the scheduler's to end
        nodes.procs.clear()
        assert not [p for p in procs if p.poll() is None]
    assert not nodes.leftovers()
    cut_line = next(x for x in out.splitlines() if x.startswith("[scoped round"))
    with slurm_nodes(2) as (nodes, s):  # the link is back (new links): resume, this time under Slurm
        code, out, err = finish(srun(s, 1, [*args, "--resume"]), 90)[0]
        # exit 1: the run holds the rounds the partition failed; every one is there once, and no other failed
        table = next((x.split() for x in out.splitlines() if x.startswith("scoped ")), None)
        assert code == 1 and table and table[1] == "120", f"exit {code}\n{out[-3000:]}\n--- stderr:\n{err[-3000:]}"
    assert not nodes.leftovers()
    every = rounds(journal)
    ok = [r for r in every if r["verdict"] == "ok"]
    assert sorted(r["round"] for r in every) == list(range(120)), "every round exactly once"
    assert all(r["verdict"] == "ok" for r in every if r["round"] >= len(kept))  # after the resume: clean
    assert int(table[2]) == len(ok)
    print(f"\npartition: {'rode through the brief cut, ' if rode else 'stopped at the brief cut, '}"
          f"ended {ended_s:.1f} s after the cut for good; {len(ok)}/120 ok after resume; "
          f"{time.monotonic() - t0:.1f} s; {cut_line[:160]}")


def test_locate_across_nodes_names_a_shaped_link_not_a_gpu(tmp_path):
    # Slurm's way, 3 nodes x 2 tasks; node1's link limited with tc tbf. A third node tells the sending
    # end from the receiving one; two ranks per node tell the link from the GPU.
    located = tmp_path / "locate.json"
    t0 = time.monotonic()
    args = ["-m", "nccl_bench", "locate", "--backend", "gloo", "--size", "64K", "--iters", "10", "--no-picture",
            "--json", str(located)]
    again = ""
    with apart("cluster-beside-locate"), slurm_nodes(3) as (nodes, s):  # not beside fleet run's cluster
        nodes.shape(1, "8mbit")
        # the fastest of 10 per direction: a CPU-heavy job beside (CI) slowed both of 2 on one same-node pair, and
        # with fleet run's 4-node test at the same time, all 5 of another (3 -> 2 at 0.06 GB/s, its class 0.7)
        code, out, err = finish(srun(s, 2, args), 120)[0]
        # Under a loaded CI, one same-node direction of the shaped node (3 -> 2, twice seen; never alone, nor beside
        # busy loops) can read 0.04-0.06 x its class in every sample, which makes rank 3 a bad GPU; the fault planted
        # is on the network alone, so that matrix is the CPU model's, not the case: measured once more (cause open,
        # docs/validation.md)
        same = [r for r in records.load(str(located)).rows if r["class"] == "same node"] if located.exists() else []
        if any(r["ratio"] < 0.1 for r in same):
            again = f" (measured again: {[(r['src'], r['dst'], round(r['ratio'], 3)) for r in same]})"
            located.unlink()
            code, out, err = finish(srun(s, 2, args), 120)[0]
    assert not nodes.leftovers()
    assert code == 1, out[-3000:] + err[-2000:]
    suspects = [x for x in out.splitlines() if x.startswith("SUSPECT")]
    assert suspects and suspects[0].startswith("SUSPECT node1's network link:"), out[-3000:]
    assert not any("GPU" in x.split(":")[0] for x in suspects), suspects  # no rank, no GPU named
    rows = records.load(str(located)).rows
    classes = {(r["src_node"] == r["dst_node"], r["class"]) for r in rows}
    assert classes == {(True, "same node"), (False, "network")}, classes
    print(f"\nlocate 3 nodes x 2 (srun, node1 at 8 Mbit/s): {time.monotonic() - t0:.1f} s{again}; {suspects[0][:200]}")


def test_accept_on_each_node_then_the_fleet_verdict_over_both(tmp_path):
    # under Slurm, as an operator accepts nodes: a bench across them, then one srun task per node, each its node's
    # accept (its two local ranks) recorded as a golden one (test_accept's end-to-end checks), then one verdict
    # over both nodes' files
    from test_accept import END_TO_END, check_end_to_end
    t0 = time.monotonic()
    across = tmp_path / "across.json"
    per_node = ["--json", str(tmp_path / "accept-{node}.json"), "--junit", str(tmp_path / "accept-{node}.xml"),
                "--record-baseline", str(tmp_path / "golden-{node}.json")]
    with slurm_nodes(2) as (nodes, s):
        # the bandwidth between the nodes: bench across them, then each node's accept judges it by its NICs
        bench = finish(srun(s, 1, ["-m", "nccl_bench", "bench", "--backend", "gloo", "-b", "1M", "-e", "1M", "-n", "3",
                                   "-w", "1", "-J", str(across)]), 120)
        assert bench[0][0] == 0, bench[0][1][-2000:] + bench[0][2][-2000:]
        code, out, err = finish(srun(s, 1, ["-m", "nccl_bench", "accept", *END_TO_END, "--network", str(across),
                                            *per_node]), 240)[0]
    assert not nodes.leftovers()
    files = [tmp_path / f"accept-node{i}.json" for i in range(2)]
    check_end_to_end(code, out + err, files[0], tmp_path / "accept-node0.xml", tmp_path / "golden-node0.json")
    assert out.count("accept PASS against profile gloo-cpu") == 2, out[-3000:] + err[-2000:]
    # no InfiniBand or RoCE here: measured over sockets and said, not failed
    said = [x for x in out.splitlines() if "network busbw all_reduce 1 MiB (2 nodes)" in x]
    assert len(said) == 2 and all(x.startswith("SKIP") and "socket transport, measured, not judged" in x
                                  for x in said), said
    net = records.load(str(files[1])).meta["network"]
    assert net["nodes"] == 2 and net["floor_GBps"] is None and net["busbw_GBps"] > 0
    fleet = subprocess.run([PY, "-m", "nccl_bench", "fleet", *map(str, files), "--out", str(tmp_path / "fleet")],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert fleet.returncode == 0, fleet.stdout + fleet.stderr
    assert "2 node(s) from 2 file(s)" in fleet.stdout and "no node(s) flagged of 2" in fleet.stdout, fleet.stdout
    md = (tmp_path / "fleet" / "fleet.md").read_text()
    assert "| node0" in md and "| node1" in md and "network busbw GB/s" in md
    print(f"\naccept x 2 nodes (srun) + fleet: {time.monotonic() - t0:.1f} s; {fleet.stdout.splitlines()[-1]}")
