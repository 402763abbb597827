"""locate on gloo: 8 ranks on 4 fake nodes of 2; injected faults are named, and only they; the pair
schedule is a round-robin tournament."""
from __future__ import annotations

import itertools
import json
import socket

import pytest

from helpers import REPO, one_line_error, run
from nccl_bench.core.tournament import tournament
from nccl_bench.locate.halves import halves
from nccl_bench import records


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 16])
def test_the_schedule_is_a_round_robin_tournament(n):
    rounds = tournament(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    for pairs in rounds:
        ranks = [r for p in pairs for r in p]
        assert len(ranks) == len(set(ranks)), pairs  # no rank in two pairs of a round
    met = [p for pairs in rounds for p in pairs]
    assert sorted(met) == list(itertools.combinations(range(n), 2))  # each pair once: both directions once
    assert halves(list(range(n)))[0] + halves(list(range(n)))[1] == list(range(n))


def locate(tmp_path, inject: str, *args):
    # --fraction 0.02: an injected 100 ms (before both sides of a direction) reads far below it, a healthy pair on a
    # loaded 2-core CI machine far above (docs/validation.md)
    out = tmp_path / f"locate-{len(list(tmp_path.iterdir()))}.json"
    proc = run(["-m", "nccl_bench", "locate", "--backend", "gloo", "--nranks", "8", "--timeout", "30",
                "--fraction", "0.02", "--json", str(out), *args], timeout=240,
               env={"NCCL_BENCH_FAKE_NODES": "4x2", "NCCL_BENCH_LOCATE_INJECT": inject})
    doc = records.load(str(out)) if out.exists() else None
    return proc, doc


def named(doc) -> list[tuple[str, list[int]]]:
    return [(s["what"], s["ranks"]) for s in doc.meta["suspects"]]


def test_healthy_names_nobody_and_writes_json_heatmap_junit(tmp_path):
    proc, doc = locate(tmp_path, "", "--junit", str(tmp_path / "locate.xml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert named(doc) == [] and "locate: no suspect" in proc.stdout
    assert len(doc.rows) == 8 * 7 and {r["class"] for r in doc.rows} == {"same node", "network"}
    assert doc.meta["nodes"] == ["node-a", "node-a", "node-b", "node-b", "node-c", "node-c", "node-d", "node-d"]
    assert len(doc.meta["bisection"]) == 1  # the world's all_reduce only
    assert (tmp_path / "locate-0.png").read_bytes()[:4] == b"\x89PNG"
    xml = (tmp_path / "locate.xml").read_text()
    assert 'status="pass"' in xml or 'failures="0"' in xml


def test_a_slow_sender_is_named_and_only_it(tmp_path):
    proc, doc = locate(tmp_path, "slow-send:5:0.1")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert named(doc) == [("rank", [5])], proc.stdout
    assert "SUSPECT rank 5 (node-c GPU 1): every pair it sends on" in proc.stdout
    assert len(doc.meta["bisection"]) - 1 <= 2 * 3  # at most 2 * ceil(log2 8) below the world's


def test_a_pair_slow_only_between_each_other_is_named_as_a_pair(tmp_path):
    proc, doc = locate(tmp_path, "slow-pair:2:6:0.1")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert named(doc) == [("pair", [2, 6])], proc.stdout
    assert "both directions" in doc.meta["suspects"][0]["evidence"][0]


def test_a_corrupting_rank_is_named_by_the_bisection(tmp_path):
    proc, doc = locate(tmp_path, "corrupt:3")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert named(doc) == [("rank", [3])], proc.stdout
    steps = doc.meta["bisection"]
    assert [g["members"] for g in steps[-1]["groups"]] == [[2], [3]] and len(steps) - 1 <= 2 * 3


@pytest.mark.parametrize("args, says", [(["--fraction", "1.5"], "--fraction must be between 0 and 1"),
                                        (["--size", "0"], "--size"), (["--iters", "0"], "--iters must be >= 1")])
def test_bad_input_is_one_line_and_exit_2(args, says):
    err = one_line_error(run(["-m", "nccl_bench", "locate", "--backend", "gloo", *args], timeout=60))
    assert says in err, err


def test_accept_locate_runs_locate_when_accept_fails(tmp_path):
    from nccl_bench.records.profiles import BUILTIN_DIR
    profile = json.loads((BUILTIN_DIR / "gloo-cpu.json").read_text())
    for floor in profile["busbw_min_GBps"]:
        floor["min"] = 1e6  # no machine meets it: accept fails, and locate follows the world's all_reduce
    path = tmp_path / "impossible.json"
    path.write_text(json.dumps({**profile, "name": "impossible"}))
    # the bench step alone (--steps): the floors it fails are what sends accept to locate
    proc = run(["-m", "nccl_bench", "accept", "--backend", "gloo", "--profile", str(path), "--steps", "bench",
                "--locate"], timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "accept FAIL against profile impossible" in proc.stdout and "accept: locate ..." in proc.stdout
    assert "SUSPECT ranks 0, 1: bisection (world all_reduce" in proc.stdout and "< profile floor 1e+06" in proc.stdout


def test_one_rank_says_pairs_need_two_and_checks_its_gpu(tmp_path):
    out = tmp_path / "one.json"
    proc = run(["-m", "nccl_bench", "locate", "--backend", "gloo", "--nranks", "1", "--json", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = [line for line in proc.stdout.splitlines() if "need two ranks" in line]
    assert len(said) == 1 and "Traceback" not in proc.stderr
    doc = records.load(str(out))
    assert doc.meta["single_rank"] and doc.meta["verdict"] == "HEALTHY" and doc.rows == []
    assert doc.meta["checks"][0]["gpu"]["why"].startswith("no GPU")


@pytest.mark.parametrize("nnodes", [2, 3])
def test_a_slow_node_link_is_named_as_the_link_not_its_gpus(nnodes):
    # node1 sends slowly across the network (tc tbf on its link); its pairs inside the node are fine
    from nccl_bench.locate import suspects as S
    n = 2 * nnodes
    nodes, local = [f"node{r // 2}" for r in range(n)], [r % 2 for r in range(n)]
    sec = {(s, d): 1.0 if nodes[s] == "node1" != nodes[d] else 0.01 for s in range(n) for d in range(n) if s != d}
    found = S.from_pairs(S.pair_rows(sec, {}, 1 << 20, nodes, local, {}, 0.1), n, nodes, local)
    assert [s["what"] for s in found] == ["link"], found
    if nnodes == 3:  # a third node tells which end: node1's own link
        assert found[0]["who"] == "node1's network link" and found[0]["ranks"] == [2, 3]
        assert "its pairs inside the node are not slow" in found[0]["evidence"]
    else:  # two nodes: the path, and why not more
        assert found[0]["who"] == "the network path node1 -> node0" and "third node" in found[0]["evidence"][1]


def _two_agents(tmp_path, hostids: list[str | None]):
    """Two torchrun agents on this machine (one hostname), one rank each, c10d rendezvous on loopback;
    agent i with NCCL_HOSTID=hostids[i] where given. Returns (exit code, stdout, stderr) per agent."""
    import os
    import subprocess
    import sys
    import uuid
    port, token, out = 29480 + os.getpid() % 400, uuid.uuid4().hex[:8], tmp_path / "locate.json"
    procs = []
    for i, hostid in enumerate(hostids):
        env = {k: v for k, v in os.environ.items() if k != "NCCL_HOSTID"}
        env.update(OMP_NUM_THREADS="1", **({"NCCL_HOSTID": hostid} if hostid else {}))
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", token,
                "--max-restarts", "0", "-m", "nccl_bench", "locate", "--backend", "gloo", "--size", "64K",
                "--iters", "3", "--no-picture", "--json", str(out)]
        procs.append(subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, start_new_session=True))
    got = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        got.append((p.returncode, o, e))
    return got, out


def test_agents_on_one_machine_with_their_own_nccl_hostid_are_two_nodes(tmp_path):
    """Issue 51: ranks are grouped as NCCL groups them (hostname and NCCL_HOSTID), not by hostname alone."""
    got, out = _two_agents(tmp_path, ["a", "b"])
    text = "".join(o + e for _, o, e in got)
    assert "locate: 2 ranks on 2 node(s)" in text, text[-3000:]
    assert all(code in (0, 1) for code, _, _ in got), text[-3000:]  # two ranks on a busy CPU: one way may lag
    assert not [x for x in text.splitlines() if x.startswith("SUSPECT") and "same node" in x], text[-3000:]
    rows = records.load(str(out)).rows
    assert {r["class"] for r in rows} == {"network"}  # no NVLink (or other same-node) pair
    assert {r["src_node"] for r in rows} == {f"{socket.gethostname()}:a", f"{socket.gethostname()}:b"}


def test_agents_on_one_machine_without_hostid_are_one_nccl_host_and_the_launcher_is_quoted(tmp_path):
    got, _ = _two_agents(tmp_path, [None, None])
    text = "".join(o + e for _, o, e in got)
    assert "locate: 2 ranks on 1 node(s)" in text, text[-3000:]
    assert "the launcher says 2 node(s) (GROUP_RANK=0, GROUP_RANK=1), NCCL sees 1 host(s)" in text, text[-3000:]


def test_past_16_ranks_the_terminal_shows_each_class_and_the_slowest_pairs_not_a_column_per_rank(tmp_path):
    """64 ranks (8 nodes of 8) once printed 64 columns, over 400 characters a line: one line per class of pair
    and the slowest pairs now, the whole matrix in the JSON and the heatmap, which stops growing past 32 ranks."""
    from nccl_bench.core.figures import MAX_HEATMAP_INCHES, pair_heatmap
    from nccl_bench.locate import pairtable
    n, rows = 64, []
    for s, d in itertools.permutations(range(n), 2):
        same = s // 8 == d // 8
        busbw = (40.0 if same else 20.0) * (0.3 if (s, d) == (9, 17) else 1.0)
        rows.append({"src": s, "dst": d, "class": "same node" if same else "network", "busbw": busbw,
                     "ratio": busbw / (40.0 if same else 20.0), "slow": (s, d) == (9, 17)})
    lines = pairtable.lines(rows, n)
    assert max(len(line) for line in lines) <= 120 and len(lines) == 2 + 2 + 1 + pairtable.SLOWEST + 1, lines
    assert any(line.split()[:2] == ["network", str(56 * 64)] and "9>17" in line for line in lines), lines
    assert lines[-1 - pairtable.SLOWEST] == "  9>17: 6 GB/s, 0.30 x", lines
    small = pairtable.lines(rows[:12], 4)  # 4 ranks: the whole matrix, a column per rank
    assert small[0].split() == ["src\\dst", "0", "1", "2", "3"], small
    png = pair_heatmap([(r["src"], r["dst"], r["ratio"], r["slow"]) for r in rows], n, "64 ranks", tmp_path / "m.png")
    width, height = int.from_bytes(png.read_bytes()[16:20], "big"), int.from_bytes(png.read_bytes()[20:24], "big")
    assert max(width, height) <= MAX_HEATMAP_INCHES * 110 * 1.1, (width, height)

