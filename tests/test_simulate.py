"""The scale model: simulated ranks against one real TCPStore; op counts and stale reads."""

import pytest

from helpers import run
from nccl_bench.core.errors import UsageError
from nccl_bench.init.scale import SimulateOptions, estimate_bytes
from nccl_bench import records


def rows_by_config(doc):
    out = {}
    for r in doc.rows:
        out.setdefault((r["mode"], r["ranks_per_root"]), []).append(r)
    return out


def test_256_ranks_stock_reads_stale_ids_scoped_and_regular_never(tmp_path):
    out = tmp_path / "sim.json"
    proc = run(["-m", "nccl_bench", "init", "--simulate-ranks", "256", "--skew-max", "0.05", "--seed", "1",
                "--json", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "256 simulated ranks" in proc.stdout.splitlines()[0]  # said before starting
    doc = records.load(str(out))
    assert doc.kind == "init-simulate" and doc.meta["params"]["complete"]
    configs = rows_by_config(doc)
    assert set(configs) == {("regular", None)} | {(m, k) for m in ("stock", "scoped") for k in (1, 8, 128)}
    for (mode, k), rows in configs.items():
        assert [r["init"] for r in rows] == [0, 1]
        for r in rows:
            n, roots = 256, r["nroots"]
            assert roots == (1 if mode == "regular" else -(-n // k))
            # every rank: one wait and one multi-get of every root's key; each root: one set
            assert (r["sets"], r["waits"], r["multi_gets"]) == (roots, n, n)
            assert r["store_ops"] == r["full_store_ops"] == roots + 2 * n
            assert r["keys_read"] == r["full_keys_read"] == n * roots
            assert r["bytes_read"] == n * roots * 128
            assert not r["sampled"] and r["readers"] == n and r["timeouts"] == 0
            assert r["exchange_median_s"] > 0 and r["wall_s"] >= r["exchange_max_s"]
        # the first init is on fresh keys: nobody can read a previous one
        assert rows[0]["stale_ranks"] == 0
        if mode != "stock":
            assert all(r["stale_ranks"] == 0 for r in rows), (mode, k)
    stale = sum(r["stale_ranks"] for (m, _), rows in configs.items() if m == "stock" for r in rows)
    assert stale > 0, "stock re-inits under skew should read previous IDs"
    assert "stale ranks" in proc.stdout


def test_readers_are_sampled_above_the_read_budget(tmp_path):
    out = tmp_path / "sim.json"
    proc = run(["-m", "nccl_bench", "init", "--simulate-ranks", "512", "--init", "scoped", "--ranks-per-root", "1",
                "--read-budget", "4096", "--json", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = records.load(str(out)).rows
    assert len(rows) == 2
    for r in rows:
        assert r["sampled"] and r["readers"] == 8  # 4096 key reads / 512 roots
        assert r["sets"] == 512 and r["multi_gets"] == 8 and r["keys_read"] == 8 * 512
        assert r["full_keys_read"] == 512 * 512 and r["full_store_ops"] == 512 + 2 * 512
    assert "8 (sampled)" in proc.stdout


def test_memory_estimate_refuses_what_the_machine_cannot_hold():
    small = SimulateOptions(ranks=4096)
    assert estimate_bytes(small) < 2**30
    # ranks-per-root 1: every reader thread holds a multi-get of every root at once
    assert estimate_bytes(SimulateOptions(ranks=4096, ranks_per_root=[128])) < estimate_bytes(small)
    with pytest.raises(UsageError, match="GiB"):
        SimulateOptions(ranks=10**12)
    with pytest.raises(UsageError, match="--rounds"):
        SimulateOptions(ranks=8, reinits=0)
