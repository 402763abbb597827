"""accept --network: the busbw between nodes (a bench file run across them) judged against a floor from this
node's InfiniBand/RoCE ports. The ports are read from a sysfs tree made here (NCCL_BENCH_SYSFS), laid out
as the kernel lays it out; over sockets the value is said, not judged; a bad file is one line and exit 2."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import REPO
from nccl_bench.accept import network, nics
from nccl_bench.core.errors import UsageError


def port(root, dev: str, n: int, state: str, rate: str, layer: str = "InfiniBand") -> None:
    d = root / "class" / "infiniband" / dev / "ports" / str(n)
    d.mkdir(parents=True)
    (d / "state").write_text(state + "\n")
    (d / "rate").write_text(rate + "\n")
    (d / "link_layer").write_text(layer + "\n")


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    port(root, "mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)")
    port(root, "mlx5_1", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)")
    port(root, "mlx5_2", 1, "1: DOWN", "400 Gb/sec (4X NDR)")
    port(root, "mlx5_3", 1, "4: ACTIVE", "200 Gb/sec (2X NDR)", "Ethernet")
    monkeypatch.setenv(nics.SYSFS_ENV, str(root))
    return root


def bench_file(tmp_path, busbw: float, hosts=("node0", "node1"), nranks: int = 16, env=None, coll="all_reduce"):
    rows = [{"collective": coll, "size": size, "count": size // 4, "type": "float", "redop": "sum", "root": -1,
             "cycle": 0, "out_of_place": {"time": 1.0, "alg_bw": busbw, "bus_bw": busbw if size == 1 << 30 else 1.0,
                                          "nwrong": 0}, "in_place": {"time": 1.0, "alg_bw": 1.0, "bus_bw": 1.0,
                                                                     "nwrong": 0}}
            for size in (1 << 20, 1 << 30)]
    doc = {"kind": "bench", "schema": 1, "rows": rows,
           "meta": {"hosts": list(hosts), "env": env or {}, "bench": {"nranks": nranks}}}
    path = tmp_path / "across.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_ports_are_read_as_sysfs_says(sysfs):
    got = {p.device: p for p in nics.read()}
    assert got["mlx5_0"].active and got["mlx5_0"].rate_Gbps == 400.0 and got["mlx5_0"].link_layer == "InfiniBand"
    assert not got["mlx5_2"].active
    assert got["mlx5_3"].name() == "mlx5_3/1 RoCE 200 Gb/s"


def test_the_floor_counts_one_active_port_per_rank_at_the_slowest_rate(sysfs):
    low, how = network.floor(nics.read(), 8, {}, 0.85)
    assert low == round(3 * 200 / 8 * network.NIC_EFFICIENCY * 0.85, 1)  # 3 active, the RoCE port the slowest
    assert "3 of 3 active port(s) at 200 Gb/s" in how and "nccl-tests#290" in how
    low, how = network.floor(nics.read(), 1, {}, 0.85)  # one rank per node drives one NIC
    assert low == round(200 / 8 * network.NIC_EFFICIENCY * 0.85, 1)


def test_over_sockets_the_value_is_said_not_judged(sysfs, tmp_path, monkeypatch):
    low, how = network.floor(nics.read(), 8, {"NCCL_IB_DISABLE": "1"}, 0.85)
    assert low is None and "socket transport" in how
    monkeypatch.setenv(nics.SYSFS_ENV, str(tmp_path / "none"))
    v, keep = network.verdict(bench_file(tmp_path, 3.0), 0.85)
    assert v.status == "skip" and v.measured == 3.0 and "none under /sys/class/infiniband" in v.detail
    assert keep["floor_GBps"] is None and keep["nodes"] == 2 and keep["ranks"] == 16


def test_a_slow_network_fails_and_a_fast_one_passes(sysfs, tmp_path):
    low = round(3 * 200 / 8 * network.NIC_EFFICIENCY * 0.85, 1)  # 58.6 GB/s
    v, keep = network.verdict(bench_file(tmp_path, 40.0), 0.85)
    assert v.status == "fail" and v.check == "network busbw all_reduce 1 GiB (2 nodes)", v
    assert keep["floor_GBps"] == low and len(keep["ports"]) == 4
    v, _ = network.verdict(bench_file(tmp_path, 60.0), 0.85)
    assert v.status == "pass" and v.required == f">= {low:g} GB/s"


@pytest.mark.parametrize("make, said", [
    (lambda t: t.joinpath("x.json").write_text("{not json") and str(t / "x.json"), "not a result of nccl-bench"),
    (lambda t: bench_file(t, 1.0, hosts=("node0",)), "ran on 1 node(s) (node0): run bench across the nodes"),
    (lambda t: bench_file(t, 1.0, coll="all_gather"), "no all_reduce rows"),
    (lambda t: str(t / "missing.json"), "cannot read it"),
])
def test_a_bad_file_is_one_line(tmp_path, make, said):
    with pytest.raises(UsageError) as e:
        network.verdict(make(tmp_path), 0.85)
    assert said in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_file_too_large_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(network, "MAX_FILE", 100)
    with pytest.raises(UsageError, match="more than a bench file holds"):
        network.verdict(bench_file(tmp_path, 1.0), 0.85)


def test_accept_refuses_a_bad_network_file_before_any_step(tmp_path):
    bad = bench_file(tmp_path, 1.0, hosts=("node0",))
    proc = subprocess.run([sys.executable, "-m", "nccl_bench", "accept", "--backend", "gloo", "--network", bad],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines() == [f"error: --network {bad}: ran on 1 node(s) (node0): run bench "
                                                "across the nodes"]
