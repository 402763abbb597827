"""GPU cases from gpu_cases.py; each is skipped with a reason where the GPUs are missing."""
import json

import pytest

from gpu_cases import CASES
from helpers import run
from nccl_bench.measure import benchfile
from nccl_bench.comm import gpu_count


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpu_case(case, tmp_path):
    have = gpu_count()
    if have < case.gpus:
        pytest.skip(f"needs {case.gpus} GPU(s), this machine has {have}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in case.argv]
    proc = run(argv, timeout=case.timeout)
    assert proc.returncode == case.exit_code, proc.stderr[-3000:]
    if case.expect == "stale-round-1-then-ok":
        rounds = [json.loads(l) for l in open(argv[1])]
        ok = [all(e["ok"] for e in r["ranks"]) for r in rounds]
        assert ok == [True, False, True], ok
        failed = rounds[1]["ranks"]
        assert all(e["error"]["kind"] == "hang" for e in failed)
        fps = {tuple(e["evidence"]["fingerprints"]) for e in failed}
        assert len(fps) > 1, "the ranks should disagree on the IDs they used"
    if case.expect == "bench-exact":
        rows = benchfile.rows(json.load(open(argv[argv.index("--json") + 1])))
        asked = argv[argv.index("--collective") + 1]
        assert asked == "all" or {r["collective"] for r in rows} == set(asked.split(","))
        assert all(r[p]["nwrong"] in (0, None) for r in rows for p in ("out_of_place", "in_place"))
        assert all(r["out_of_place"]["bus_bw"] >= 0 and r["out_of_place"]["time"] > 0 for r in rows)
        if "--algo" in argv:
            assert {r["algo"] for r in rows} == {"ring", "tree"}
            from nccl_bench.measure import collectives  # every one that runs on this many ranks (hypercube: 2^k)
            fit = {c for c in collectives.NAMES if not collectives.get(c).unfit(rows[0]["nranks"])}
            assert {r["collective"] for r in rows} == fit
            # NCCL's word for the algorithm it used, "p2p" for point-to-point, None where not reported
            assert all(r["algo_confirmed"] in (None, "p2p") or r["algo_confirmed"].lower() == r["algo"]
                       for r in rows)
    if case.expect == "corrupt-round-1":
        rounds = [json.loads(l) for l in open(argv[argv.index("--journal") + 1])]
        rounds = [r for r in rounds if r.get("type") == "round"]
        assert [r["verdict"] for r in rounds] == ["ok", "wrong", "ok"], [r["verdict"] for r in rounds]
        assert "corrupted at the source" in rounds[1]["diagnosis"]
    if case.expect == "behind-hang-round-10":
        rounds = [json.loads(l) for l in open(argv[argv.index("--journal") + 1])]
        rounds = [r for r in rounds if r.get("type") == "round"]
        assert [r["round"] for r in rounds] == list(range(30))
        assert [r["round"] for r in rounds if r["verdict"] != "ok"] == [10], [r["verdict"] for r in rounds]
        assert "rank 1 never entered verify" in rounds[10]["diagnosis"]
        assert all(r["destroy_ms"] is not None for r in rounds if r["verdict"] == "ok")
        assert all(x["teardown_s"] is not None for r in rounds for x in r["ranks"])
        assert "ncclCommDestroy joins NCCL's proxy threads" in proc.stdout
    if case.expect == "same-group-stale":
        rounds = [json.loads(l) for l in open(argv[argv.index("--journal") + 1])]
        rounds = [r for r in rounds if r.get("type") == "round"]
        assert [(r["mode"], r["verdict"] == "ok") for r in rounds] == [
            ("stock", True), ("stock", False), ("scoped", True), ("scoped", True)], [r["verdict"] for r in rounds]
        assert rounds[1]["stale"] and rounds[1]["diagnosis"].startswith("stale ID: "), rounds[1]["diagnosis"]
        assert all(s["from"] == "round 0" for s in rounds[1]["stale"])
